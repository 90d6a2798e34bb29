#include "sock/dgram/multicast_groups.hpp"

namespace vsock::sock::dgram {

void MulticastGroups::bound(uint64_t cookie, uint16_t port, uint32_t address, bool reaches_ipv4) {
  Socket& socket = sockets_[cookie];
  socket.bound = true;
  socket.port = port;
  socket.address = address;
  socket.reaches_ipv4 = reaches_ipv4;
}

void MulticastGroups::set_multicast_all(uint64_t cookie, bool on) { sockets_[cookie].multicast_all = on; }

MulticastGroups::Change MulticastGroups::count_join(uint32_t group) {
  return members_[group]++ == 0 ? Change::kFirstMember : Change::kNone;
}

MulticastGroups::Change MulticastGroups::count_leave(uint32_t group) {
  auto it = members_.find(group);
  if (it == members_.end()) return Change::kNone;
  if (--it->second > 0) return Change::kNone;
  members_.erase(it);
  return Change::kLastMemberLeft;
}

MulticastGroups::Change MulticastGroups::join(uint64_t cookie, uint32_t group, uint32_t source) {
  Socket& socket = sockets_[cookie];
  auto it = socket.groups.find(group);
  if (it == socket.groups.end()) {
    Membership& membership = socket.groups[group];
    membership.include = source != 0;
    if (source != 0) membership.sources.insert(source);
    return count_join(group);
  }
  // A second join of the same group: only another source of a
  // source-specific membership (the kernel refused anything else).
  if (it->second.include && source != 0) it->second.sources.insert(source);
  return Change::kNone;
}

MulticastGroups::Change MulticastGroups::leave(uint64_t cookie, uint32_t group, uint32_t source) {
  auto s = sockets_.find(cookie);
  if (s == sockets_.end()) return Change::kNone;
  auto it = s->second.groups.find(group);
  if (it == s->second.groups.end()) return Change::kNone;
  if (it->second.include && source != 0) {
    it->second.sources.erase(source);
    if (!it->second.sources.empty()) return Change::kNone;
  }
  // An any-source leave, or the last source of a source-specific one.
  s->second.groups.erase(it);
  return count_leave(group);
}

void MulticastGroups::block(uint64_t cookie, uint32_t group, uint32_t source) {
  auto s = sockets_.find(cookie);
  if (s == sockets_.end()) return;
  auto it = s->second.groups.find(group);
  if (it != s->second.groups.end() && !it->second.include) it->second.sources.insert(source);
}

void MulticastGroups::unblock(uint64_t cookie, uint32_t group, uint32_t source) {
  auto s = sockets_.find(cookie);
  if (s == sockets_.end()) return;
  auto it = s->second.groups.find(group);
  if (it != s->second.groups.end() && !it->second.include) it->second.sources.erase(source);
}

MulticastGroups::Change MulticastGroups::set_filter(uint64_t cookie, uint32_t group, bool include,
                                                   const std::vector<uint32_t>& sources) {
  auto s = sockets_.find(cookie);
  if (s == sockets_.end()) return Change::kNone;
  auto it = s->second.groups.find(group);
  if (it == s->second.groups.end()) return Change::kNone;
  if (include && sources.empty()) {
    s->second.groups.erase(it);
    return count_leave(group);
  }
  it->second.include = include;
  it->second.sources = std::set<uint32_t>(sources.begin(), sources.end());
  return Change::kNone;
}

std::vector<uint32_t> MulticastGroups::forget(uint64_t cookie) {
  std::vector<uint32_t> left;
  auto s = sockets_.find(cookie);
  if (s == sockets_.end()) return left;
  for (const auto& [group, membership] : s->second.groups)
    if (count_leave(group) == Change::kLastMemberLeft) left.push_back(group);
  sockets_.erase(s);
  return left;
}

bool MulticastGroups::is_member(uint32_t group) const { return members_.count(group) != 0; }

bool MulticastGroups::socket_is_member(uint64_t cookie, uint32_t group) const {
  auto s = sockets_.find(cookie);
  return s != sockets_.end() && s->second.groups.count(group) != 0;
}

bool MulticastGroups::filter_allows(const Membership& membership, uint32_t source) {
  bool listed = membership.sources.count(source) != 0;
  return membership.include ? listed : !listed;
}

std::vector<uint64_t> MulticastGroups::receivers(uint32_t group, uint32_t source, uint16_t port) const {
  std::vector<uint64_t> out;
  if (!is_member(group)) return out;
  for (const auto& [cookie, socket] : sockets_) {
    if (!socket.bound || socket.port != port || !socket.reaches_ipv4) continue;
    if (socket.address != 0 && socket.address != group) continue;
    auto it = socket.groups.find(group);
    if (it == socket.groups.end() ? socket.multicast_all : filter_allows(it->second, source)) out.push_back(cookie);
  }
  return out;
}

}  // namespace vsock::sock::dgram
