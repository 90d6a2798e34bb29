#!/usr/bin/env python3
"""A memcached client over memcached's UDP protocol, in one process on one
socket: COUNT sets of values of assorted sizes (up to MAX_SIZE bytes), then a
get of each, then gets of keys never set; every reply checked.

    memcached_udp_client.py SERVER PORT COUNT MAX_SIZE

Each request and each reply datagram starts with memcached's 8-byte frame
header (request id, sequence number, datagrams in this reply, 0). A reply
larger than one datagram comes in several, put back together by sequence
number. A request unanswered in 2 s is sent again with a new id, at most 3
times. Prints "sets N gets N misses M retries R datagrams D S s" and exits
0 when every reply was right. Bounded: at most (2 COUNT + misses) * 3 tries.
"""
import socket
import struct
import sys
import time


class Client:
    def __init__(self, server, port):
        self.to = (server, port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(2.0)
        self.next_id = 1
        self.retries = 0
        self.datagrams = 0

    def request(self, text):
        for _ in range(3):
            rid = self.next_id
            self.next_id = (self.next_id + 1) & 0xFFFF
            self.sock.sendto(struct.pack("!HHHH", rid, 0, 1, 0) + text, self.to)
            reply = self.collect(rid)
            if reply is not None:
                return reply
            self.retries += 1
        sys.exit("no reply to %r after 3 tries" % text[:40])

    def collect(self, rid):
        parts, total = {}, None
        deadline = time.monotonic() + 2.0
        while total is None or len(parts) < total:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                msg, src = self.sock.recvfrom(65536)
            except socket.timeout:
                return None
            if src != self.to:
                sys.exit("reply from %s" % (src,))
            got_id, seq, count, _ = struct.unpack("!HHHH", msg[:8])
            if got_id != rid:
                continue  # a late reply to an earlier try
            self.datagrams += 1
            total = count
            parts[seq] = msg[8:]
        return b"".join(parts[i] for i in range(total))


def value_for(i, max_size):
    size = [1, 100, 1000, 1400, 3000, max_size][i % 6]
    size = min(size, max_size)
    pattern = ("%d:" % i).encode()
    return (pattern * (size // len(pattern) + 1))[:size]


def main():
    server, port, count, max_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    c = Client(server, port)
    start = time.monotonic()
    for i in range(count):
        v = value_for(i, max_size)
        reply = c.request(b"set vsock:%d %d 0 %d\r\n%s\r\n" % (i, i, len(v), v))
        if reply != b"STORED\r\n":
            sys.exit("set %d: %r" % (i, reply[:80]))
    for i in range(count):
        v = value_for(i, max_size)
        want = b"VALUE vsock:%d %d %d\r\n%s\r\nEND\r\n" % (i, i, len(v), v)
        reply = c.request(b"get vsock:%d\r\n" % i)
        if reply != want:
            sys.exit("get %d: %d bytes, want %d: %r" % (i, len(reply), len(want), reply[:80]))
    misses = max(1, count // 10)
    for i in range(misses):
        reply = c.request(b"get vsock:never:%d\r\n" % i)
        if reply != b"END\r\n":
            sys.exit("get of a missing key: %r" % reply[:80])
    print("sets %d gets %d misses %d retries %d datagrams %d %.2f s"
          % (count, count, misses, c.retries, c.datagrams, time.monotonic() - start))


if __name__ == "__main__":
    main()
