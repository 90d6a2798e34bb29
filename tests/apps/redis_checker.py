"""A redis client that checks every reply byte for byte (raw RESP, stdlib only).

    redis_checker.py HOST PORT [--conns 20] [--rounds 100000] [--seconds 20]
                     [--batch 32] [--keys 64] [--max-size 4096] [--timeout 60]

Opens --conns connections, one thread each. Connection C owns the keys
chk:C:0 .. chk:C:<keys-1>; no other client writes them, and it deletes them
first. Each round it pipelines --batch SETs of its keys (the values, 1 to
--max-size bytes of every byte value, \\r\\n included, are derived from C,
the round and the position), reads the +OK of each, then pipelines a GET of
each key it just set and a GET of as many other keys of its own (set in an
earlier round, or never: then nil) and compares every reply with what it
last wrote. It stops after --rounds rounds or --seconds seconds, whichever
comes first, then sends PING on every connection and expects +PONG (the
connection is still alive), and closes.

Prints one line with the counts. Exit 0 when every reply was right and every
connection alive to the end; 1 with a message naming the connection, the
request and what came back otherwise (the first error stops every thread).
"""
import argparse
import socket
import sys
import threading
import time

PATTERN = bytes(range(256)) * 20  # 5120 bytes of every byte value


def value_of(conn, rnd, pos, max_size):
    """The value connection conn writes at position pos of round rnd."""
    size = 1 + (conn * 7919 + rnd * 104729 + pos * 1031) % max_size
    head = b"%d/%d/%d:" % (conn, rnd, pos)
    start = (conn * 31 + rnd * 17 + pos) % 256
    return (head + PATTERN[start:start + size])[:size]


def command(*parts):
    out = [b"*%d\r\n" % len(parts)]
    for p in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(p), p))
    return b"".join(out)


class Lost(Exception):
    """The connection ended or failed."""


