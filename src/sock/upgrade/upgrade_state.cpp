#include "sock/upgrade/upgrade_state.hpp"

#include <cerrno>

namespace vsock::sock {

UpgradeAction UpgradeState::on(UpgradeEvent event) {
  last_event_ = event;
  if (phase_ == UpgradePhase::kFallback || phase_ == UpgradePhase::kFailed) return on_terminal(event);
  const bool client = role_ == UpgradeRole::kClient;
  switch (event) {
    case UpgradeEvent::kConnectStarted:
      if (phase_ != UpgradePhase::kKernel || !client) return illegal(event);
      phase_ = UpgradePhase::kConnecting;
      return UpgradeAction::kNone;
    case UpgradeEvent::kRequestAccepted:
      if (phase_ != UpgradePhase::kKernel || client) return illegal(event);
      phase_ = UpgradePhase::kAccepting;
      return UpgradeAction::kNone;
    case UpgradeEvent::kDeclined:
      if (phase_ != UpgradePhase::kKernel) return illegal(event);
      return fall_back(FallbackReason::kDeclined, "not upgraded");
    case UpgradeEvent::kCmEstablished:
      return on_cm_established();
    case UpgradeEvent::kCmRejected:
    case UpgradeEvent::kCmRefused:
    case UpgradeEvent::kCmNoListener:
      // Only the active side is rejected, and only while it waits.
      if (phase_ != UpgradePhase::kConnecting) return illegal(event);
      if (event == UpgradeEvent::kCmRefused)
        return fall_back(FallbackReason::kRefused, "peer refused this connection's upgrade");
      return event == UpgradeEvent::kCmRejected ? fall_back(FallbackReason::kRejected, "peer rejected the upgrade")
                                                : fall_back(FallbackReason::kNoListener, "no rdma_cm listener");
    case UpgradeEvent::kCmUnreachable:
      return cm_failure(FallbackReason::kUnreachable, "peer unreachable over rdma_cm");
    case UpgradeEvent::kCmTimeout:
      return cm_failure(FallbackReason::kTimeout, "rdma_cm timed out");
    case UpgradeEvent::kCmError:
      return cm_failure(FallbackReason::kLocalError, "local rdma_cm error");
    case UpgradeEvent::kNoResources:
      // Only the client, between the server's answer and its own start.
      if (!client || phase_ != UpgradePhase::kConnecting) return illegal(event);
      return fall_back(FallbackReason::kNoResources, "no resources for the channel here");
    case UpgradeEvent::kBoundReceived:
      return on_bound_received();
    case UpgradeEvent::kSwitchSent:
      return on_switch_sent();
    case UpgradeEvent::kSwitchReceived:
      return on_switch_received();
    case UpgradeEvent::kTcpEof:
      // Before anything can be in a ring the upgrade is pointless now. The
      // server cannot know that: the client's Switch may be in flight behind
      // its FIN, so it goes on (SwitchReader decides what the EOF means once
      // the channel is drained), as does any side that has switched.
      if (phase_ == UpgradePhase::kKernel || (client && !sent_))
        return fall_back(FallbackReason::kPeerClosed, "TCP closed before the upgrade");
      return UpgradeAction::kNone;
    case UpgradeEvent::kTcpReset:
      if (phase_ == UpgradePhase::kKernel) return fall_back(FallbackReason::kPeerClosed, "TCP reset before the upgrade");
      return fail(ECONNRESET, "TCP connection reset");
    case UpgradeEvent::kTransportError:
      if (phase_ == UpgradePhase::kKernel) return illegal(event);
      if (committed()) return fail(ECONNRESET, "queue pair failed after the switch");
      return fall_back(FallbackReason::kTransportError, "queue pair failed before the switch");
    case UpgradeEvent::kProtocolError:
      return fail(EPROTO, "peer broke the protocol");
    case UpgradeEvent::kWriteShut:
      // Nothing of ours is in a ring yet, and the token could not follow.
      if (client && !sent_ && phase_ != UpgradePhase::kKernel)
        return fall_back(FallbackReason::kPeerClosed, "TCP writing shut before the client's Switch");
      return UpgradeAction::kNone;
  }
  return illegal(event);
}

UpgradeAction UpgradeState::on_cm_established() {
  if (cm_established_) return illegal(UpgradeEvent::kCmEstablished);
  if (role_ == UpgradeRole::kClient) {
    if (phase_ != UpgradePhase::kConnecting) return illegal(UpgradeEvent::kCmEstablished);
    cm_established_ = true;
    phase_ = UpgradePhase::kEstablished;
    // The client knows the server's ring, but switches only once the
    // server's application has the socket (Bound): until then it may
    // still fall back.
    return UpgradeAction::kNone;
  }
  // The server's queue pair receives from the moment it accepted, and the
  // client's Switch can be polled before rdma_cm reports ESTABLISHED: the
  // event may come in any phase after kAccepting.
  if (phase_ != UpgradePhase::kAccepting && phase_ != UpgradePhase::kEstablished &&
      phase_ != UpgradePhase::kSwitched)
    return illegal(UpgradeEvent::kCmEstablished);
  cm_established_ = true;
  if (phase_ != UpgradePhase::kAccepting) return UpgradeAction::kNone;
  phase_ = UpgradePhase::kEstablished;
  bound_ = true;
  return UpgradeAction::kSendBound;  // accept() gave us the socket, the queue pair is up
}

UpgradeAction UpgradeState::on_bound_received() {
  if (role_ != UpgradeRole::kClient || phase_ != UpgradePhase::kEstablished || bound_ || sent_)
    return fail(EPROTO, "Bound out of order");
  bound_ = true;
  return UpgradeAction::kSendSwitch;
}

UpgradeAction UpgradeState::cm_failure(FallbackReason reason, const char* why) {
  const bool pending = phase_ == UpgradePhase::kConnecting ||
                       (role_ == UpgradeRole::kServer && !cm_established_ &&
                        (phase_ == UpgradePhase::kAccepting || phase_ == UpgradePhase::kEstablished ||
                         phase_ == UpgradePhase::kSwitched));
  if (!pending) {
    switch (reason) {
      case FallbackReason::kUnreachable: return illegal(UpgradeEvent::kCmUnreachable);
      case FallbackReason::kTimeout: return illegal(UpgradeEvent::kCmTimeout);
      default: return illegal(UpgradeEvent::kCmError);
    }
  }
  if (committed()) return fail(ECONNRESET, why);
  return fall_back(reason, why);
}

UpgradeAction UpgradeState::on_switch_sent() {
  if (sent_ || phase_ != UpgradePhase::kEstablished) return illegal(UpgradeEvent::kSwitchSent);
  // The server sends only in reply: before the client's Switch it does not
  // know where to write.
  if (role_ == UpgradeRole::kServer && !received_) return illegal(UpgradeEvent::kSwitchSent);
  // The client only after the server's Bound.
  if (role_ == UpgradeRole::kClient && !bound_) return illegal(UpgradeEvent::kSwitchSent);
  sent_ = true;
  if (received_) phase_ = UpgradePhase::kSwitched;
  return UpgradeAction::kNone;
}

UpgradeAction UpgradeState::on_switch_received() {
  if (received_) return fail(EPROTO, "second Switch from the peer");
  if (role_ == UpgradeRole::kClient) {
    // The server may only answer ours.
    if (phase_ != UpgradePhase::kEstablished || !sent_) return fail(EPROTO, "Switch from the server before ours");
    received_ = true;
    phase_ = UpgradePhase::kSwitched;
    return UpgradeAction::kNone;
  }
  if (phase_ != UpgradePhase::kAccepting && phase_ != UpgradePhase::kEstablished)
    return illegal(UpgradeEvent::kSwitchReceived);
  received_ = true;
  phase_ = UpgradePhase::kEstablished;
  return UpgradeAction::kSendSwitch;  // now we know the client's ring
}

UpgradeAction UpgradeState::on_terminal(UpgradeEvent event) {
  if (phase_ == UpgradePhase::kFailed) return UpgradeAction::kNone;  // already reset
  // On TCP for good. Late rdma_cm or queue pair events of the torn-down
  // attempt and the kernel's own news change nothing; starting over or a
  // switch cannot happen without a bug.
  switch (event) {
    case UpgradeEvent::kConnectStarted:
    case UpgradeEvent::kRequestAccepted:
    case UpgradeEvent::kSwitchSent:
    case UpgradeEvent::kSwitchReceived:
    case UpgradeEvent::kProtocolError:
      return illegal(event);
    default:
      return UpgradeAction::kNone;
  }
}

UpgradeAction UpgradeState::fall_back(FallbackReason reason, const char* why) {
  phase_ = UpgradePhase::kFallback;
  reason_ = reason;
  why_ = why;
  return UpgradeAction::kFallBack;
}

UpgradeAction UpgradeState::fail(int error, const char* why) {
  phase_ = UpgradePhase::kFailed;
  error_ = error;
  why_ = why;
  return UpgradeAction::kReset;
}

UpgradeAction UpgradeState::illegal(UpgradeEvent event) {
  (void)event;  // the caller logs event_name(event) with why()
  return fail(EPROTO, "upgrade event out of order");
}

bool UpgradeState::remember_peer(FallbackReason reason) {
  switch (reason) {
    case FallbackReason::kRejected:
    case FallbackReason::kNoListener:
    case FallbackReason::kUnreachable:
    case FallbackReason::kTimeout:
      return true;
    default:
      return false;
  }
}

const char* phase_name(UpgradePhase phase) {
  switch (phase) {
    case UpgradePhase::kKernel: return "kernel";
    case UpgradePhase::kConnecting: return "connecting";
    case UpgradePhase::kAccepting: return "accepting";
    case UpgradePhase::kEstablished: return "established";
    case UpgradePhase::kSwitched: return "switched";
    case UpgradePhase::kFallback: return "fallback";
    case UpgradePhase::kFailed: return "failed";
  }
  return "?";
}

const char* event_name(UpgradeEvent event) {
  switch (event) {
    case UpgradeEvent::kConnectStarted: return "connect-started";
    case UpgradeEvent::kRequestAccepted: return "request-accepted";
    case UpgradeEvent::kDeclined: return "declined";
    case UpgradeEvent::kCmEstablished: return "cm-established";
    case UpgradeEvent::kCmRejected: return "cm-rejected";
    case UpgradeEvent::kCmRefused: return "cm-refused";
    case UpgradeEvent::kCmNoListener: return "cm-no-listener";
    case UpgradeEvent::kCmUnreachable: return "cm-unreachable";
    case UpgradeEvent::kCmTimeout: return "cm-timeout";
    case UpgradeEvent::kCmError: return "cm-error";
    case UpgradeEvent::kNoResources: return "no-resources";
    case UpgradeEvent::kBoundReceived: return "bound-received";
    case UpgradeEvent::kSwitchSent: return "switch-sent";
    case UpgradeEvent::kSwitchReceived: return "switch-received";
    case UpgradeEvent::kTcpEof: return "tcp-eof";
    case UpgradeEvent::kTcpReset: return "tcp-reset";
    case UpgradeEvent::kTransportError: return "transport-error";
    case UpgradeEvent::kProtocolError: return "protocol-error";
    case UpgradeEvent::kWriteShut: return "write-shut";
  }
  return "?";
}

const char* fallback_reason_name(FallbackReason reason) {
  switch (reason) {
    case FallbackReason::kNone: return "none";
    case FallbackReason::kDeclined: return "declined";
    case FallbackReason::kNoRequest: return "no-request";
    case FallbackReason::kRejected: return "rejected";
    case FallbackReason::kNoListener: return "no-listener";
    case FallbackReason::kUnreachable: return "unreachable";
    case FallbackReason::kTimeout: return "timeout";
    case FallbackReason::kLocalError: return "local-error";
    case FallbackReason::kPeerClosed: return "peer-closed";
    case FallbackReason::kTransportError: return "transport-error";
    case FallbackReason::kRefused: return "refused";
    case FallbackReason::kNoResources: return "no-resources";
  }
  return "?";
}

}  // namespace vsock::sock
