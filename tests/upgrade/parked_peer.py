#!/usr/bin/env python3
"""parked_peer.py: the programs of run_parked.sh (parked channels,
docs/protocol.md section 1.2).

  parked_peer.py server ADDR PORT
      A thread per connection echoes until the client's end of stream,
      then closes. Listens with SO_REUSEADDR on PORT (so a second server
      can take the port of one that was killed), prints "READY" once
      listening, runs until killed.

  parked_peer.py client ADDR PORT BYTES PHASE=N [PHASE=N ...]
      For each phase, N connections one after the other: connect, write
      BYTES (pseudo-random from the phase and connection number) while
      reading them back, compare, close. After each phase prints
      "PHASE name conns=N failures=F wrong=W max_ms=M" and, except after
      the last, waits for a line on stdin before it goes on (the script
      kills and restarts the server meanwhile). Every call is bounded
      (10 s socket timeouts). Exit 0 only if every byte of every phase
      came back right.
"""
import random
import socket
import socketserver
import sys
import threading
import time


def payload(phase, index, size):
    return random.Random(f"{phase}/{index}").randbytes(size)


class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            data = self.request.recv(65536)
            if not data:
                break
            self.request.sendall(data)


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def serve(addr, port):
    server = Server((addr, port), Echo)
    print("READY", flush=True)
    server.serve_forever()


def echo_on(sock, data):
    """Writes data (from a thread) while reading it back; whether it came back whole."""
    received = bytearray()
    sender = threading.Thread(target=sock.sendall, args=(data,))
    sender.start()
    while len(received) < len(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        received += chunk
    sender.join()
    return bytes(received) == data


def one_connection(addr, port, data):
    with socket.create_connection((addr, port), timeout=10) as sock:
        return echo_on(sock, data)


def client(addr, port, size, phases):
    ok = True
    for number, (name, conns) in enumerate(phases):
        failures = wrong = 0
        worst = 0.0
        for index in range(conns):
            start = time.monotonic()
            try:
                if not one_connection(addr, port, payload(name, index, size)):
                    wrong += 1
            except OSError as error:
                print(f"connection {index} of {name}: {error}", file=sys.stderr)
                failures += 1
            worst = max(worst, (time.monotonic() - start) * 1000)
        print(f"PHASE {name} conns={conns} failures={failures} wrong={wrong} max_ms={worst:.1f}", flush=True)
        ok = ok and failures == 0 and wrong == 0
        if number + 1 < len(phases):
            sys.stdin.readline()
    return 0 if ok else 1


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "server":
        serve(sys.argv[2], int(sys.argv[3]))
        return 0
    if len(sys.argv) >= 6 and sys.argv[1] == "client":
        phases = [(p.split("=")[0], int(p.split("=")[1])) for p in sys.argv[5:]]
        return client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), phases)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
