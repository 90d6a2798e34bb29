#!/usr/bin/env python3
"""An unmodified IPv4 multicast sender or receiver (issue 11 item 8's test).

  mcast_group.py recv GROUP PORT IFADDR EXPECT IDLE_S DONE_FILE
      SO_REUSEADDR, bound to (INADDR_ANY, PORT), joined to GROUP on the
      interface IFADDR (IP_ADD_MEMBERSHIP); prints READY, then receives
      until EXPECT datagrams came, or DONE_FILE exists (the sender is
      done) and none came for IDLE_S seconds since; prints
      one "GOT <name> LEN <bytes> FROM <address>" line per datagram (the
      name is the payload up to its first ':', the rest checked) and
      "COUNT n".
  mcast_group.py send GROUP PORT IFADDR COUNT LOOP
      bound to (IFADDR, 0), IP_MULTICAST_IF IFADDR, IP_MULTICAST_LOOP LOOP,
      IP_MULTICAST_TTL 1; sends COUNT datagrams "dgram-<i>:<fill>", every
      tenth one 3000 bytes (fragments over UD at an MTU of 1024 or 2048),
      the others 64; prints
      "SENT n".
  mcast_group.py sendrecv GROUP PORT IFADDR COUNT IDLE_S
      a sender that is also a member: SO_REUSEADDR, bound to (INADDR_ANY,
      PORT), joined to GROUP, IP_MULTICAST_IF IFADDR, loop on; sends COUNT
      datagrams "self-<i>:<fill>" (sizes as send), reading what comes back
      (its own, with loop on) meanwhile, prints "SENT n", then receives
      until COUNT came or none for IDLE_S seconds.
"""
import os
import select
import socket
import struct
import sys
import time


def payload(name, i):
    size = 3000 if i % 10 == 0 else 64
    head = ("%s-%d:" % (name, i)).encode()
    return head + bytes((i + k) % 251 for k in range(size - len(head)))


def describe(data, source):
    """The GOT line of a datagram; the fill is checked against payload()."""
    name = data.split(b":", 1)[0].decode()
    i = int(name.rsplit("-", 1)[1])
    ok = data == payload(name.rsplit("-", 1)[0], i)
    return "GOT %s LEN %d FROM %s%s" % (name, len(data), source[0], "" if ok else " CORRUPT")


def receive(group, port, ifaddr, expect, idle, done_file):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                 socket.inet_aton(group) + socket.inet_aton(ifaddr))
    print("READY", port, flush=True)
    got = 0
    last = None  # when the last datagram came, or the sender was seen done
    while got < expect:
        ready, _, _ = select.select([s], [], [], 0.2)
        now = time.monotonic()
        if ready:
            data, source = s.recvfrom(65536)
            print(describe(data, source), flush=True)
            got += 1
            last = now
        elif os.path.exists(done_file):
            if last is None:
                last = now
            elif now - last >= idle:
                break
    s.setsockopt(socket.IPPROTO_IP, socket.IP_DROP_MEMBERSHIP,
                 socket.inet_aton(group) + socket.inet_aton(ifaddr))
    s.close()
    print("COUNT", got, flush=True)


def send(group, port, ifaddr, count, loop):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ifaddr, 0))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(ifaddr))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, loop)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, struct.pack("b", 1))
    for i in range(count):
        s.sendto(payload("dgram", i), (group, port))
        time.sleep(0.002)  # a paced sender: the receivers' budgets are not the test
    s.close()
    print("SENT", count, flush=True)


def send_and_receive(group, port, ifaddr, count, idle):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                 socket.inet_aton(group) + socket.inet_aton(ifaddr))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(ifaddr))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    got = 0

    def take(timeout):
        nonlocal got
        ready, _, _ = select.select([s], [], [], timeout)
        if ready:
            data, source = s.recvfrom(65536)
            print(describe(data, source), flush=True)
            got += 1
        return bool(ready)

    # What comes back is read while sending, so that the socket's receive
    # buffer (212 KiB by default) never holds all of it.
    for i in range(count):
        s.sendto(payload("self", i), (group, port))
        time.sleep(0.002)
        while take(0):
            pass
    print("SENT", count, flush=True)
    while got < count:
        if not take(idle):
            break
    s.close()
    print("COUNT", got, flush=True)


def main(argv):
    if len(argv) == 8 and argv[1] == "recv":
        receive(argv[2], int(argv[3]), argv[4], int(argv[5]), float(argv[6]), argv[7])
    elif len(argv) == 7 and argv[1] == "send":
        send(argv[2], int(argv[3]), argv[4], int(argv[5]), int(argv[6]))
    elif len(argv) == 7 and argv[1] == "sendrecv":
        send_and_receive(argv[2], int(argv[3]), argv[4], int(argv[5]), float(argv[6]))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
