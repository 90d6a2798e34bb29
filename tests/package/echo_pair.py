"""A TCP pair on loopback for tests/package: `server` echoes what it reads,
`client PORT` sends a patterned megabyte and checks the echo byte for byte."""
import hashlib
import socket
import sys

SIZE = 1 << 20


def pattern():
    return bytes((i * 7 + i // 251) & 0xFF for i in range(SIZE))


def server():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    print(listener.getsockname()[1], flush=True)
    conn, _ = listener.accept()
    while True:
        data = conn.recv(65536)
        if not data:
            break
        conn.sendall(data)
    conn.close()


def client(port):
    sent = pattern()
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(sent)
    conn.shutdown(socket.SHUT_WR)
    got = bytearray()
    while True:
        data = conn.recv(65536)
        if not data:
            break
        got += data
    if bytes(got) != sent:
        print(f"echo differs: {len(got)} bytes back of {len(sent)}", file=sys.stderr)
        sys.exit(1)
    print(f"echo ok: {len(got)} bytes, sha256 {hashlib.sha256(got).hexdigest()[:16]}")


if __name__ == "__main__":
    server() if sys.argv[1] == "server" else client(int(sys.argv[2]))