class Reader:
    """Reads RESP replies from a socket, through a buffer."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def _fill(self):
        try:
            data = self.sock.recv(65536)
        except OSError as e:
            raise Lost(f"receive failed: {e!r}")
        if not data:
            raise Lost("the server closed the connection (end of file)")
        self.buf += data

    def line(self):
        while True:
            end = self.buf.find(b"\r\n")
            if end >= 0:
                out = bytes(self.buf[:end])
                del self.buf[:end + 2]
                return out
            if len(self.buf) > 1 << 20:
                raise Lost("a reply line longer than 1 MiB")
            self._fill()

    def exactly(self, n):
        while len(self.buf) < n:
            self._fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def reply(self):
        """A simple reply as bytes with its type byte, a bulk string as
        ('$', bytes) or ('$', None) for nil."""
        head = self.line()
        if head[:1] != b"$":
            return head
        n = int(head[1:])
        if n < 0:
            return ("$", None)
        data = self.exactly(n + 2)
        if data[-2:] != b"\r\n":
            raise Lost(f"bulk reply of {n} bytes not followed by CRLF: {data[-2:]!r}")
        return ("$", data[:-2])


def show(v, limit=24):
    if isinstance(v, tuple):
        v = v[1]
    if v is None:
        return "nil"
    return f"{len(v)} bytes {v[:limit]!r}{'...' if len(v) > limit else ''}"


class Checker:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.errors = []
        self.sets = self.gets = self.pings = 0
        self.rounds = 0
        self.alive = 0
        self.deadline = time.monotonic() + args.seconds

    def fail(self, msg):
        with self.lock:
            self.errors.append(msg)
        self.stop.set()

    def run_connection(self, conn):
        a = self.args
        try:
            sock = socket.create_connection((a.host, a.port), timeout=a.timeout)
        except OSError as e:
            self.fail(f"connection {conn}: connect failed: {e!r}")
            return
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = Reader(sock)
        written = {}  # key index -> the value last written
        done = 0  # requests checked on this connection
        rnd = 0
        try:
            # Keys left by an earlier run on the same server go first.
            sock.sendall(command(b"DEL", *(b"chk:%d:%d" % (conn, k) for k in range(a.keys))))
            r = reader.line()
            if r[:1] != b":":
                self.fail(f"connection {conn}: DEL of its keys answered {show(r)}, expected an integer")
                return
            for rnd in range(a.rounds):
                if self.stop.is_set() or time.monotonic() >= self.deadline:
                    break
                keys = [(rnd * a.batch + i) % a.keys for i in range(a.batch)]
                values = [value_of(conn, rnd, i, a.max_size) for i in range(a.batch)]
                sock.sendall(b"".join(command(b"SET", b"chk:%d:%d" % (conn, k), v) for k, v in zip(keys, values)))
                for i, k in enumerate(keys):
                    r = reader.reply()
                    if r != b"+OK":
                        self.fail(f"connection {conn}, round {rnd}: SET chk:{conn}:{k} answered {show(r)},"
                                  f" expected +OK (after {done} requests checked on it)")
                        return
                    written[k] = values[i]
                    done += 1
                # The keys just set, then as many others, half the key space away.
                others = [(k + a.keys // 2) % a.keys for k in keys]
                asked = keys + others
                sock.sendall(b"".join(command(b"GET", b"chk:%d:%d" % (conn, k)) for k in asked))
                for k in asked:
                    r = reader.reply()
                    want = written.get(k)
                    if r != ("$", want):
                        self.fail(f"connection {conn}, round {rnd}: GET chk:{conn}:{k} answered {show(r)},"
                                  f" expected {show(want)} (after {done} requests checked on it)")
                        return
                    done += 1
                with self.lock:
                    self.sets += len(keys)
                    self.gets += len(asked)
            else:
                rnd = a.rounds
            sock.sendall(command(b"PING"))
            r = reader.reply()
            if r != b"+PONG":
                self.fail(f"connection {conn}: PING at the end answered {show(r)}, expected +PONG")
                return
            with self.lock:
                self.pings += 1
                self.alive += 1
                self.rounds += rnd
        except Lost as e:
            self.fail(f"connection {conn} lost in round {rnd} after {done} requests checked on it: {e}")
        except OSError as e:
            self.fail(f"connection {conn} failed in round {rnd} after {done} requests checked on it: {e!r}")
        finally:
            sock.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--conns", type=int, default=20)
    p.add_argument("--rounds", type=int, default=100000)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--keys", type=int, default=64)
    p.add_argument("--max-size", type=int, default=4096)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds any one send or receive may take")
    a = p.parse_args()
    if not 0 < a.batch <= a.keys:
        p.error("--batch must be between 1 and --keys (a key at most once per batch)")

    c = Checker(a)
    start = time.monotonic()
    threads = [threading.Thread(target=c.run_connection, args=(i,), daemon=True) for i in range(a.conns)]
    for t in threads:
        t.start()
    # Each thread ends by the deadline plus one round and a PING, each step
    # bounded by the socket timeout.
    limit = time.monotonic() + a.seconds + 4 * a.timeout
    for t in threads:
        t.join(max(0.0, limit - time.monotonic()))
    hung = sum(t.is_alive() for t in threads)
    elapsed = time.monotonic() - start
    checked = c.sets + c.gets + c.pings
    print(f"checker: {checked} requests checked ({c.sets} SET, {c.gets} GET, {c.pings} PING) on {a.conns}"
          f" connections, {c.rounds} rounds in all, {len(c.errors)} errors, {c.alive} of {a.conns} connections"
          f" alive at the end, {elapsed:.1f} s", flush=True)
    for e in c.errors[:10]:
        print(f"checker: ERROR: {e}", flush=True)
    if hung:
        print(f"checker: ERROR: {hung} connections still running after {a.seconds + 4 * a.timeout:.0f} s", flush=True)
    if c.errors or hung or c.alive != a.conns:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
