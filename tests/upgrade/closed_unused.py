#!/usr/bin/env python3
"""closed_unused.py: accepted sockets closed before any use (protocol.md §4).

  closed_unused.py server ADDR PORTFILE GOFILE N [--forked]
      listens (--forked: then forks a child that exits at once, as a
      pre-fork server's listener is shared), writes its port to PORTFILE,
      waits for GOFILE (the client has connected all N: they wait in the
      backlog, where the library answers their upgrades early), then
      accepts N connections and closes each at once, with no read, write
      or poll; stays up 3 s more.
  closed_unused.py client ADDR PORTFILE GOFILE N
      connects N sockets one after the other, creates GOFILE, then reads
      each: the end of the stream (b"") is what the kernel gives. Prints
      "MEASURED connections=N eof=E ms_to_last_eof=T"; exit 0 only if E == N.
"""
import os
import socket
import sys
import time


def wait_for_file(path, seconds):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            sys.exit(f"closed_unused: {path} did not appear within {seconds} s")
        time.sleep(0.05)


def server(addr, portfile, gofile, n, forked):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((addr, 0))
    listener.listen(64)
    if forked:
        child = os.fork()
        if child == 0:
            os._exit(0)
        os.waitpid(child, 0)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    wait_for_file(gofile, 120)
    for _ in range(n):
        conn, _ = listener.accept()
        conn.close()
    time.sleep(3)  # the clients' reads end meanwhile; then the stats at exit
    listener.close()


def client(addr, portfile, gofile, n, forked):
    wait_for_file(portfile, 60)
    with open(portfile) as f:
        port = int(f.read())
    conns = []
    for _ in range(n):
        s = socket.create_connection((addr, port), timeout=30)
        conns.append(s)
    start = time.monotonic()
    open(gofile, "w").close()
    eof = 0
    for s in conns:
        s.settimeout(20)
        try:
            if s.recv(16) == b"":
                eof += 1
            else:
                print("closed_unused: data where the end of the stream was expected", file=sys.stderr)
        except OSError as e:
            print(f"closed_unused: recv: {e}", file=sys.stderr)
        s.close()
    ms = (time.monotonic() - start) * 1000
    print(f"MEASURED connections={n} eof={eof} ms_to_last_eof={ms:.1f}")
    sys.exit(0 if eof == n else 1)


if __name__ == "__main__":
    if len(sys.argv) not in (6, 7) or sys.argv[1] not in ("server", "client"):
        sys.exit(__doc__)
    role, addr, portfile, gofile, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    forked = sys.argv[6:] == ["--forked"]
    (server if role == "server" else client)(addr, portfile, gofile, n, forked)
