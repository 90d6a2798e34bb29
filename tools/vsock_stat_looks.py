"""Looks at a preloaded server through `vsock-stat --once --json -p PID`, for
the tests that check vsock-stat against a server under load over RDMA
(tools/test_vsock_stat_device.sh, tests/apps/redis_vsock_stat_device.sh).
Each command prints what it saw and exits 0 when the check holds, 1 with
the reason when it does not. Every wait is a bounded number of looks.

live STAT PID COUNT FIRST_JSON [ALIVE_PID] [LOOKS]
  Waits for a look with exactly COUNT accepted connections, each on rdma
  with RDMA bytes received (at most LOOKS looks, default 60, 0.5 s apart),
  saves it to FIRST_JSON, then waits for a later look in which the same
  connections are all there, still on rdma, and each one's RDMA bytes
  grew both ways. Gives up early when ALIVE_PID (the load) has ended.
rows FIRST_JSON ADDR PORT COUNT
  The first look's rows: each accepted connection's 4-tuple is ADDR:PORT
  from ADDR, it moved RDMA bytes both ways and has no kernel reason; no
  accepted connection is on another path; a listener row; at least COUNT
  upgrades done.
settle STAT PID OUT_JSON [LOOKS] [idle]
  Once the load is over: two looks in a row with the same counters (at
  most LOOKS, default 40, 0.25 s apart); with `idle`, also no accepted
  connection left. The last look goes to OUT_JSON.
at-exit OUT_JSON LOG PID MIN_UPGRADES
  Every counter of that last look equals the one of the "libvsock[PID]:
  stats:" line the server printed at exit (VSOCK_STATS=1) in LOG, and it
  moved RDMA bytes and upgraded at least MIN_UPGRADES connections.
"""
import json
import re
import subprocess
import sys
import time

# The counters printed beside the line at exit (all of them are compared).
SHOWN_KEYS = ["rdma_bytes_sent", "rdma_bytes_received", "rdma_sends", "rdma_receives", "tcp_bytes_sent",
             "tcp_bytes_received", "upgrades_done", "upgrade_attempts", "upgrade_resets", "tcp_sockets"]


def look(stat, pid, attempts=3):
    """One look: the process's entry of vsock-stat's --json, or None.

    A look can miss a live process: vsock-stat reports "no consistent copy"
    when the publisher rewrote the segment during every read (a busy guest
    descheduling the reader), so a miss is tried again, twice, 0.25 s apart."""
    for attempt in range(attempts):
        if attempt > 0:
            time.sleep(0.25)
        try:
            out = subprocess.run([stat, "--once", "--json", "-p", str(pid)], capture_output=True, text=True,
                                 timeout=30)
        except subprocess.TimeoutExpired:
            continue
        if out.returncode != 0:
            if out.stderr.strip():
                print(f"  vsock-stat (attempt {attempt + 1}): {out.stderr.strip()}")
            continue
        processes = json.loads(out.stdout)["processes"]
        if len(processes) == 1:
            return processes[0]
    return None


def accepted(process):
    return [r for r in process["sockets"] if r["role"] == "accepted"]


