// Constants shared by the messages of docs/protocol.md (version 2).
#pragma once
#include <cstdint>

namespace vsock::sock::wire {

// "VSK1": UpgradeRequest and UpgradeAccept (rdma_cm private data).
inline constexpr uint32_t kUpgradeMagic = 0x56534B31;
// "VSKS": the Switch message, sent on the queue pair. A different magic, so
// that a message can never be mistaken for one of the other kind.
inline constexpr uint32_t kSwitchMagic = 0x56534B53;
// "VSKB": Bound, the server's first SEND: accept() has returned the socket.
inline constexpr uint32_t kBoundMagic = 0x56534B42;
// "VSKR": Revert, a side's last SEND: it goes back to TCP (fork, SCM_RIGHTS).
inline constexpr uint32_t kRevertMagic = 0x56534B52;
// "VSKF": Resume, written on the kernel TCP socket after the switch point
// when a connection's queue pair fails (docs/protocol.md section 5.1).
inline constexpr uint32_t kResumeMagic = 0x56534B46;
// "VSKJ": Reject, the private data of the server library's rdma_reject:
// why, or where to ask again (the rendezvous's redirect).
inline constexpr uint32_t kRejectMagic = 0x56534B4A;
// "VSKD": the header of every UD message (docs/protocol.md section 6):
// datagrams, their fragments and the UNREACH/REVOKE control messages.
inline constexpr uint32_t kDatagramMagic = 0x56534B44;
// "VSKU": the private data of a UDP resolution (SIDR request and answer,
// docs/protocol.md section 6.1).
inline constexpr uint32_t kResolveMagic = 0x56534B55;
// "VSKO": a fork() child asks the owner of a connection's RDMA path to
// hand it back to TCP (local Unix socket, docs/protocol.md section 5.2).
inline constexpr uint32_t kOwnerMagic = 0x56534B4F;
// "VSKG": RingGrow, the receiver of a direction offers the writer a larger
// ring (docs/protocol.md section 3.1).
inline constexpr uint32_t kRingGrowMagic = 0x56534B47;
// "VSKM": RingMoved, the writer's answer: from which stream position on it
// writes into the new ring, or that it stays on the old one.
inline constexpr uint32_t kRingMovedMagic = 0x56534B4D;
// "VSKP", "VSKA", "VSKT": a parked channel's Park, Attach and Attached
// (docs/protocol.md section 1.2, attach_message.hpp).
inline constexpr uint32_t kParkMagic = 0x56534B50;
inline constexpr uint32_t kAttachMagic = 0x56534B41;
inline constexpr uint32_t kAttachedMagic = 0x56534B54;
// The only version this code speaks. A peer of another version is refused
// (and stays on TCP) rather than half-understood. Version 2: Bound carries
// the token the client writes on TCP at its switch point (protocol.md §2),
// and RingGrow/RingMoved (§3.1) exist. Version 3: DATA and CREDIT
// immediates carry stream positions, not lengths (§3). Version 4: Bound
// carries the count of the client's TCP bytes the server has read, and the
// client switches only at a count the server has reached (§2).
inline constexpr uint8_t kProtocolVersion = 4;

}  // namespace vsock::sock::wire
