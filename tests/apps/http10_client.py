"""Sequential HTTP/1.0 requests, one connection each (gunicorn_device.sh).

http10_client.py HOST PORT COUNT BYTES: COUNT times connect, send
"GET /bytes/BYTES HTTP/1.0", read the answer to the server's close, check
the status line, Content-Length and every byte of the body (wsgi_bytes.py's
pattern), close. Prints one line: "requests N bytes B mean_ms M p50_ms P";
exits 1 at the first wrong answer, naming it.
"""
import socket
import sys
import time

from wsgi_bytes import body_of


def one_request(host, port, length, expected):
    with socket.create_connection((host, port), timeout=30) as conn:
        conn.sendall(b"GET /bytes/%d HTTP/1.0\r\nHost: %s\r\n\r\n" % (length, host.encode()))
        parts = []
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            parts.append(chunk)
    answer = b"".join(parts)
    head, sep, body = answer.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError("no end of headers in %d bytes" % len(answer))
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.") or b" 200 " not in lines[0] + b" ":
        raise ValueError("status line %r" % lines[0])
    lengths = [l.split(b":", 1)[1].strip() for l in lines[1:] if l.lower().startswith(b"content-length:")]
    if lengths != [str(length).encode()]:
        raise ValueError("Content-Length %r, expected %d" % (lengths, length))
    if body != expected:
        first = next((i for i in range(min(len(body), len(expected))) if body[i] != expected[i]), None)
        raise ValueError("body of %d bytes differs (expected %d; first difference at %s)" %
                         (len(body), length, first))
    return len(answer)


def main():
    host, port, count, length = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    expected = body_of(length)
    times = []
    total = 0
    for i in range(count):
        start = time.monotonic()
        try:
            total += one_request(host, port, length, expected)
        except (OSError, ValueError) as error:
            print("request %d of %d: %s" % (i + 1, count, error), file=sys.stderr)
            return 1
        times.append((time.monotonic() - start) * 1000.0)
    times.sort()
    print("requests %d bytes %d mean_ms %.2f p50_ms %.2f" %
          (count, total, sum(times) / len(times), times[len(times) // 2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
