#!/usr/bin/env python3
"""parked_budget.py: the programs of run_parked_budget.sh (parked channels
give their memory back, docs/protocol.md section 1.2).

  parked_budget.py server ADDR PORT_A PORT_B
      One process, an echo server on each port (a thread per connection,
      parked_peer.py's), prints "READY" once both listen, runs until
      SIGTERM, then exits normally (the library prints its stats then).

  parked_budget.py client ADDR PORT_A PORT_B BYTES HELD SEQUENTIAL
      HELD connections to PORT_A open at once, each echoing BYTES checked
      byte for byte, then all closed; a pause (their channels park); then
      SEQUENTIAL connections to PORT_B one after the other, each echoing
      and closing. Prints "PHASE held ..." and "PHASE other ..." lines
      (connections, failures, wrong echoes). Every call is bounded (10 s
      socket timeouts). Exit 0 only if every byte came back right.
"""
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parked_peer import Echo, Server, echo_on, one_connection, payload  # noqa: E402


def serve(addr, ports):
    servers = [Server((addr, port), Echo) for port in ports]
    for server in servers[1:]:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("READY", flush=True)
    servers[0].serve_forever()


def held_phase(addr, port, size, conns):
    failures = wrong = 0
    socks = []
    for index in range(conns):
        try:
            sock = socket.create_connection((addr, port), timeout=10)
            socks.append(sock)
            if not echo_on(sock, payload("held", index, size)):
                wrong += 1
        except OSError as error:
            print(f"held connection {index}: {error}", file=sys.stderr)
            failures += 1
    for sock in socks:
        sock.close()
    print(f"PHASE held conns={conns} failures={failures} wrong={wrong}", flush=True)
    return failures == 0 and wrong == 0


def sequential_phase(addr, port, size, conns):
    failures = wrong = 0
    for index in range(conns):
        try:
            if not one_connection(addr, port, payload("other", index, size)):
                wrong += 1
        except OSError as error:
            print(f"other connection {index}: {error}", file=sys.stderr)
            failures += 1
    print(f"PHASE other conns={conns} failures={failures} wrong={wrong}", flush=True)
    return failures == 0 and wrong == 0


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "server":
        serve(sys.argv[2], [int(sys.argv[3]), int(sys.argv[4])])
        return 0
    if len(sys.argv) == 8 and sys.argv[1] == "client":
        addr, port_a, port_b = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        size, held, sequential = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
        ok = held_phase(addr, port_a, size, held)
        time.sleep(1.5)  # both sides park the held connections' channels
        ok = sequential_phase(addr, port_b, size, sequential) and ok
        return 0 if ok else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
