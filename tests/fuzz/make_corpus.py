#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets into tests/fuzz/corpus/<target>/.

The messages are built here from the tables of docs/protocol.md, not with
the C++ encoders, so the seeds also cross-check the layout. Re-run after a
format change and commit the result:  python3 tests/fuzz/make_corpus.py
"""
import os
import shutil
import socket
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
# The protocol version every message carries (src/sock/wire/protocol.hpp).
VERSION = 4


def ip4(text):
    return socket.inet_pton(socket.AF_INET, text) + bytes(12)


def ip6(text):
    return socket.inet_pton(socket.AF_INET6, text)


def ipv4_checksum(header):
    total = sum(struct.unpack(">10H", header[:10] + b"\0\0" + header[12:]))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def grh_ipv4(source, destination, tos=0, ttl=64, reserved=bytes(20), checksum=None):
    # The RoCE v2 IPv4 form of a UD receive's 40-byte GRH slot: 20 bytes rxe
    # zeroes, then the IPv4 header (version/IHL 0x45, UDP).
    header = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, tos, 84, 0, 0x4000, ttl, 17, 0,
                                   socket.inet_pton(socket.AF_INET, source),
                                   socket.inet_pton(socket.AF_INET, destination)))
    header[10:12] = struct.pack(">H", ipv4_checksum(bytes(header)) if checksum is None else checksum)
    return reserved + bytes(header)


def mapped_gid(text):
    return bytes(10) + b"\xff\xff" + socket.inet_pton(socket.AF_INET, text)


def grh_ipv6(sgid, dgid, tclass=0, flow=0, next_header=0x1B, hop=64):
    # The IPv6 form: an InfiniBand GRH, or a RoCE v2 IPv6 header.
    return struct.pack(">IHBB", (6 << 28) | (tclass << 20) | flow, 64, next_header, hop) + sgid + dgid


def request(family, cport, sport, cip, sip, nonce, flags=0, reserved=0):
    # magic, version, family, flags, client port, server port, IPs, nonce, reserved
    return (b"VSK1" + struct.pack(">BBHHH", VERSION, family, flags, cport, sport) + cip + sip +
            struct.pack(">QI", nonce, reserved))


def ring(address, rkey, capacity):
    return struct.pack(">QII", address, rkey, capacity)


def accept(nonce, address, rkey, capacity, flags=0):
    return b"VSK1" + bytes([VERSION, flags, 0, 0]) + struct.pack(">Q", nonce) + ring(address, rkey, capacity)


def switch(nonce, tcp_bytes, address, rkey, capacity):
    return b"VSKS" + bytes([VERSION, 0, 0, 0]) + struct.pack(">QQ", nonce, tcp_bytes) + ring(address, rkey, capacity)


def bound(nonce, token=bytes(range(0xf0, 0x100)), tcp_read=0):
    return b"VSKB" + bytes([VERSION, 0, 0, 0]) + struct.pack(">Q", nonce) + token + struct.pack(">Q", tcp_read)


def revert(nonce, ring_written, ring_consumed):
    return b"VSKR" + bytes([VERSION, 0, 0, 0]) + struct.pack(">QQQ", nonce, ring_written, ring_consumed)


def ring_grow(address, rkey, capacity, version=None, reserved=bytes(3)):
    return b"VSKG" + bytes([VERSION if version is None else version]) + reserved + ring(address, rkey, capacity)


def ring_moved(accepted, position, flags=None, reserved=bytes(2)):
    if flags is None:
        flags = 1 if accepted else 0
    return b"VSKM" + bytes([VERSION, flags]) + reserved + struct.pack(">Q", position)


def owner(nonce):
    return b"VSKO" + bytes([VERSION, 0, 0, 0]) + struct.pack(">Q", nonce)


def resume(nonce, resend_from, ring_written):
    return b"VSKF" + bytes([VERSION, 0, 0, 0]) + struct.pack(">QQQ", nonce, resend_from, ring_written)


def reject(nonce, reason, port=0):
    return b"VSKJ" + bytes([VERSION, 0, 0, 0]) + struct.pack(">QBBH", nonce, reason, 0, port)


DATA, UNREACH, REVOKE, ANNOUNCE = 1, 2, 3, 4
MULTICAST, NO_LOOP = 1, 2


def datagram(kind, sport, dport, ident, dcookie, scookie, index=0, count=1, total=0, flags=0, payload=None):
    # magic, version, type, flags, reserved, ports, id, cookies, index, count, total, payload length
    if payload is None:
        base, longer = divmod(total, count)
        payload = bytes((index * 7 + i) & 0xff for i in range(base + (1 if index < longer else 0)))
    return (b"VSKD" + struct.pack(">BBBBHHIQQHHHH", VERSION, kind, flags, 0, sport, dport, ident, dcookie, scookie,
                                  index, count, total, len(payload)) + payload)


def sockaddr_in(ip, port):  # struct sockaddr_in, host-order family (x86-64)
    return struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) + socket.inet_pton(socket.AF_INET, ip) + bytes(8)


def sockaddr_in6(ip, port, scope=0):
    return (struct.pack("<H", socket.AF_INET6) + struct.pack(">HI", port, 0) + socket.inet_pton(socket.AF_INET6, ip) +
            struct.pack("<I", scope))


# --- fuzz_remote_ring programs (format: see fuzz_remote_ring.cpp) -----------

def u16(v): return struct.pack("<H", v)
def u32(v): return struct.pack("<I", v)


def length_small(n):   # pick_length selector 0: one byte
    return bytes([0, 0, n])


def length_u32(n):     # selector 1: four bytes
    return bytes([1, 0]) + u32(n)


def length_space(delta=0):  # selector 3: space left + delta
    return bytes([3, delta & 0xff])


def length_used(delta=0):   # selector 4: bytes in flight/used + delta
    return bytes([4, delta & 0xff])


def remote_ring_program(capacity_shift, address_page, ops):
    # mode 0, capacity 2^shift, rkey, address selector 2 (page number << 12)
    return bytes([0, capacity_shift]) + u32(0x1234) + bytes([2]) + u16(address_page) + b"".join(ops)


PLAN_COMMIT, COMMIT, CREDIT, CREDIT_ALL = 0x80, 1, 2, 3
RI_WRITABLE, RI_READABLE, RI_PRODUCE, RI_CONSUME, RI_CONTAINS, RI_ALL = range(6)


def ring_index_program(capacity_shift, below_wrap, ops):
    # mode 1, capacity 2^shift, start = 2^64 - 1 - below_wrap
    return bytes([1, capacity_shift, 1]) + u16(below_wrap) + b"".join(ops)


# --- fuzz_reassembler programs (format: see fuzz_reassembler.cpp) -----------

def reassembler_limits(budget_bytes, datagrams, age_ms):
    return bytes([budget_bytes // 64, datagrams, age_ms])


def fragment(key, total, count, index, raw_length=None):
    # key byte, total (below 4096: top bit clear), count (< 128), index scaled
    # so that (byte * (count + 1)) >> 8 == index, then the length: 1 = the span's
    index_byte = -(-index * 256 // (count + 1))
    length = 1 if raw_length is None else raw_length
    return bytes([0, key]) + struct.pack(">H", total) + bytes([count, index_byte, length])


def later(ms): return bytes([1, ms])
def expire(): return bytes([2])
def earlier(ms): return bytes([3, ms])


SEEDS = {
    "fuzz_upgrade_request": {
        "ipv4": request(4, 40000, 8080, ip4("10.0.0.1"), ip4("10.0.0.2"), 0x0123456789ABCDEF),
        "ipv6": request(6, 1, 65535, ip6("2001:db8::1"), ip6("fe80::1"), 0xFEDCBA9876543210),
        "ipv6_mapped": request(6, 5000, 6000, ip6("::ffff:192.168.1.1"), ip6("::ffff:192.168.1.2"), 7),
        "ipv6_half_mapped": request(6, 5000, 6000, ip6("::ffff:192.168.1.1"), ip6("2001:db8::2"), 7),
        "same_ends": request(4, 7000, 7000, ip4("127.0.0.1"), ip4("127.0.0.1"), 1),
        "unknown_flags": request(4, 1, 2, ip4("1.2.3.4"), ip4("5.6.7.8"), 0, flags=0x8001),
        "padded_by_cm": request(4, 1234, 80, ip4("10.1.1.1"), ip4("10.1.1.2"), 42) + bytes([0xA5]) * 36,
        "reserved_set": request(4, 1, 2, ip4("1.2.3.4"), ip4("5.6.7.8"), 0, reserved=1),
        "sockaddr_in": sockaddr_in("192.0.2.1", 443),
        "sockaddr_in6": sockaddr_in6("2001:db8::42", 22, scope=3),
        "sockaddr_in6_mapped": sockaddr_in6("::ffff:192.0.2.1", 443),
    },
    "fuzz_upgrade_accept": {
        "accept": accept(0x1122334455667788, 0x7F0012340000, 0xDEADBEEF, 1 << 20),
        "largest_ring": accept(1, 0x7F0000000000, 1, 1 << 31),
        "bound_follows": accept(5, 0x7F0012340000, 5, 1 << 20, flags=1),
        "top_of_address_space": accept(2, (1 << 64) - 1 - 4096, 2, 4096),
        "padded_rep": accept(3, 0x10000, 3, 65536) + bytes([0xFF]) * 164,  # an IB CM REP: 196 bytes
        "not_power_of_two": accept(4, 0x10000, 4, 3000),
    },
    "fuzz_attach_message": {
        "park": b"VSKP" + bytes([VERSION, 0, 0, 0]),
        "park_padded": b"VSKP" + bytes([VERSION, 0, 0, 0]) + bytes(56),
        "attach": b"VSKA" + request(4, 1234, 80, ip4("10.1.1.1"), ip4("10.1.1.2"), 42)[4:],
        "attach_v6": b"VSKA" + request(6, 1, 2, ip6("2001:db8::1"), ip6("2001:db8::2"), 7)[4:],
        "attached": b"VSKT" + accept(0x1122334455667788, 0x7F0012340000, 0xDEADBEEF, 1 << 20, flags=1)[4:],
        "refused": reject(42, 1),
        "upgrade_request": request(4, 1234, 80, ip4("10.1.1.1"), ip4("10.1.1.2"), 42),
    },
    "fuzz_switch_message": {
        "switch": switch(0x1122334455667788, 0x100000002, 0x7F0056780000, 0x01020304, 65536),
        "nothing_on_tcp": switch(5, 0, 0x10000, 5, 4096),
        "everything_on_tcp": switch(6, (1 << 64) - 1, 0x10000, 6, 1 << 31),
        "padded_recv": switch(7, 1234, 0x20000, 7, 8192) + bytes(88),
    },
    "fuzz_bound_message": {
        "bound": bound(0x1122334455667788),
        "bound_count": bound(0x1122334455667788, tcp_read=0x10203),
        "padded_recv": bound(9) + bytes(48),
        "switch_magic": b"VSKS" + bound(1)[4:],
    },
    "fuzz_revert_message": {
        "revert": revert(0x1122334455667788, 0x100000002, 0x30004),
        "nothing_in_rings": revert(5, 0, 0),
        "padded_recv": revert(7, 1 << 20, 12345) + bytes(32),
        "bound_magic": b"VSKB" + revert(1, 2, 3)[4:],
    },
    "fuzz_ring_resize": {
        "grow": ring_grow(0x7F0012340000, 0xDEADBEEF, 1 << 20),
        "grow_largest_ring": ring_grow(0x7F0000000000, 1, 1 << 31),
        "grow_top_of_address_space": ring_grow((1 << 64) - 1 - 4096, 2, 4096),
        "grow_padded_recv": ring_grow(0x20000, 7, 8192) + bytes(40),
        "grow_not_power_of_two": ring_grow(0x10000, 4, 3000),
        "grow_reserved_set": ring_grow(0x10000, 4, 4096, reserved=bytes([0, 1, 0])),
        "moved": ring_moved(True, 0x100000002),
        "moved_at_zero": ring_moved(True, 0),
        "moved_at_wrap": ring_moved(True, (1 << 64) - 1),
        "moved_padded_recv": ring_moved(True, 65536) + bytes(48),
        "refused": ring_moved(False, 0),
        "refused_with_position": ring_moved(False, 12345),
        "moved_unknown_flag": ring_moved(True, 5, flags=0x03),
        "revert_magic": b"VSKR" + ring_moved(True, 1)[4:],
        "magic_only": b"VSKG",
    },
    "fuzz_owner_request": {
        "request": owner(0x1122334455667788),
        "nonce_zero": owner(0),
        "answer_on_tcp": bytes([1]),
        "answer_unknown": bytes([4]),
        "revert_magic": b"VSKR" + owner(1)[4:],
        "too_long": owner(5) + bytes(1),
    },
    "fuzz_resume_record": {
        "resume": resume(0x1122334455667788, 0x30004, 0x100000002),
        "nothing_to_resend": resume(5, 1 << 20, 1 << 20),
        "from_past_written": resume(6, 10, 9),
        "then_stream_bytes": resume(7, 0, 4096) + bytes(range(64)),
        "revert_magic": b"VSKR" + resume(1, 2, 3)[4:],
    },
    "fuzz_reject_message": {
        "connection": reject(0x1122334455667788, 1),
        "peer": reject(5, 2),
        "redirect": reject(6, 3, 40123),
        "padded_rej": reject(7, 3, 1) + bytes(128),  # an IB CM REJ: 148 bytes
        "redirect_without_port": reject(8, 3),
        "after_data": reject(9, 4),
        "bound_magic": b"VSKB" + reject(1, 1)[4:],
    },
    "fuzz_datagram_header": {
        "data_fragment": datagram(DATA, 0x1234, 0x5678, 0x9ABCDEF0, 0x1122334455667788, 0x99AABBCCDDEEFF00,
                                  index=1, count=3, total=10),
        "data_whole": datagram(DATA, 5000, 53, 1, 0x10, 0x20, total=100),
        "data_empty": datagram(DATA, 5000, 53, 2, 0x10, 0x20),
        "multicast_no_loop": datagram(DATA, 5000, 5353, 3, 0, 0x20, total=20, flags=MULTICAST | NO_LOOP),
        "last_of_most_fragments": datagram(DATA, 1, 2, 4, 5, 6, index=511, count=512, total=65507),
        "unreach": datagram(UNREACH, 53, 5000, 1, 0x20, 0x10),
        "revoke_all": datagram(REVOKE, 5000, 0, 0, 0, 0x20),
        "revoke_one": datagram(REVOKE, 5000, 53, 0, 0x10, 0x20),
        "unreach_with_payload": datagram(UNREACH, 53, 5000, 1, 0x20, 0x10, total=4),
        "announce": datagram(ANNOUNCE, 40000, 5201, 0, 0x10, 0x20),
        "announce_with_payload": datagram(ANNOUNCE, 40000, 5201, 0, 0x10, 0x20, total=4),
        "announce_with_id": datagram(ANNOUNCE, 40000, 5201, 9, 0x10, 0x20),
        "revert_magic": b"VSKR" + datagram(DATA, 5000, 53, 1, 0x10, 0x20, total=8)[4:],
    },
    "fuzz_grh": {
        "roce_v2_ipv4": grh_ipv4("192.168.77.1", "192.168.77.2", tos=0xB8, ttl=63),
        "roce_v2_ipv4_multicast": grh_ipv4("192.168.77.1", "239.1.2.3", ttl=1),
        "ipv4_bad_checksum": grh_ipv4("10.0.0.1", "10.0.0.2", checksum=0x1234),
        "ipv4_version6_reserved": grh_ipv4("10.0.0.1", "10.0.0.2", reserved=b"\x60" + bytes(19)),
        "ib_grh_mapped": grh_ipv6(mapped_gid("192.168.77.1"), mapped_gid("192.168.77.2"), tclass=0x2C, flow=0xABCDE),
        "roce_v2_ipv6": grh_ipv6(ip6("fe80::1:2ff:fe03:405"), ip6("2001:db8::7"), next_header=17, hop=255),
        "short": grh_ipv4("1.2.3.4", "5.6.7.8")[:39],
        "neither": bytes(40),
    },
    "fuzz_reassembler": {
        # Three fragments out of order, then a late copy of one.
        "out_of_order": reassembler_limits(4096, 4, 100) + fragment(0x11, 300, 3, 2) + fragment(0x11, 300, 3, 0) +
        fragment(0x11, 300, 3, 1) + fragment(0x11, 300, 3, 1),
        # A duplicate, a disagreeing total, a disagreeing count, a bad length.
        "duplicates_and_mismatch": reassembler_limits(4096, 4, 100) + fragment(0x21, 500, 4, 0) +
        fragment(0x21, 500, 4, 0) + fragment(0x21, 501, 4, 1) + fragment(0x21, 500, 5, 1) +
        fragment(0x21, 500, 4, 2, raw_length=8) + fragment(0x21, 500, 4, 1) + fragment(0x21, 500, 4, 2) +
        fragment(0x21, 500, 4, 3),
        # A lost fragment: the partial datagram ages out, the rest restarts it.
        "timeout": reassembler_limits(4096, 4, 50) + fragment(0x31, 200, 2, 0) + later(40) + expire() +
        later(20) + expire() + fragment(0x31, 200, 2, 1) + earlier(30) + later(60) + expire(),
        # Room for two partial datagrams: a third evicts the oldest; one larger
        # than the whole budget is dropped on sight.
        "eviction": reassembler_limits(640, 2, 200) + fragment(0x41, 300, 2, 0) + fragment(0x42, 300, 2, 0) +
        fragment(0x43, 300, 2, 0) + fragment(0x42, 300, 2, 1) + fragment(0x44, 700, 2, 0) +
        fragment(0x41, 300, 2, 1),
    },
    "fuzz_remote_ring": {
        # Write, credit, write across the end of the ring, credit it all.
        "remote_wrap": remote_ring_program(12, 16, [
            bytes([COMMIT]) + length_u32(4000), bytes([CREDIT_ALL]) + length_used(),
            bytes([PLAN_COMMIT]) + length_small(200), bytes([CREDIT]) + length_used(),
            bytes([0]) + length_space(), bytes([PLAN_COMMIT]) + length_space(1)]),
        # Fill the ring, try past it, then a credit larger than in flight.
        "remote_full": remote_ring_program(10, 1, [
            bytes([PLAN_COMMIT]) + length_space(), bytes([0]) + length_small(1),
            bytes([CREDIT]) + length_used(1), bytes([CREDIT]) + length_used()]),
        # Counters that wrap 2^64 while data crosses the ring's end.
        "index_counter_wrap": ring_index_program(10, 100, [
            bytes([RI_PRODUCE]) + length_u32(900), bytes([RI_CONSUME]) + length_used(),
            bytes([RI_WRITABLE]) + length_space(), bytes([RI_PRODUCE]) + length_small(250),
            bytes([RI_READABLE]) + length_used(), bytes([RI_ALL]) + length_small(0),
            bytes([RI_CONTAINS]) + length_small(24) + length_small(250)]),
    },
}


def main():
    for target, seeds in SEEDS.items():
        directory = os.path.join(CORPUS, target)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        for name, data in seeds.items():
            with open(os.path.join(directory, name), "wb") as f:
                f.write(data)
    print("wrote", sum(len(s) for s in SEEDS.values()), "seeds under", CORPUS)


if __name__ == "__main__":
    main()
