#!/usr/bin/env python3
"""An unmodified IPv4 multicast sender or receiver (issue 11 item 8's test).

  mcast_group.py recv GROUP PORT IFADDR EXPECT IDLE_S DONE_FILE
      SO_REUSEADDR, bound to (INADDR_ANY, PORT), joined to GROUP on the
      interface IFADDR (IP_ADD_MEMBERSHIP); prints READY, then receives
      until EXPECT datagrams came, or DONE_FILE exists (the sender is
      done) and none came for IDLE_S seconds since; prints
      one "GOT <payload> FROM <address>" line per datagram and "COUNT n".
  mcast_group.py send GROUP PORT IFADDR COUNT LOOP
      bound to (IFADDR, 0), IP_MULTICAST_IF IFADDR, IP_MULTICAST_LOOP LOOP,
      IP_MULTICAST_TTL 1; sends COUNT datagrams "dgram-<i>", prints
      "SENT n".
  mcast_group.py sendrecv GROUP PORT IFADDR COUNT IDLE_S
      a sender that is also a member: SO_REUSEADDR, bound to (INADDR_ANY,
      PORT), joined to GROUP, IP_MULTICAST_IF IFADDR, loop on; sends COUNT
      datagrams "self-<i>", prints "SENT n", then receives (its own, with
      loop on) as recv does until COUNT came or none for IDLE_S seconds.
"""
import os
import select
import socket
import struct
import sys
import time


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
            print("GOT", data.decode(), "FROM", source[0], flush=True)
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
        s.sendto(("dgram-%d" % i).encode(), (group, port))
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
    for i in range(count):
        s.sendto(("self-%d" % i).encode(), (group, port))
        time.sleep(0.002)
    print("SENT", count, flush=True)
    got = 0
    while got < count:
        ready, _, _ = select.select([s], [], [], idle)
        if not ready:
            break
        data, source = s.recvfrom(65536)
        print("GOT", data.decode(), "FROM", source[0], flush=True)
        got += 1
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
