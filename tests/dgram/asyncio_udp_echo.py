#!/usr/bin/env python3
"""An asyncio DatagramProtocol echo server, and a client process that runs
many client sockets at once against it.

    asyncio_udp_echo.py server ADDR PORT
        Echoes every datagram to its sender until SIGTERM/SIGINT, then
        prints "echoed N datagrams" and exits 0.
    asyncio_udp_echo.py client ADDR PORT SOCKETS COUNT
        SOCKETS datagram endpoints (connected to ADDR:PORT) in one event
        loop, all at once; each sends COUNT datagrams, one at a time, of
        sizes cycling through 1 B .. 60,000 B (each socket starting
        elsewhere in the cycle), and waits for its echo, checked byte for
        byte. An echo not back in 3 s is sent again (at most 3 tries: UDP
        may lose one). Prints "echoes N of N, retries R, bytes B, S s" and
        exits 0 when every echo came back right. Bounded: 90 s overall.
"""
import asyncio
import signal
import struct
import sys
import time

SIZES = [1, 64, 512, 1000, 1400, 4000, 9000, 16384, 30000, 60000]


class Echo(asyncio.DatagramProtocol):
    def __init__(self):
        self.count = 0

    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        self.count += 1
        self.transport.sendto(data, addr)


async def serve(addr, port):
    loop = asyncio.get_running_loop()
    transport, proto = await loop.create_datagram_endpoint(Echo, local_addr=(addr, port))
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("READY", transport.get_extra_info("sockname")[1], flush=True)
    await stop.wait()
    transport.close()
    print("echoed %d datagrams" % proto.count, flush=True)


class Client(asyncio.DatagramProtocol):
    def __init__(self):
        self.queue = asyncio.Queue()

    def datagram_received(self, data, addr):
        self.queue.put_nowait(data)

    def error_received(self, exc):
        self.queue.put_nowait(exc)


def payload(sock_no, seq, size):
    head = struct.pack("!IIII", 0x56534B55, sock_no, seq, size)[:size]
    body = bytes((sock_no * 31 + seq * 7 + i) & 0xFF for i in range(256))
    rest = size - len(head)
    return head + (body * (rest // 256 + 1))[:rest]


async def one_socket(addr, port, sock_no, count, totals):
    loop = asyncio.get_running_loop()
    transport, proto = await loop.create_datagram_endpoint(Client, remote_addr=(addr, port))
    retried = 0
    try:
        for seq in range(count):
            size = SIZES[(sock_no + seq) % len(SIZES)]
            data = payload(sock_no, seq, size)
            for attempt in range(3):
                transport.sendto(data)
                try:
                    while True:
                        got = await asyncio.wait_for(proto.queue.get(), 3.0)
                        if isinstance(got, Exception):
                            raise got
                        if got == data:
                            break
                        # after a retry, a late echo of an earlier datagram of this socket may come
                        earlier = len(got) < 16 or (got[:8] == data[:8] and struct.unpack("!I", got[8:12])[0] < seq)
                        if not (retried and earlier):
                            raise SystemExit("socket %d datagram %d (%d B): wrong echo of %d B" % (sock_no, seq, size, len(got)))
                    break
                except asyncio.TimeoutError:
                    totals["retries"] += 1
                    retried += 1
            else:
                raise SystemExit("socket %d datagram %d (%d B): no echo after 3 tries" % (sock_no, seq, size))
            totals["echoes"] += 1
            totals["bytes"] += size
    finally:
        transport.close()


async def run_clients(addr, port, sockets, count):
    totals = {"echoes": 0, "retries": 0, "bytes": 0}
    start = time.monotonic()
    await asyncio.wait_for(asyncio.gather(*(one_socket(addr, port, i, count, totals) for i in range(sockets))), 90)
    print("echoes %d of %d, retries %d, bytes %d, %.2f s"
          % (totals["echoes"], sockets * count, totals["retries"], totals["bytes"], time.monotonic() - start))
    if totals["echoes"] != sockets * count:
        sys.exit(1)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "server":
        asyncio.run(serve(sys.argv[2], int(sys.argv[3])))
    elif len(sys.argv) == 6 and sys.argv[1] == "client":
        asyncio.run(run_clients(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
