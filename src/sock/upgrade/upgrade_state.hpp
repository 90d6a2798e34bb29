// UpgradeState: where one TCP connection stands in its upgrade to an RC
// queue pair (DESIGN decisions 2, 3, 8; docs/protocol.md §1–2), as an
// explicit state machine. Events come from rdma_cm, the queue pair and the
// kernel socket; each returns the action the caller must take. No I/O here.
//
// The order of the switch: the client knows the server's ring from
// UpgradeAccept, so it sends its Switch as soon as rdma_cm says the
// connection is established; the server learns the client's ring from that
// Switch and sends its own in reply. Each direction switches on its own.
//
// Falling back or resetting: while no byte can have gone into a ring, any
// failure leaves the connection on TCP (kFallback: decision 8). Once one
// may have — the client has sent its Switch, or the server has received
// the client's — TCP alone can no longer deliver the stream, so a failure
// resets the connection (kFailed). A protocol violation always resets
// (protocol.md: a broken peer gets its connection reset); an event that
// cannot happen in the current state (a local bug or a peer out of order)
// is one too: kFailed with EPROTO, never a crash.
#pragma once
#include <cstdint>

namespace vsock::sock {

enum class UpgradeRole : uint8_t { kClient, kServer };

enum class UpgradePhase : uint8_t {
  kKernel,       // on TCP; no upgrade under way (yet)
  kConnecting,   // client: connect request sent, waiting for rdma_cm
  kAccepting,    // server: request matched and accepted, waiting for rdma_cm
  kEstablished,  // queue pair up; at least one direction still on TCP
  kSwitched,     // both directions on the ring
  kFallback,     // on TCP for good; fallback_reason() says why
  kFailed,       // the connection is broken; error() says how
};

enum class UpgradeEvent : uint8_t {
  kConnectStarted,   // client: kernel connect done, rdma_cm request sent
  kRequestAccepted,  // server: a request matched this socket, rdma_accept sent
  kDeclined,         // no attempt after all (rule, no device, cached peer, no request)
  kCmEstablished,    // rdma_cm: ESTABLISHED (client: after rdma_establish)
  // rdma_cm ended the attempt (CmOutcome). A bad UpgradeAccept (wrong
  // nonce, bad ring) is reported as kCmRejected: protocol.md §1.
  kCmRejected,
  // The server refused this one connection (a Reject of reason
  // kConnection: a duplicate, a socket closed or handed off first): the
  // peer runs libvsock, so it is not remembered.
  kCmRefused,
  kCmNoListener,
  kCmUnreachable,
  kCmTimeout,
  kCmError,          // local rdma_cm failure (address, route)
  kNoResources,      // client: the answer came, but its send buffer could not be registered here
  kBoundReceived,    // client: the server's Bound arrived (its accept() returned the socket)
  kSwitchSent,       // our Switch is posted; writes now go to the channel
  kSwitchReceived,   // the peer's Switch arrived and parsed
  kTcpEof,           // the kernel socket read end of file
  kTcpReset,         // the kernel socket was reset (ECONNRESET, EPIPE)
  kTransportError,   // the queue pair failed (error completion, DISCONNECTED)
  kProtocolError,    // a value from the peer failed a check
  // Our application shut the TCP connection's writing side (shutdown
  // SHUT_WR, its FIN sent). A client that has not sent its Switch yet can
  // never switch: its token must follow its TCP part on TCP (protocol.md
  // §2), and nothing can follow a FIN.
  kWriteShut,
};

enum class FallbackReason : uint8_t {
  kNone,
  kDeclined,
  kRejected,
  kNoListener,
  kUnreachable,
  kTimeout,
  kLocalError,
  kPeerClosed,      // the TCP connection (or the client's writing side of it) ended before the upgrade did
  kTransportError,  // the queue pair failed before anything was switched
  kRefused,         // the server refused this connection only (not remembered)
  kNoRequest,       // server: accepted, and no request came for it in time
  kNoResources,     // no channel could be made here: memory budget, locked memory, device limits
};

enum class UpgradeAction : uint8_t {
  kNone,
  // Switch our sending direction: SwitchWriter::switch_now(), post the
  // Switch, then report kSwitchSent.
  kSendSwitch,
  // Server: post Bound (the socket is accept()ed and the queue pair is up):
  // the client may switch now.
  kSendBound,
  // Destroy the rdma_cm id and channel; the socket stays on TCP. Remember
  // the peer in the PeerFailureCache if remember_peer(fallback_reason()).
  kFallBack,
  // Destroy the queue pair and reset the TCP connection (RST); calls on the
  // socket now fail with error().
  kReset,
};

class UpgradeState {
 public:
  explicit UpgradeState(UpgradeRole role) : role_(role) {}

  UpgradeAction on(UpgradeEvent event);

  UpgradeRole role() const { return role_; }
  UpgradePhase phase() const { return phase_; }
  bool switch_sent() const { return sent_; }          // our direction is on the ring
  bool switch_received() const { return received_; }  // the peer's direction is
  bool cm_established() const { return cm_established_; }
  FallbackReason fallback_reason() const { return reason_; }
  int error() const { return error_; }  // in kFailed: EPROTO or ECONNRESET
  const char* why() const { return why_; }  // static text for logs, "" if none
  UpgradeEvent last_event() const { return last_event_; }  // the latest on() (for logs)

  // A byte may be in a ring: from here on a failure resets.
  bool committed() const { return role_ == UpgradeRole::kClient ? sent_ : received_; }
  // Whether to put the peer in the PeerFailureCache after this fallback:
  // the next connection to it would wait for the same outcome.
  static bool remember_peer(FallbackReason reason);

 private:
  UpgradeAction fall_back(FallbackReason reason, const char* why);
  UpgradeAction fail(int error, const char* why);
  UpgradeAction illegal(UpgradeEvent event);
  UpgradeAction cm_failure(FallbackReason reason, const char* why);
  UpgradeAction on_switch_sent();
  UpgradeAction on_switch_received();
  UpgradeAction on_cm_established();
  UpgradeAction on_bound_received();
  UpgradeAction on_terminal(UpgradeEvent event);

  UpgradeRole role_;
  UpgradePhase phase_ = UpgradePhase::kKernel;
  FallbackReason reason_ = FallbackReason::kNone;
  bool sent_ = false;
  bool received_ = false;
  bool cm_established_ = false;
  bool bound_ = false;  // client: Bound received; server: Bound sent
  int error_ = 0;
  const char* why_ = "";
  UpgradeEvent last_event_ = UpgradeEvent::kConnectStarted;
};

const char* phase_name(UpgradePhase phase);
const char* event_name(UpgradeEvent event);
const char* fallback_reason_name(FallbackReason reason);

}  // namespace vsock::sock
