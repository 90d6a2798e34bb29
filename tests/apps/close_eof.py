#!/usr/bin/env python3
"""A writer that closes and exits at once, and a reader slower than it.

server ADDR CONNS DELAY: listens on ADDR (any port), prints "READY <port>",
  accepts CONNS connections one after the other and reads each to its end,
  sleeping DELAY seconds after every read; prints "conn I: N bytes, then
  EOF" (or "then ERR <reason>") per connection and exits.
client ADDR PORT BYTES: connects, writes BYTES bytes, closes, exits.

On TCP the reader gets every byte and then the end of stream, however long
after the writer's exit it reads them.
"""
import os
import socket
import sys
import time


def server(addr, conns, delay):
    listener = socket.socket()
    listener.bind((addr, 0))
    listener.listen(8)
    listener.settimeout(120)
    print("READY", listener.getsockname()[1], flush=True)
    for i in range(conns):
        conn, _ = listener.accept()
        conn.settimeout(60)
        total, end = 0, "?"
        while True:
            try:
                data = conn.recv(65536)
            except OSError as e:
                end = "ERR " + (os.strerror(e.errno) if e.errno else str(e))
                break
            if not data:
                end = "EOF"
                break
            total += len(data)
            time.sleep(delay)
        print(f"conn {i}: {total} bytes, then {end}", flush=True)
        conn.close()


def client(addr, port, count):
    # Blocking, no timeout: a blocking connect() is what waits for the
    # upgrade (a timeout makes Python use a non-blocking socket, whose
    # writes go out on TCP while the upgrade is still under way).
    sock = socket.create_connection((addr, port))
    block = b"x" * 65536
    sent = 0
    while sent < count:
        sent += sock.send(block[: min(len(block), count - sent)])
    sock.close()
    print("sent", sent, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
