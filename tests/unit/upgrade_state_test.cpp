// UpgradeState: every event in every reachable state, for both roles. The
// table below lists the legal transitions; everything not in it must end
// in kFailed with EPROTO and a reset, never a crash.
#include "sock/upgrade/upgrade_state.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

namespace vsock::sock {
namespace {

using A = UpgradeAction;
using E = UpgradeEvent;
using P = UpgradePhase;
using R = FallbackReason;

constexpr E kAllEvents[] = {
    E::kConnectStarted, E::kRequestAccepted, E::kDeclined,   E::kCmEstablished,  E::kCmRejected,
    E::kCmNoListener,   E::kCmUnreachable,   E::kCmTimeout,  E::kCmError,        E::kSwitchSent,
    E::kSwitchReceived, E::kTcpEof,          E::kTcpReset,   E::kTransportError, E::kProtocolError,
    E::kBoundReceived,  E::kCmRefused,       E::kNoResources,    E::kWriteShut,
};

// A reachable state: the events that lead there from kKernel.
struct Start {
  const char* name;
  UpgradeRole role;
  std::vector<E> path;
};

// What one event does from one state.
struct Outcome {
  P phase;
  A action;
  int error = 0;           // in kFailed
  R reason = R::kNone;     // in kFallback
};

Outcome fallback(R reason) { return {P::kFallback, A::kFallBack, 0, reason}; }
Outcome reset(int error) { return {P::kFailed, A::kReset, error, R::kNone}; }
Outcome stay(P phase, A action = A::kNone) { return {phase, action, 0, R::kNone}; }

struct Rule {
  const char* start;
  E event;
  Outcome outcome;
};

const Start kStarts[] = {
    {"client-kernel", UpgradeRole::kClient, {}},
    {"client-connecting", UpgradeRole::kClient, {E::kConnectStarted}},
    {"client-established", UpgradeRole::kClient, {E::kConnectStarted, E::kCmEstablished}},
    {"client-bound", UpgradeRole::kClient, {E::kConnectStarted, E::kCmEstablished, E::kBoundReceived}},
    {"client-sent", UpgradeRole::kClient,
     {E::kConnectStarted, E::kCmEstablished, E::kBoundReceived, E::kSwitchSent}},
    {"client-switched", UpgradeRole::kClient,
     {E::kConnectStarted, E::kCmEstablished, E::kBoundReceived, E::kSwitchSent, E::kSwitchReceived}},
    {"client-fallback", UpgradeRole::kClient, {E::kConnectStarted, E::kCmTimeout}},
    {"client-failed", UpgradeRole::kClient, {E::kConnectStarted, E::kTcpReset}},
    {"server-kernel", UpgradeRole::kServer, {}},
    {"server-accepting", UpgradeRole::kServer, {E::kRequestAccepted}},
    {"server-established", UpgradeRole::kServer, {E::kRequestAccepted, E::kCmEstablished}},
    {"server-received-early", UpgradeRole::kServer, {E::kRequestAccepted, E::kSwitchReceived}},
    {"server-received", UpgradeRole::kServer, {E::kRequestAccepted, E::kCmEstablished, E::kSwitchReceived}},
    {"server-switched-early", UpgradeRole::kServer, {E::kRequestAccepted, E::kSwitchReceived, E::kSwitchSent}},
    {"server-switched", UpgradeRole::kServer,
     {E::kRequestAccepted, E::kCmEstablished, E::kSwitchReceived, E::kSwitchSent}},
    {"server-fallback", UpgradeRole::kServer, {E::kDeclined}},
    {"server-failed", UpgradeRole::kServer, {E::kProtocolError}},
};

// The legal transitions (and the failures that are not "out of order").
const std::vector<Rule>& rules() {
  static const std::vector<Rule> table = [] {
    std::vector<Rule> t = {
        // client
        {"client-kernel", E::kConnectStarted, stay(P::kConnecting)},
        {"client-kernel", E::kDeclined, fallback(R::kDeclined)},
        {"client-kernel", E::kTcpEof, fallback(R::kPeerClosed)},
        {"client-kernel", E::kTcpReset, fallback(R::kPeerClosed)},
        {"client-connecting", E::kCmEstablished, stay(P::kEstablished)},  // switches on Bound
        {"client-connecting", E::kCmRejected, fallback(R::kRejected)},
        {"client-connecting", E::kCmRefused, fallback(R::kRefused)},
        {"client-connecting", E::kCmNoListener, fallback(R::kNoListener)},
        {"client-connecting", E::kCmUnreachable, fallback(R::kUnreachable)},
        {"client-connecting", E::kCmTimeout, fallback(R::kTimeout)},
        {"client-connecting", E::kCmError, fallback(R::kLocalError)},
        {"client-connecting", E::kNoResources, fallback(R::kNoResources)},
        {"client-connecting", E::kTcpEof, fallback(R::kPeerClosed)},
        {"client-connecting", E::kTcpReset, reset(ECONNRESET)},
        {"client-connecting", E::kTransportError, fallback(R::kTransportError)},
        {"client-established", E::kBoundReceived, stay(P::kEstablished, A::kSendSwitch)},
        {"client-established", E::kTcpEof, fallback(R::kPeerClosed)},
        {"client-established", E::kTcpReset, reset(ECONNRESET)},
        {"client-established", E::kTransportError, fallback(R::kTransportError)},
        {"client-bound", E::kSwitchSent, stay(P::kEstablished)},
        {"client-bound", E::kTcpEof, fallback(R::kPeerClosed)},
        {"client-bound", E::kTcpReset, reset(ECONNRESET)},
        {"client-bound", E::kTransportError, fallback(R::kTransportError)},
        {"client-sent", E::kSwitchReceived, stay(P::kSwitched)},
        {"client-sent", E::kTcpEof, stay(P::kEstablished)},
        {"client-sent", E::kTcpReset, reset(ECONNRESET)},
        {"client-sent", E::kTransportError, reset(ECONNRESET)},
        {"client-switched", E::kTcpEof, stay(P::kSwitched)},
        {"client-switched", E::kTcpReset, reset(ECONNRESET)},
        {"client-switched", E::kTransportError, reset(ECONNRESET)},
        // server
        {"server-kernel", E::kRequestAccepted, stay(P::kAccepting)},
        {"server-kernel", E::kDeclined, fallback(R::kDeclined)},
        {"server-kernel", E::kTcpEof, fallback(R::kPeerClosed)},
        {"server-kernel", E::kTcpReset, fallback(R::kPeerClosed)},
        {"server-accepting", E::kCmEstablished, stay(P::kEstablished, A::kSendBound)},
        {"server-accepting", E::kCmUnreachable, fallback(R::kUnreachable)},
        {"server-accepting", E::kCmTimeout, fallback(R::kTimeout)},
        {"server-accepting", E::kCmError, fallback(R::kLocalError)},
        {"server-accepting", E::kSwitchReceived, stay(P::kEstablished, A::kSendSwitch)},
        {"server-accepting", E::kTcpEof, stay(P::kAccepting)},
        {"server-accepting", E::kTcpReset, reset(ECONNRESET)},
        {"server-accepting", E::kTransportError, fallback(R::kTransportError)},
        {"server-established", E::kSwitchReceived, stay(P::kEstablished, A::kSendSwitch)},
        {"server-established", E::kTcpEof, stay(P::kEstablished)},
        {"server-established", E::kTcpReset, reset(ECONNRESET)},
        {"server-established", E::kTransportError, fallback(R::kTransportError)},
        {"server-received-early", E::kCmEstablished, stay(P::kEstablished)},
        {"server-received-early", E::kSwitchSent, stay(P::kSwitched)},
        {"server-received-early", E::kCmUnreachable, reset(ECONNRESET)},
        {"server-received-early", E::kCmTimeout, reset(ECONNRESET)},
        {"server-received-early", E::kCmError, reset(ECONNRESET)},
        {"server-received-early", E::kTcpEof, stay(P::kEstablished)},
        {"server-received-early", E::kTcpReset, reset(ECONNRESET)},
        {"server-received-early", E::kTransportError, reset(ECONNRESET)},
        {"server-received", E::kSwitchSent, stay(P::kSwitched)},
        {"server-received", E::kTcpEof, stay(P::kEstablished)},
        {"server-received", E::kTcpReset, reset(ECONNRESET)},
        {"server-received", E::kTransportError, reset(ECONNRESET)},
        {"server-switched-early", E::kCmEstablished, stay(P::kSwitched)},
        {"server-switched-early", E::kCmUnreachable, reset(ECONNRESET)},
        {"server-switched-early", E::kCmTimeout, reset(ECONNRESET)},
        {"server-switched-early", E::kCmError, reset(ECONNRESET)},
        {"server-switched-early", E::kTcpEof, stay(P::kSwitched)},
        {"server-switched-early", E::kTcpReset, reset(ECONNRESET)},
        {"server-switched-early", E::kTransportError, reset(ECONNRESET)},
        {"server-switched", E::kTcpEof, stay(P::kSwitched)},
        {"server-switched", E::kTcpReset, reset(ECONNRESET)},
        {"server-switched", E::kTransportError, reset(ECONNRESET)},
        // shutdown(SHUT_WR): a client before its Switch can no longer put
        // its token on TCP, so it stays there; after it (and the server,
        // which sends no token) nothing changes.
        {"client-kernel", E::kWriteShut, stay(P::kKernel)},
        {"client-connecting", E::kWriteShut, fallback(R::kPeerClosed)},
        {"client-established", E::kWriteShut, fallback(R::kPeerClosed)},
        {"client-bound", E::kWriteShut, fallback(R::kPeerClosed)},
        {"client-sent", E::kWriteShut, stay(P::kEstablished)},
        {"client-switched", E::kWriteShut, stay(P::kSwitched)},
        {"server-kernel", E::kWriteShut, stay(P::kKernel)},
        {"server-accepting", E::kWriteShut, stay(P::kAccepting)},
        {"server-established", E::kWriteShut, stay(P::kEstablished)},
        {"server-received-early", E::kWriteShut, stay(P::kEstablished)},
        {"server-received", E::kWriteShut, stay(P::kEstablished)},
        {"server-switched-early", E::kWriteShut, stay(P::kSwitched)},
        {"server-switched", E::kWriteShut, stay(P::kSwitched)},
    };
    // Fallback is terminal: late news of the abandoned attempt and the
    // kernel's own change nothing; starting over or switching is a bug.
    for (const char* start : {"client-fallback", "server-fallback"}) {
      for (E event : kAllEvents) {
        if (event == E::kConnectStarted || event == E::kRequestAccepted || event == E::kSwitchSent ||
            event == E::kSwitchReceived || event == E::kProtocolError)
          continue;
        t.push_back({start, event, {P::kFallback, A::kNone, 0, R::kNone /* unchanged: checked below */}});
      }
    }
    // Failed absorbs everything: the connection has been reset once.
    for (const char* start : {"client-failed", "server-failed"})
      for (E event : kAllEvents) t.push_back({start, event, {P::kFailed, A::kNone, -1, R::kNone}});
    return t;
  }();
  return table;
}

UpgradeState reach(const Start& start) {
  UpgradeState state(start.role);
  for (E event : start.path) state.on(event);
  return state;
}

TEST(UpgradeState, EveryStartIsReachableWithoutFailing) {
  for (const Start& start : kStarts) {
    UpgradeState state = reach(start);
    const bool meant_to_fail = std::string(start.name).find("failed") != std::string::npos;
    EXPECT_EQ(state.phase() == P::kFailed, meant_to_fail) << start.name;
  }
}

TEST(UpgradeState, EveryEventInEveryState) {
  int legal = 0, illegal = 0;
  for (const Start& start : kStarts) {
    for (E event : kAllEvents) {
      SCOPED_TRACE(std::string(start.name) + " + " + event_name(event));
      const Rule* rule = nullptr;
      for (const Rule& r : rules())
        if (start.name == std::string(r.start) && r.event == event) rule = &r;
      UpgradeState state = reach(start);
      const UpgradeState before = state;
      const A action = state.on(event);
      if (rule == nullptr) {
        // Out of order (or a protocol error): a reset with EPROTO.
        ++illegal;
        EXPECT_EQ(state.phase(), P::kFailed);
        EXPECT_EQ(action, A::kReset);
        EXPECT_EQ(state.error(), EPROTO);
        EXPECT_STRNE(state.why(), "");
        continue;
      }
      ++legal;
      EXPECT_EQ(state.phase(), rule->outcome.phase);
      EXPECT_EQ(action, rule->outcome.action);
      if (rule->outcome.phase == P::kFailed) {
        EXPECT_EQ(state.error(), rule->outcome.error == -1 ? before.error() : rule->outcome.error);
      } else {
        EXPECT_EQ(state.error(), 0);
      }
      if (rule->outcome.phase == P::kFallback) {
        const R want = before.phase() == P::kFallback ? before.fallback_reason() : rule->outcome.reason;
        EXPECT_EQ(state.fallback_reason(), want);
      }
    }
  }
  EXPECT_EQ(legal + illegal, static_cast<int>(sizeof kStarts / sizeof kStarts[0] * sizeof kAllEvents / sizeof kAllEvents[0]));
  EXPECT_GT(illegal, 0);
}

TEST(UpgradeState, ClientHappyPath) {
  UpgradeState state(UpgradeRole::kClient);
  EXPECT_EQ(state.phase(), P::kKernel);
  EXPECT_EQ(state.on(E::kConnectStarted), A::kNone);
  EXPECT_EQ(state.on(E::kCmEstablished), A::kNone);  // waits for the server's Bound
  EXPECT_TRUE(state.cm_established());
  EXPECT_FALSE(state.committed());
  EXPECT_EQ(state.on(E::kBoundReceived), A::kSendSwitch);
  EXPECT_FALSE(state.committed());
  EXPECT_EQ(state.on(E::kSwitchSent), A::kNone);
  EXPECT_TRUE(state.switch_sent());
  EXPECT_TRUE(state.committed());
  EXPECT_EQ(state.phase(), P::kEstablished);
  EXPECT_EQ(state.on(E::kSwitchReceived), A::kNone);
  EXPECT_TRUE(state.switch_received());
  EXPECT_EQ(state.phase(), P::kSwitched);
}

TEST(UpgradeState, ServerHappyPathAndItsSwitchIsAReply) {
  UpgradeState state(UpgradeRole::kServer);
  EXPECT_EQ(state.on(E::kRequestAccepted), A::kNone);
  EXPECT_EQ(state.on(E::kCmEstablished), A::kSendBound);  // then waits for the client
  EXPECT_FALSE(state.committed());
  EXPECT_EQ(state.on(E::kSwitchReceived), A::kSendSwitch);
  EXPECT_TRUE(state.committed());
  EXPECT_EQ(state.on(E::kSwitchSent), A::kNone);
  EXPECT_EQ(state.phase(), P::kSwitched);
}

TEST(UpgradeState, ServerMustNotSwitchBeforeTheClient) {
  UpgradeState state(UpgradeRole::kServer);
  state.on(E::kRequestAccepted);
  state.on(E::kCmEstablished);
  EXPECT_EQ(state.on(E::kSwitchSent), A::kReset);
  EXPECT_EQ(state.error(), EPROTO);
}

TEST(UpgradeState, ClientRejectsASwitchThatIsNotAReply) {
  UpgradeState state(UpgradeRole::kClient);
  state.on(E::kConnectStarted);
  state.on(E::kCmEstablished);
  EXPECT_EQ(state.on(E::kSwitchReceived), A::kReset);
  EXPECT_EQ(state.phase(), P::kFailed);
  EXPECT_EQ(state.error(), EPROTO);
}

TEST(UpgradeState, ASecondSwitchIsAProtocolError) {
  for (UpgradeRole role : {UpgradeRole::kClient, UpgradeRole::kServer}) {
    UpgradeState state(role);
    if (role == UpgradeRole::kClient) {
      state.on(E::kConnectStarted);
      state.on(E::kCmEstablished);
      state.on(E::kBoundReceived);
      state.on(E::kSwitchSent);
    } else {
      state.on(E::kRequestAccepted);
    }
    state.on(E::kSwitchReceived);
    EXPECT_EQ(state.on(E::kSwitchReceived), A::kReset);
    EXPECT_EQ(state.error(), EPROTO);
  }
}

// The reasons that make the next connect skip the attempt.
TEST(UpgradeState, WhichFallbacksAreRemembered) {
  EXPECT_TRUE(UpgradeState::remember_peer(R::kRejected));
  EXPECT_TRUE(UpgradeState::remember_peer(R::kNoListener));
  EXPECT_TRUE(UpgradeState::remember_peer(R::kUnreachable));
  EXPECT_TRUE(UpgradeState::remember_peer(R::kTimeout));
  EXPECT_FALSE(UpgradeState::remember_peer(R::kNone));
  EXPECT_FALSE(UpgradeState::remember_peer(R::kDeclined));
  EXPECT_FALSE(UpgradeState::remember_peer(R::kLocalError));
  EXPECT_FALSE(UpgradeState::remember_peer(R::kPeerClosed));
  EXPECT_FALSE(UpgradeState::remember_peer(R::kTransportError));
  EXPECT_FALSE(UpgradeState::remember_peer(R::kRefused));
}

TEST(UpgradeState, NamesAreDistinct) {
  std::vector<std::string> names;
  for (E event : kAllEvents) names.push_back(event_name(event));
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = i + 1; j < names.size(); ++j) EXPECT_NE(names[i], names[j]);
  EXPECT_STREQ(phase_name(P::kSwitched), "switched");
  EXPECT_STREQ(fallback_reason_name(R::kNoListener), "no-listener");
}

}  // namespace
}  // namespace vsock::sock
