"""Asyncio echo server and client over TCP and UDP, for tests/apps/asyncio_echo.sh.

server HOST: listens on an ephemeral TCP port and binds UDP to the same port
number, prints "READY <port>" once both are up, echoes until SIGTERM.
client HOST PORT COUNT [CONNECTIONS]: sends COUNT messages of varied sizes
over CONNECTIONS (default 4) concurrent TCP connections, and COUNT/10
datagrams, and checks every echo; prints the TCP bytes echoed and the time
the TCP part took. Exit status 0 only when every reply matched.
"""

import asyncio
import signal
import socket
import sys
import time

DEFAULT_TCP_CONNECTIONS = 4
UDP_TIMEOUT_S = 2.0


async def echo_stream(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


class EchoDatagram(asyncio.DatagramProtocol):
    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        self.transport.sendto(data, addr)


async def serve(host):
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    # `timeout` passes a SIGTERM on twice (to the child, then to its process
    # group): the second must neither fail here nor, arriving after the loop
    # has put the default action back, kill the server.
    loop.add_signal_handler(signal.SIGTERM, lambda: stop.done() or stop.set_result(None))
    for _ in range(20):  # the UDP port may be taken: take another TCP port
        server = await asyncio.start_server(echo_stream, host, 0)
        port = server.sockets[0].getsockname()[1]
        try:
            udp, _ = await loop.create_datagram_endpoint(EchoDatagram, local_addr=(host, port))
            break
        except OSError:
            server.close()
            await server.wait_closed()
    else:
        print("no port free for both TCP and UDP", file=sys.stderr)
        return 1
    print(f"READY {port}", flush=True)
    await stop
    loop.remove_signal_handler(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    udp.close()
    server.close()
    await server.wait_closed()
    return 0


def message(connection, index):
    # Sizes from 1 byte to ~20 KiB, so some replies arrive in several reads.
    size = 1 + (index * 7919 + connection * 104729) % 20000
    body = f"{connection}:{index}:".encode()
    return (body * (size // len(body) + 1))[:size]


async def tcp_client(host, port, connection, count):
    reader, writer = await asyncio.open_connection(host, port)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    echoed = 0
    for index in range(count):
        sent = message(connection, index)
        writer.write(sent)
        await writer.drain()
        got = await reader.readexactly(len(sent))
        if got != sent:
            raise AssertionError(f"connection {connection} message {index}: echo differs")
        echoed += len(got)
    writer.close()
    await writer.wait_closed()
    return count, echoed


class DatagramClient(asyncio.DatagramProtocol):
    def __init__(self):
        self.replies = asyncio.Queue()

    def datagram_received(self, data, addr):
        self.replies.put_nowait(data)


async def send_and_match(transport, replies, sent):
    """Sends up to 3 times (UDP may drop; loopback should not) and waits for
    the identical datagram, skipping late echoes of earlier datagrams."""
    for _attempt in range(3):
        transport.sendto(sent)
        try:
            while True:
                got = await asyncio.wait_for(replies.get(), UDP_TIMEOUT_S)
                if got == sent:
                    return True
        except asyncio.TimeoutError:
            continue
    return False


async def udp_client(host, port, count):
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_datagram_endpoint(DatagramClient, remote_addr=(host, port))
    echoed = 0
    for index in range(count):
        sent = message(99, index)[:1400]
        if await send_and_match(transport, protocol.replies, sent):
            echoed += 1
        else:
            raise AssertionError(f"datagram {index}: no matching echo")
    transport.close()
    return echoed


async def run_client(host, port, count, connections):
    per_connection = [count // connections + (i < count % connections) for i in range(connections)]
    start = time.monotonic()
    results = await asyncio.gather(*(tcp_client(host, port, i, n) for i, n in enumerate(per_connection)))
    elapsed = time.monotonic() - start
    done = sum(n for n, _ in results)
    udp_count = max(1, count // 10)
    echoed = await udp_client(host, port, udp_count)
    print(f"tcp messages echoed: {done}/{count} over {connections} connections")
    print(f"tcp bytes echoed: {sum(b for _, b in results)} in {elapsed:.3f} s")
    print(f"udp datagrams echoed: {echoed}/{udp_count}")
    return 0 if done == count and echoed == udp_count else 1


def main(argv):
    if len(argv) == 2 and argv[0] == "server":
        return asyncio.run(serve(argv[1]))
    if len(argv) in (4, 5) and argv[0] == "client":
        connections = int(argv[4]) if len(argv) == 5 else DEFAULT_TCP_CONNECTIONS
        return asyncio.run(run_client(argv[1], int(argv[2]), int(argv[3]), connections))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
