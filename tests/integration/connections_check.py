"""Idle-connection floods against a bitflipd on loopback (test_connections.sh).

usage: connections_check.py per-ip PORT N PER_IP
       connections_check.py idle PORT N TIMEOUT
       connections_check.py limit PORT MAX

Standard library only. Every loop is bounded; only 127.0.0.1 and 127.0.0.2
(both loopback on Linux) are used. Prints what it measured; exits 1 on a
failed expectation."""
import http.client
import resource
import selectors
import socket
import sys
import time

HOST = "127.0.0.1"
fails = 0


def check(name, cond, detail=""):
    global fails
    if cond:
        print(f"ok   {name} {detail}")
    else:
        print(f"FAIL {name} {detail}")
        fails += 1


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, n)) if hard != resource.RLIM_INFINITY else max(soft, n)
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if want < n:
        sys.exit(f"need {n} descriptors, the hard limit is {hard}")


def flood(port, n):
    """n connections that never send a byte."""
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect((HOST, port))
        s.setblocking(False)
        socks.append(s)
    return socks


def closed_by_server(socks, wait):
    """How many of socks the server closed within `wait` seconds."""
    sel = selectors.DefaultSelector()   # epoll: select() stops at 1024 descriptors
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    closed = 0
    deadline = time.monotonic() + wait
    while closed < len(socks) and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=max(0.0, deadline - time.monotonic())):
            try:
                data = key.fileobj.recv(4096)
            except (ConnectionResetError, BlockingIOError) as e:
                if isinstance(e, BlockingIOError):
                    continue
                data = b""
            if data == b"":
                sel.unregister(key.fileobj)
                closed += 1
    sel.close()
    return closed


def ready(port, source=None, timeout=5.0):
    """GET /v2/health/ready: (status or an error's name, seconds)."""
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection(HOST, port, timeout=timeout,
                                       source_address=(source, 0) if source else None)
        c.request("GET", "/v2/health/ready")
        r = c.getresponse()
        r.read()
        c.close()
        return r.status, time.monotonic() - t0, dict(r.getheaders())
    except (OSError, http.client.HTTPException) as e:
        return type(e).__name__, time.monotonic() - t0, {}


def per_ip(port, n, limit):
    socks = flood(port, n)
    closed = closed_by_server(socks, 3.0)
    held = n - closed
    print(f"{n} idle connections from {HOST}: the daemon holds {held}, closed {closed} at once")
    check("per_ip_cap", 0 < held <= limit, f"(held {held}, limit {limit})")
    st, secs, _ = ready(port, source="127.0.0.2")
    print(f"GET /v2/health/ready from 127.0.0.2 during the flood: {st} in {secs * 1000:.1f} ms")
    check("other_ip_served", st == 200, f"(got {st})")
    st, secs, _ = ready(port, source=HOST)
    print(f"GET /v2/health/ready from the flooding {HOST}: {st} in {secs * 1000:.1f} ms")
    check("flooding_ip_refused", st != 200, f"(got {st})")
    for s in socks:
        s.close()


def idle(port, n, timeout):
    socks = flood(port, n)
    # well inside the timeout (the flood takes a fraction of a second): none closed yet
    early = closed_by_server(socks, 0.2)
    check("none_dropped_early", early == 0, f"({early} closed before the idle timeout)")
    st, secs, _ = ready(port, source=HOST)
    print(f"GET /v2/health/ready with {n} idle connections open: {st} in {secs * 1000:.1f} ms")
    check("served_during_flood", st == 200, f"(got {st})")
    t0 = time.monotonic()
    closed = early + closed_by_server(socks, timeout + 10)
    print(f"idle timeout {timeout} s: {closed} of {n} closed by the daemon after {time.monotonic() - t0:.1f} s")
    check("idle_dropped", closed == n, f"({closed} of {n})")
    for s in socks:
        s.close()


def limit(port, maxc):
    socks = flood(port, maxc)
    time.sleep(0.5)
    st, secs, hdrs = ready(port, source=HOST)
    print(f"request with {maxc} idle connections open (--max-connections {maxc}): {st}")
    check("over_limit_503", st == 503, f"(got {st})")
    check("over_limit_problem", hdrs.get("Content-Type", "").startswith("application/problem+json"), str(hdrs))
    check("over_limit_retry_after", "Retry-After" in hdrs, str(hdrs))
    for s in socks:
        s.close()
    st = None
    for _ in range(50):   # the daemon notices the closes on its next turn
        st, _, _ = ready(port, source=HOST)
        if st == 200:
            break
        time.sleep(0.1)
    check("after_limit_served", st == 200, f"(got {st})")


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    raise_nofile(4096)
    if mode == "per-ip":
        per_ip(port, int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "idle":
        idle(port, int(sys.argv[3]), float(sys.argv[4]))
    elif mode == "limit":
        limit(port, int(sys.argv[3]))
    else:
        sys.exit(f"unknown mode {mode}")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
