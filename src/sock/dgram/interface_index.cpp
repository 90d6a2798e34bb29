#include "sock/dgram/interface_index.hpp"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "sys/reentry_guard.hpp"

namespace vsock::sock::dgram {
namespace {

struct Known {
  sockaddr_storage address;
  int index;
};

// A host has few local addresses; the cache is bounded all the same.
constexpr size_t kMaxKnown = 64;
std::mutex g_mu;
std::vector<Known> g_known;

bool same_address(const sockaddr* a, const sockaddr_storage& b) {
  if (a == nullptr || a->sa_family != b.ss_family) return false;
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(&b)->sin_addr.s_addr;
  if (a->sa_family == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(&b)->sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

int look_up(const sockaddr_storage& address) {
  sys::ReentryGuard guard;  // getifaddrs() talks netlink through socket calls
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return 0;
  int index = 0;
  for (ifaddrs* entry = list; entry != nullptr && index == 0; entry = entry->ifa_next)
    if (same_address(entry->ifa_addr, address)) index = static_cast<int>(if_nametoindex(entry->ifa_name));
  freeifaddrs(list);
  return index;
}

}  // namespace

int interface_index_of(const sockaddr_storage& address) {
  std::lock_guard<std::mutex> held(g_mu);
  for (const Known& known : g_known)
    if (same_address(reinterpret_cast<const sockaddr*>(&known.address), address)) return known.index;
  int index = look_up(address);
  if (index != 0 && g_known.size() < kMaxKnown) g_known.push_back(Known{address, index});
  return index;
}

}  // namespace vsock::sock::dgram
