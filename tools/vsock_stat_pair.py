"""A preloaded process for the vsock-stat tests (tools/test_vsock_stat*.sh).

pair STOPFILE [fork|plain]: a loopback listener, a client and its accepted
  socket in one process; 100000 bytes client->server, 5000 back; prints
  "READY <port>" and, with fork, "CHILD <pid>" (a child that opens a socket
  of its own 1.5 s after the fork), then waits for STOPFILE (60 s at most) and exits normally.
server ADDR STOPFILE: an echo server (a thread per connection); prints
  "READY <port>"; exits 0 once STOPFILE exists (300 s at most).
client ADDR PORT CONNECTIONS SECONDS [STOPFILE]: opens the connections,
  echoes one 4 KiB message on each, prints "CONNECTED", then echoes 4 KiB
  messages on every connection in turn for SECONDS or until STOPFILE
  exists; prints "ECHOED <bytes>".
"""
import os
import socket
import sys
import threading
import time


def wait_for(path, limit):
    deadline = time.monotonic() + limit
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)


def recv_exactly(sock, count):
    got = 0
    while got < count:
        chunk = sock.recv(min(65536, count - got))
        if not chunk:
            raise SystemExit("connection closed early")
        got += len(chunk)


def pair(stop, mode):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    client.sendall(b"x" * 100000)
    recv_exactly(accepted, 100000)
    accepted.sendall(b"y" * 5000)
    recv_exactly(client, 5000)
    if mode == "fork":
        child = os.fork()
        if child == 0:
            time.sleep(1.5)  # a child publishes from a socket made >= 1 s after the fork
            own = socket.socket()  # the child's first socket of its own
            wait_for(stop, 60)
            own.close()
            sys.exit(0)
        print("CHILD", child, flush=True)
    print("READY", port, flush=True)
    wait_for(stop, 60)
    if mode == "fork":
        os.waitpid(child, 0)


def serve(connection):
    with connection:
        while True:
            data = connection.recv(65536)
            if not data:
                return
            connection.sendall(data)


def server(addr, stop):
    listener = socket.socket()
    listener.bind((addr, 0))
    listener.listen(64)
    listener.settimeout(0.2)
    print("READY", listener.getsockname()[1], flush=True)
    deadline = time.monotonic() + 300
    while not os.path.exists(stop) and time.monotonic() < deadline:
        try:
            connection, _ = listener.accept()
        except socket.timeout:
            continue
        connection.settimeout(None)
        threading.Thread(target=serve, args=(connection,), daemon=True).start()


def client(addr, port, connections, seconds, stop=None):
    socks = [socket.create_connection((addr, port)) for _ in range(connections)]
    message = b"m" * 4096
    echoed = 0
    for s in socks:  # each connection carries data before the timed part
        s.sendall(message)
        recv_exactly(s, len(message))
        echoed += len(message)
    print("CONNECTED", flush=True)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (stop and os.path.exists(stop)):
        for s in socks:
            s.sendall(message)
            recv_exactly(s, len(message))
            echoed += len(message)
    for s in socks:
        s.close()
    print("ECHOED", echoed, flush=True)


if __name__ == "__main__":
    kind = sys.argv[1]
    if kind == "pair":
        pair(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "plain")
    elif kind == "server":
        server(sys.argv[2], sys.argv[3])
    elif kind == "client":
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]),
               sys.argv[6] if len(sys.argv) > 6 else None)
    else:
        raise SystemExit("usage: see the docstring")