def running(pid):
    """True while pid is alive and not a zombie (as app_is_running)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def by_peer(process):
    return {r["peer"]: r for r in accepted(process)}


def live(stat, pid, count, first_json, alive="", looks=60):
    count, looks, alive = int(count), int(looks), int(alive) if alive else None
    first = last = None
    for _ in range(looks):
        p = look(stat, pid)
        if p is not None:
            last = p
            rows = accepted(p)
            rdma = [r for r in rows if r["path"] == "rdma" and r["rdma_bytes_received"] > 0]
            if first is None and len(rows) == count and len(rdma) == count:
                first = p
                with open(first_json, "w") as f:
                    json.dump(p, f)
            elif first is not None:
                a, b = by_peer(first), by_peer(p)
                if a.keys() <= b.keys() and all(
                        b[k]["path"] == "rdma" and b[k]["rdma_bytes_received"] > a[k]["rdma_bytes_received"]
                        and b[k]["rdma_bytes_sent"] > a[k]["rdma_bytes_sent"] for k in a):
                    for k in sorted(a):
                        print(f"  {k} -> {a[k]['local']}: rdma_bytes_received {a[k]['rdma_bytes_received']} -> "
                              f"{b[k]['rdma_bytes_received']}, rdma_bytes_sent {a[k]['rdma_bytes_sent']} -> "
                              f"{b[k]['rdma_bytes_sent']}")
                    print(f"  process totals, first look: {first['totals']}")
                    print(f"  process totals, later look: {p['totals']}")
                    return 0
        if alive is not None and not running(alive):
            print(f"  the load (pid {alive}) ended before the looks were done")
            break
        time.sleep(0.5)
    if first is None:
        print(f"  no look with {count} accepted connections all on rdma with RDMA bytes received"
              f" (in {looks} looks)")
    else:
        print(f"  the connections of the first look did not all stay on rdma with RDMA bytes growing both ways"
              f" (in {looks} looks)")
    if last is not None:
        for r in accepted(last):
            print(f"  last look: {r['peer']} {r['path']} {r['kernel_reason'] or '-'}"
                  f" rdma_bytes_received={r['rdma_bytes_received']} rdma_bytes_sent={r['rdma_bytes_sent']}")
    return 1


def rows(first_json, addr, port, count):
    p = json.load(open(first_json))
    conns = accepted(p)
    for r in conns:
        assert r["path"] == "rdma", f"an accepted connection not on rdma: {r}"
        assert r["local"] == f"{addr}:{port}" and r["peer"].startswith(addr + ":"), f"4-tuple: {r}"
        assert r["rdma_bytes_sent"] > 0 and r["rdma_bytes_received"] > 0, f"RDMA bytes: {r}"
        assert r["kernel_reason"] == "", f"kernel reason: {r}"
    assert len(conns) == int(count), f"{len(conns)} accepted connections, expected {count}"
    assert p["totals"]["upgrades_done"] >= int(count), f"totals: {p['totals']}"
    assert [r for r in p["sockets"] if r["role"] == "listener" and r["path"] == "listening"], \
        f"no listener row: {p['sockets']}"
    print(f"  {len(conns)} rows, e.g. {conns[0]}")
    return 0


def settle(stat, pid, out_json, looks=40, idle=None):
    previous = None
    p = None
    for _ in range(int(looks)):
        p = look(stat, pid)
        if p is None:
            print("  vsock-stat did not show the process")
            return 1
        with open(out_json, "w") as f:
            json.dump(p, f)
        if p["counters"] == previous and not (idle and accepted(p)):
            return 0
        previous = p["counters"]
        time.sleep(0.25)
    print(f"  not settled in {looks} looks: {len(accepted(p))} accepted connections left, totals {p['totals']}")
    return 1


def at_exit(out_json, log, pid, min_upgrades):
    p = json.load(open(out_json))
    lines = [line for line in open(log, errors="replace") if line.startswith(f"libvsock[{pid}]: stats: ")]
    if not lines:
        print(f"  no 'libvsock[{pid}]: stats:' line in {log}")
        return 1
    line = lines[-1]
    exited = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
    for k in SHOWN_KEYS:
        print(f"  {k}: vsock-stat {p['counters'].get(k, '-')}, at exit {exited.get(k, '-')}")
    common = [k for k in exited if k in p["counters"]]
    differ = [f"{k} {p['counters'][k]} vs {exited[k]}" for k in common if p["counters"][k] != exited[k]]
    missing = [k for k in SHOWN_KEYS if k not in common]
    if differ or missing:
        print(f"  differ (vsock-stat vs at exit): {', '.join(differ) or '-'}; missing: {', '.join(missing) or '-'}")
        return 1
    print(f"  all {len(common)} counters of the line at exit equal in vsock-stat's last look")
    if exited["rdma_bytes_received"] == 0 or exited["upgrades_done"] < int(min_upgrades):
        print(f"  at exit: rdma_bytes_received={exited['rdma_bytes_received']},"
              f" upgrades_done={exited['upgrades_done']} (expected at least {min_upgrades})")
        return 1
    return 0


if __name__ == "__main__":
    commands = {"live": live, "rows": rows, "settle": settle, "at-exit": at_exit}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    try:
        sys.exit(commands[sys.argv[1]](*sys.argv[2:]))
    except AssertionError as e:
        print(f"  {e}")
        sys.exit(1)
