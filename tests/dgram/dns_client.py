#!/usr/bin/env python3
"""A stub resolver in one process, a new UDP socket per query (as dig and
libc's resolver do): asks SERVER:PORT for the A record of each NAME=ADDRESS
pair given, COUNT queries in turn, and checks every answer.

    dns_client.py SERVER PORT COUNT NAME=ADDRESS...

A query unanswered after 2 s is asked again on a new socket, at most 3 times
(a resolver's retry); a wrong answer, a wrong id, or a query never answered
fails. Prints "answered N of N, retries R, S s" and exits 0 when every
answer was right. Bounded: at most COUNT * 3 tries of 2 s.
"""
import random
import socket
import struct
import sys
import time


def build_query(qid, name):
    header = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)  # RD, one question
    qname = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return header + qname + struct.pack("!HH", 1, 1)  # A, IN


def skip_name(msg, off):
    while True:
        n = msg[off]
        if n == 0:
            return off + 1
        if n & 0xC0 == 0xC0:
            return off + 2
        off += 1 + n


def parse_answer(msg, qid):
    """The A records of a response to query qid, or an error string."""
    if len(msg) < 12:
        return "short response"
    rid, flags, qd, an, _, _ = struct.unpack("!HHHHHH", msg[:12])
    if rid != qid:
        return "id %d, asked %d" % (rid, qid)
    if not flags & 0x8000 or flags & 0xF:
        return "flags 0x%04x (rcode %d)" % (flags, flags & 0xF)
    off = 12
    for _ in range(qd):
        off = skip_name(msg, off) + 4
    addrs = []
    for _ in range(an):
        off = skip_name(msg, off)
        rtype, _, _, rdlen = struct.unpack("!HHIH", msg[off:off + 10])
        off += 10
        if rtype == 1 and rdlen == 4:
            addrs.append(socket.inet_ntoa(msg[off:off + 4]))
        off += rdlen
    return addrs


def main():
    server, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    records = [a.split("=", 1) for a in sys.argv[4:]]
    rng = random.Random(7)
    retries = 0
    start = time.monotonic()
    for i in range(count):
        name, want = records[i % len(records)]
        for attempt in range(3):
            qid = rng.randrange(1, 65536)
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(2.0)
            try:
                s.sendto(build_query(qid, name), (server, port))
                msg, src = s.recvfrom(4096)
            except socket.timeout:
                retries += 1
                continue
            finally:
                s.close()
            if src != (server, port):
                sys.exit("query %d (%s): answer from %s" % (i, name, src))
            got = parse_answer(msg, qid)
            if got != [want]:
                sys.exit("query %d (%s): got %s, want %s" % (i, name, got, want))
            break
        else:
            sys.exit("query %d (%s): no answer after 3 tries" % (i, name))
    print("answered %d of %d, retries %d, %.2f s" % (count, count, retries, time.monotonic() - start))


if __name__ == "__main__":
    main()
