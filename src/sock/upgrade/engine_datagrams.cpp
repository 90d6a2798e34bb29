// Engine: UDP over UD's side band (DatagramResolution): listeners for
// bound datagram sockets and resolutions of destinations, on the engine's
// thread and channel.
#include "sock/upgrade/engine.hpp"

namespace vsock::sock::side_band {

void Engine::set_datagram_sink(const DatagramPathSink& sink) {
  std::lock_guard<std::mutex> held(mu_);
  datagrams_.set_sink(sink);
}

bool Engine::listen_datagrams(const sockaddr* address, uint32_t qpn, uint64_t cookie) {
  std::lock_guard<std::mutex> held(mu_);
  return datagrams_.listen(address, qpn, cookie);
}

void Engine::stop_listening_datagrams(uint64_t cookie) {
  std::lock_guard<std::mutex> held(mu_);
  datagrams_.stop_listening(cookie);
}

bool Engine::resolve_datagram_path(const sockaddr* destination, socklen_t length) {
  bool started;
  {
    std::lock_guard<std::mutex> held(mu_);
    started = datagrams_.resolve(destination, length);
  }
  wake();  // its deadline is now among the thread's timers
  return started;
}

}  // namespace vsock::sock::side_band
