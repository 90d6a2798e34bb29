#!/usr/bin/env python3
"""A client socket that sends one datagram and then only receives (iperf3
--bidir's receiving stream does so), and a server that answers it with a
stream of datagrams.

    one_hello.py server ADDR PORT COUNT
        Binds ADDR:PORT, waits for one datagram, connect()s to its sender
        and sends it COUNT numbered datagrams of 200 B, one every 2 ms,
        then "END" up to 5 times (until the client is gone). Prints "sent COUNT" and exits 0. Bounded: 60 s.
    one_hello.py client ADDR PORT
        A socket never bound (the kernel gives it an ephemeral port at its
        first send), connect()ed to ADDR:PORT, sends one "hello" and then
        only receives until "END" (or 20 s of silence). Prints "received N
        distinct of the numbered datagrams" and exits 0 when it got any.
"""
import socket
import struct
import sys
import time


def serve(addr, port, count):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    s.settimeout(60)
    _, peer = s.recvfrom(2048)
    s.connect(peer)
    payload = bytes(196)
    for i in range(count):
        s.send(struct.pack(">I", i) + payload)
        time.sleep(0.002)
    for _ in range(5):
        try:
            s.send(b"END")
        except ConnectionRefusedError:  # the client left at the first one
            break
        time.sleep(0.01)
    print("sent %d" % count, flush=True)


def client(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((addr, port))
    s.send(b"hello")
    s.settimeout(20)
    seen = set()
    while True:
        try:
            data = s.recv(2048)
        except socket.timeout:
            break
        if data == b"END":
            break
        if len(data) == 200:
            seen.add(struct.unpack(">I", data[:4])[0])
    print("received %d" % len(seen), flush=True)
    return 0 if seen else 1


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "server":
        serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "client":
        return client(sys.argv[2], int(sys.argv[3]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
