#!/usr/bin/env python3
"""forged_victim.py ADDR PORT GOFILE: one TCP connection to an echo server.

Exchanges 1000 bytes, prints "PORT <local port> SENT 1000" (what it has
written on the connection so far: the count a forger's Switch would claim),
waits until GOFILE exists (meanwhile a forged upgrade request names this
connection), then echoes 1 MiB and checks every byte: "VERIFIED" on
success, exit 1 otherwise.
"""
import os
import socket
import sys
import time


def echo(sock, data):
    sock.sendall(data)
    got = bytearray()
    while len(got) < len(data):
        chunk = sock.recv(min(65536, len(data) - len(got)))
        if not chunk:
            raise SystemExit("end of stream after %d of %d bytes" % (len(got), len(data)))
        got += chunk
    if bytes(got) != data:
        raise SystemExit("wrong bytes in the echo")


def main():
    addr, port, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    sock = socket.create_connection((addr, port), timeout=60)
    first = bytes(range(250)) * 4
    echo(sock, first)
    print("PORT", sock.getsockname()[1], "SENT", len(first), flush=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            raise SystemExit("no go file within 60 s")
        time.sleep(0.05)
    for i in range(16):
        echo(sock, bytes((i * 7 + j) & 0xFF for j in range(65536)))
    sock.close()
    print("VERIFIED", flush=True)


if __name__ == "__main__":
    main()
