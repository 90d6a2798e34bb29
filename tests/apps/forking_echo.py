"""An echo server built on Python's socketserver.ForkingTCPServer: the
parent accepts, a forked child serves each connection (the shape of
database servers and inetd-style relays), for tests/apps/echo_device.sh.

server HOST: listens on an ephemeral TCP port, binds UDP to the same port
number (echoed by a thread of the parent), prints "READY <port>", serves
until SIGTERM, then exits 0. The client is asyncio_echo.py's.
"""

import signal
import socket
import socketserver
import sys
import threading


class EchoHandler(socketserver.BaseRequestHandler):
    def handle(self):
        try:
            while data := self.request.recv(65536):
                self.request.sendall(data)
        except ConnectionError:
            pass


class Server(socketserver.ForkingTCPServer):
    allow_reuse_address = True
    block_on_close = False  # a SIGTERM'd parent does not wait for its children


def udp_echo(sock):
    while True:
        try:
            data, addr = sock.recvfrom(65536)
        except OSError:
            return
        sock.sendto(data, addr)


def main(argv):
    if len(argv) != 2 or argv[0] != "server":
        print(__doc__, file=sys.stderr)
        return 2
    for _ in range(20):  # the UDP port may be taken: take another TCP port
        server = Server((argv[1], 0), EchoHandler)
        port = server.server_address[1]
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            udp.bind((argv[1], port))
            break
        except OSError:
            udp.close()
            server.server_close()
    else:
        print("no port free for both TCP and UDP", file=sys.stderr)
        return 1
    threading.Thread(target=udp_echo, args=(udp,), daemon=True).start()
    # serve_forever() runs in a thread so that SIGTERM (handled in the main
    # thread) can stop it; `timeout` may send SIGTERM twice.
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"READY {port}", flush=True)
    while not stop.wait(0.5):
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    server.shutdown()
    server.server_close()
    udp.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
