// StreamChannel::PostBatch: the work requests one pump queues, posted with
// one ibv_post_send (stream_channel.cpp, stream_channel_growth.cpp).
#pragma once
#include <infiniband/verbs.h>

#include "sock/stream/stream_channel.hpp"

namespace vsock::sock {

// Work requests queued during one pump and posted with one ibv_post_send.
class StreamChannel::PostBatch {
 public:
  static constexpr int kMax = 16;
  explicit PostBatch(StreamChannel& channel) : channel_(channel) {}

  // A zeroed work request for `sequence`, with its scatter entry attached.
  ibv_send_wr& add(uint64_t sequence, bool signaled) {
    if (count_ == kMax) post();
    ibv_send_wr& wr = wrs_[count_];
    wr = ibv_send_wr{};
    sges_[count_] = ibv_sge{};
    wr.wr_id = sequence;
    wr.sg_list = &sges_[count_];
    wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    ++count_;
    if (signaled) ++channel_.counters_.signaled_wrs;
    return wr;
  }

  void post() {
    if (count_ == 0) return;
    for (int i = 0; i < count_; ++i) wrs_[i].next = i + 1 < count_ ? &wrs_[i + 1] : nullptr;
    count_ = 0;
    ++channel_.counters_.post_calls;
    if (!channel_.qp_.post_send(&wrs_[0])) channel_.fail(ECONNRESET, "ibv_post_send failed");
  }

 private:
  StreamChannel& channel_;
  ibv_send_wr wrs_[kMax];
  ibv_sge sges_[kMax];
  int count_ = 0;
};

}  // namespace vsock::sock
