#!/usr/bin/python3
"""bitflipd under load: HTTP throughput and latency, memory, and event-stream delivery.

  /usr/bin/python3 bench/daemon_bench.py [--bitflipd build/bitflipd] [--write-doc docs/BENCHMARKS.md]
        [--quick] [--out bench/out/daemon.json]
  /usr/bin/python3 bench/daemon_bench.py --render bench/out/daemon.json [--write-doc ...]

Builds nothing; standard library only (plus `wrk`: scripts/install-deps.sh --bench).
Runs a private copy of bitflipd (`--listen 127.0.0.1:0 --port-file F --data-dir TMP --workers 2`)
and, while a long campaign keeps both workers busy the whole time:

  1. uploads tests/fixtures/conformance/demo_digits.{onnx,eval.safetensors}, submits
     tests/fixtures/specs/digits_weights.json with 2,000,000 trials and checks it runs;
  2. measures the campaign's trials/s with nothing else going on (the reference);
  3. RSS (VmRSS / VmHWM of /proc/PID/status) before and after 10,000 requests sent one at a
     time over one keep-alive connection (GET /v1/campaigns/{id} and /v2/health/ready
     alternately), after 1,000 requests of warm-up; the client-side latency of those too;
  4. `wrk -t2 -c50 -d20s --latency` on GET /v1/campaigns/{id}, then on GET /v2/health/ready:
     requests/s, p50 / p99 (and the rest of wrk's distribution), errors;
  5. 200 event-stream clients (raw sockets, one selector thread) on GET /v1/campaigns/{id}/events
     held for 60 s; then the campaign is canceled and every client must get the final
     progress / state / end. Per client: events by type, heartbeats, ids strictly increasing,
     and no event missed that the others got (see `check_streams`). A short campaign (240
     trials) submitted at the start of the window, with its own 200 clients: in the one
     tenant ("default") it waits behind the long campaign (bitflipd runs a tenant's started
     campaigns first), so it runs once the long one is canceled, and all 200 must get
     state / progress / result / end with identical ids;
  6. a second daemon with two tenants (--tokens-file): tenant A's long campaign keeps both
     workers busy while tenant B's short campaign (240 trials) is submitted, runs and ends,
     followed by 200 clients: the "short campaign finishes under load" check.

Between phases: the daemon's CPU time (its event-loop thread and the rest, i.e. the workers),
the CPU of wrk and of this script, the load average, the CPU used by other processes of the
shared machine (from /proc/stat), the campaign's progress. Raw results: bench/out/daemon.json;
--write-doc rewrites only the section between <!-- daemon-bench:start --> and
<!-- daemon-bench:end --> of that file (appended if absent). Exit status 1 if the daemon
failed, a request failed, or a stream check failed.
"""
import argparse
import datetime
import hashlib
import http.client
import json
import os
import platform
import re
import resource
import selectors
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402  (the machine helpers; numpy not needed)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
START, END = "<!-- daemon-bench:start -->", "<!-- daemon-bench:end -->"
MODEL = os.path.join(ROOT, "tests", "fixtures", "conformance", "demo_digits.onnx")
DATASET = os.path.join(ROOT, "tests", "fixtures", "conformance", "demo_digits.eval.safetensors")
SPEC = os.path.join(ROOT, "tests", "fixtures", "specs", "digits_weights.json")
CLK_TCK = os.sysconf("SC_CLK_TCK")
BUSY_LIMIT = benchlib.BUSY_LIMIT   # cores used by other processes that make a phase count as disturbed
TOKENS = {"bench-long": "bench-long-token-000000000000", "bench-short": "bench-short-token-00000000000"}

# full / --quick
PLAN = {
    "trials": (2_000_000, 2_000_000),
    "wrk_seconds": (20, 5),
    "rss_requests": (10_000, 2_000),
    "warmup_requests": (1_000, 200),
    "sse_clients": (200, 50),
    "sse_seconds": (60, 15),
    "short_trials": (240, 240),
    "idle_seconds": (5, 2),
}


def log(msg):
    print(f"[daemon] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- machine


cpu_stat = benchlib.cpu_stat
cpu_busy_seconds = benchlib.cpu_busy_seconds
machine_info = benchlib.machine_info
file_id = benchlib.file_id


def wait_quiet(max_wait):
    return benchlib.wait_quiet(max_wait, tag="daemon")


def run_out(cmd, **kw):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, **kw)
        return (p.stdout + p.stderr).strip() if p.returncode == 0 else None
    except OSError:
        return None


def versions(bitflipd):
    v = {"python": platform.python_version()}
    for name, pkg in (("wrk", "wrk"), ("libmicrohttpd", "libmicrohttpd12*"), ("libuv", "libuv1")):
        out = run_out(["dpkg-query", "-W", "-f", "${Version}\n", pkg])
        v[name] = out.splitlines()[0] if out else None
    v["bitflipd"] = run_out([bitflipd, "--version"])
    rev = run_out(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT)
    if rev:
        dirty = run_out(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT)
        untracked = run_out(["git", "status", "--porcelain", "--", "server"], cwd=ROOT)
        v["commit"] = rev + ("+dirty" if dirty or untracked else "")
    return v


# ---------------------------------------------------------------- the daemon process


def proc_status(pid):
    """VmRSS / VmHWM (MiB) and threads of a process."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0]) / 1024.0
            elif k == "Threads":
                out[k] = int(v)
    return out


def _stat_cpu(path):
    with open(path) as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def thread_cpu(pid):
    """(CPU seconds of the main thread = bitflipd's event loop / HTTP, of all its other threads).
    The rest is the process total (which keeps the time of threads that have exited: the engine
    starts threads per chunk) minus the main thread."""
    total = _stat_cpu(f"/proc/{pid}/stat")
    main = _stat_cpu(f"/proc/{pid}/task/{pid}/stat")
    return main, total - main


class Daemon:
    def __init__(self, binary, workdir, name, tokens=None):
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir)
        self.port_file = os.path.join(self.dir, "port")
        self.log_path = os.path.join(self.dir, "bitflipd.log")
        self.cmd = [binary, "--listen", "127.0.0.1:0", "--port-file", self.port_file,
                    "--data-dir", os.path.join(self.dir, "data"), "--workers", "2"]
        if tokens:
            tf = os.path.join(self.dir, "tokens")
            with open(tf, "w") as f:
                f.writelines(f"{t}:{k}\n" for t, k in tokens.items())
            self.cmd += ["--tokens-file", tf]
        self.logf = open(self.log_path, "w")
        self.t_start = time.time()
        self.p = subprocess.Popen(self.cmd, stdout=self.logf, stderr=subprocess.STDOUT, cwd=self.dir)
        self.pid = self.p.pid
        self.port = None
        t_end = time.time() + 30
        while time.time() < t_end:
            if self.p.poll() is not None:
                raise RuntimeError(f"bitflipd exited at start (status {self.p.returncode}): {self.log_tail()}")
            try:
                with open(self.port_file) as f:
                    txt = f.read().strip()
                if txt:
                    self.port = int(txt)
                    st, _ = request(self.port, "GET", "/v2/health/ready")
                    if st == 200:
                        break
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        else:
            self.stop()
            raise RuntimeError("bitflipd did not become ready within 30 s: " + self.log_tail())
        self.ready_s = time.time() - self.t_start

    def log_tail(self, n=5):
        try:
            with open(self.log_path, errors="replace") as f:
                return " | ".join(f.read().strip().splitlines()[-n:])
        except OSError:
            return ""

    def alive(self):
        return self.p.poll() is None

    def stop(self):
        """SIGTERM; returns (exit status, seconds to exit)."""
        if self.p.poll() is None:
            t0 = time.time()
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                self.logf.close()
                return "killed after 20 s", time.time() - t0
            self.logf.close()
            return self.p.returncode, time.time() - t0
        self.logf.close()
        return self.p.returncode, 0.0

    def log_summary(self):
        """Request log lines by status class, and warn/error lines (first few)."""
        by_status, problems, n = {}, [], 0
        req = re.compile(r" (GET|POST|PUT|DELETE|HEAD|PATCH) \S+ (\d{3}) ")
        with open(self.log_path, errors="replace") as f:
            for line in f:
                n += 1
                m = req.search(line)
                if m:
                    k = m.group(2)[0] + "xx"
                    by_status[k] = by_status.get(k, 0) + 1
                    if m.group(2)[0] == "5":
                        problems.append(line.strip())
                elif " warn " in line or " error " in line:
                    problems.append(line.strip())
        return {"lines": n, "bytes": os.path.getsize(self.log_path), "requests_by_status": by_status,
                "warn_error_lines": len(problems), "warn_error_first": problems[:8]}


# ---------------------------------------------------------------- HTTP


def request(port, method, path, body=None, ctype=None, token=None, timeout=30):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {}
        if ctype:
            h["Content-Type"] = ctype
        if token:
            h["Authorization"] = "Bearer " + token
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data) if data else None
        except ValueError:
            return r.status, data.decode("utf-8", "replace")
    finally:
        c.close()


def must(port, method, path, want=(200, 201, 202), **kw):
    st, j = request(port, method, path, **kw)
    if st not in want:
        raise RuntimeError(f"{method} {path}: HTTP {st}: {str(j)[:300]}")
    return j


def upload(port, token=None):
    with open(MODEL, "rb") as f:
        model = must(port, "POST", "/v1/models", body=f.read(), ctype="application/octet-stream", token=token)["id"]
    with open(DATASET, "rb") as f:
        ds = must(port, "POST", "/v1/datasets", body=f.read(), ctype="application/octet-stream", token=token)["id"]
    return model, ds


def submit(port, model, ds, trials, token=None):
    with open(SPEC) as f:
        spec = json.load(f)
    spec.update(model=model, dataset=ds, trials=trials)
    j = must(port, "POST", "/v1/campaigns", body=json.dumps(spec).encode(), ctype="application/json", token=token)
    return j["id"], spec


def campaign(port, cid, token=None):
    j = must(port, "GET", f"/v1/campaigns/{cid}", token=token)
    return {"t": time.time(), "state": j["state"], "done": j["progress"]["trials_done"],
            "planned": j["progress"]["trials_planned"]}


def sse_gauge(port, timeout=5):
    """bitflip_sse_clients of GET /metrics, once it is 0 (or after timeout s): streams the
    daemon still holds."""
    t_end = time.time() + timeout
    while True:
        st, txt = request(port, "GET", "/metrics")
        m = re.search(r"^bitflip_sse_clients (\d+)", txt if isinstance(txt, str) else "", re.M)
        n = int(m.group(1)) if m else None
        if n == 0 or time.time() >= t_end:
            return n
        time.sleep(0.2)


def ready(port):
    return must(port, "GET", "/v2/health/ready")


def wait_running(port, cid, token=None, timeout=60):
    """Until the campaign is running, its progress moves and both workers have a chunk."""
    t_end = time.time() + timeout
    first = None
    while time.time() < t_end:
        c = campaign(port, cid, token)
        r = ready(port)
        if c["state"] == "running" and r.get("chunks_running") == r.get("workers"):
            if first is None:
                first = c
            elif c["done"] > first["done"]:
                return c, r
        elif c["state"] not in ("queued", "running"):
            raise RuntimeError(f"campaign {cid} is {c['state']}")
        time.sleep(0.3)
    raise RuntimeError(f"campaign {cid} did not start running on both workers within {timeout} s")


def sequential(port, paths, n, warmup=False):
    """n GETs one after the other over one keep-alive connection, cycling through paths.
    Returns latencies (s) and failures."""
    lat, bad, reconnects = [], 0, 0
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    t0 = time.perf_counter()
    for i in range(n):
        p = paths[i % len(paths)]
        for attempt in (0, 1):
            try:
                s = time.perf_counter()
                c.request("GET", p)
                r = c.getresponse()
                r.read()
                lat.append(time.perf_counter() - s)
                if r.status != 200:
                    bad += 1
                if r.will_close:
                    c.close()
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                    reconnects += 1
                break
            except (OSError, http.client.HTTPException):
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                reconnects += 1
                if attempt:
                    bad += 1
    wall = time.perf_counter() - t0
    c.close()
    lat.sort()
    return {"requests": n, "failed": bad, "reconnects": reconnects, "seconds": wall,
            "rps": n / wall if wall > 0 else None,
            "p50_ms": pct(lat, 50) * 1e3 if lat else None, "p99_ms": pct(lat, 99) * 1e3 if lat else None,
            "max_ms": lat[-1] * 1e3 if lat else None}


def pct(sorted_vals, p):
    if not sorted_vals:
        return None
    k = min(len(sorted_vals) - 1, max(0, int(round(p / 100.0 * (len(sorted_vals) - 1)))))
    return sorted_vals[k]


# ---------------------------------------------------------------- phases (CPU accounting)


class Phase:
    """CPU used by the daemon, this script, child processes and everyone else during a phase."""

    def __init__(self, name, d, port, cid, token=None):
        self.name, self.d, self.port, self.cid, self.token = name, d, port, cid, token
        self.t0 = time.time()
        self.busy0 = cpu_stat()
        self.dm0 = thread_cpu(d.pid)
        ru = resource.getrusage(resource.RUSAGE_SELF)
        self.self0 = ru.ru_utime + ru.ru_stime
        self.c0 = campaign(port, cid, token) if cid else None
        self.child_cpu = 0.0

    def end(self, **extra):
        c1 = campaign(self.port, self.cid, self.token) if self.cid else None
        wall = time.time() - self.t0
        b1 = cpu_stat()
        busy = {k: b1[k] - self.busy0[k] for k in b1}
        dm1 = thread_cpu(self.d.pid)
        ru = resource.getrusage(resource.RUSAGE_SELF)
        own = ru.ru_utime + ru.ru_stime - self.self0
        loop_cpu, work_cpu = dm1[0] - self.dm0[0], dm1[1] - self.dm0[1]
        others = max(0.0, (busy["proc"] - loop_cpu - work_cpu - own - self.child_cpu) / wall)
        r = {"phase": self.name, "wall_s": wall, "loadavg": os.getloadavg(),
             "daemon_loop_cores": loop_cpu / wall, "daemon_worker_cores": work_cpu / wall,
             "client_cores": (own + self.child_cpu) / wall, "others_cores": others,
             "irq_cores": busy["irq"] / wall, "steal_cores": busy["steal"] / wall,
             "machine_cores": (busy["proc"] + busy["irq"] + busy["steal"]) / wall}
        if c1 and self.c0:
            dt = c1["t"] - self.c0["t"]
            r["campaign_state"] = c1["state"]
            r["trials"] = c1["done"] - self.c0["done"]
            r["trials_per_s"] = r["trials"] / dt if dt > 0 else None
        r.update(extra)
        return r


# ---------------------------------------------------------------- wrk

WRK_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def wrk_ms(s):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", s)
    return float(m.group(1)) * WRK_UNITS[m.group(2)] if m else None


def parse_wrk(out):
    r = {"latency": {}}
    m = re.search(r"Latency\s+(\S+)\s+(\S+)\s+(\S+)", out)
    if m:
        r["avg_ms"], r["stdev_ms"], r["max_ms"] = wrk_ms(m.group(1)), wrk_ms(m.group(2)), wrk_ms(m.group(3))
    for p, v in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", out, re.M):
        r["latency"][p] = wrk_ms(v)
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+), ([\d.]+\w+) read", out)
    if m:
        r["requests"] = int(m.group(1))
        r["read"] = m.group(4)
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    r["rps"] = float(m.group(1)) if m else None
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    r["non_2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    r["socket_errors"] = dict(zip(("connect", "read", "write", "timeout"), map(int, m.groups()))) if m else {}
    return r


def run_wrk(port, path, a, phase):
    url = f"http://127.0.0.1:{port}{path}"
    cmd = ["wrk", f"-t{a.wrk_threads}", f"-c{a.wrk_conns}", f"-d{a.wrk_seconds}s", "--latency", url]
    log("  " + " ".join(cmd))
    with tempfile.TemporaryFile() as fo:
        p = subprocess.Popen(cmd, stdout=fo, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
        fo.seek(0)
        out = fo.read().decode("utf-8", "replace")
    phase.child_cpu += ru.ru_utime + ru.ru_stime
    r = parse_wrk(out)
    r.update(cmd=" ".join(cmd[:-1] + [url.replace(str(port), "PORT")]), rc=os.waitstatus_to_exitcode(status),
             wrk_cores=(ru.ru_utime + ru.ru_stime) / max(1e-9, a.wrk_seconds), output=out.strip().splitlines())
    return r


# ---------------------------------------------------------------- event streams


class StreamClient:
    __slots__ = ("i", "sock", "req", "sent", "buf", "state", "status", "chunked", "chunk_left",
                 "line", "ev", "events", "heartbeats", "t_open", "t_headers", "t_end", "error",
                 "ended", "closed")

    def __init__(self, i, req):
        self.i, self.req, self.sent = i, req, 0
        self.buf = b""
        self.state = "connect"
        self.status = None
        self.chunked = False
        self.chunk_left = None    # bytes left in the current chunk; None: a size line is next
        self.line = b""
        self.ev = {}
        self.events = []          # (t, id, type, data)
        self.heartbeats = []      # t
        self.t_open = time.time()
        self.t_headers = self.t_end = None
        self.error = None
        self.ended = False        # got the `end` event
        self.closed = False       # the response (or the connection) ended

    # -- HTTP framing
    def feed(self, data, now):
        self.buf += data
        while True:
            if self.state == "headers":
                i = self.buf.find(b"\r\n\r\n")
                if i < 0:
                    return
                head, self.buf = self.buf[:i].decode("latin-1"), self.buf[i + 4:]
                lines = head.split("\r\n")
                try:
                    self.status = int(lines[0].split()[1])
                except (IndexError, ValueError):
                    self.status = -1
                hdr = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
                self.chunked = "chunked" in hdr.get("transfer-encoding", "").lower()
                self.t_headers = now
                self.state = "body"
                if self.status != 200:
                    self.error = f"HTTP {self.status}"
            elif self.state != "body":
                return
            elif not self.chunked:
                self.sse(self.buf, now)
                self.buf = b""
                return
            elif self.chunk_left is None:          # a chunk-size line
                i = self.buf.find(b"\r\n")
                if i < 0:
                    return
                size = int(self.buf[:i].split(b";")[0], 16)
                self.buf = self.buf[i + 2:]
                if size == 0:                      # the last chunk: the response is over
                    self.closed, self.t_end, self.state = True, now, "done"
                    return
                self.chunk_left = size
            elif self.chunk_left > 0:              # chunk data
                if not self.buf:
                    return
                take = self.buf[:self.chunk_left]
                self.buf = self.buf[len(take):]
                self.chunk_left -= len(take)
                self.sse(take, now)
            else:                                  # the CRLF after a chunk's data
                if len(self.buf) < 2:
                    return
                self.buf = self.buf[2:]
                self.chunk_left = None

    # -- Server-Sent Events
    def sse(self, data, now):
        self.line += data
        while True:
            i = self.line.find(b"\n")
            if i < 0:
                return
            raw, self.line = self.line[:i], self.line[i + 1:]
            s = raw.decode("utf-8", "replace").rstrip("\r")
            if s == "":
                if self.ev:
                    e = self.ev
                    self.ev = {}
                    self.events.append((now, e.get("id"), e.get("event", "message"), e.get("data", "")))
                    if e.get("event") == "end":
                        self.ended = True
                continue
            if s.startswith(":"):
                self.heartbeats.append(now)
                continue
            k, _, v = s.partition(":")
            v = v[1:] if v.startswith(" ") else v
            if k == "data":
                self.ev["data"] = self.ev["data"] + "\n" + v if "data" in self.ev else v
            else:
                self.ev[k] = v


class StreamGroup(threading.Thread):
    """n clients on one event stream, driven by one selector in a thread of its own."""

    def __init__(self, port, path, n, token=None, label=""):
        super().__init__(daemon=True)
        self.port, self.path, self.n, self.label = port, path, n, label
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self.req = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
                    f"Cache-Control: no-cache\r\n{auth}\r\n").encode()
        self.clients = []
        self.stop_flag = threading.Event()
        self.all_open = threading.Event()
        self.t_all_open = None
        self.cpu_s = 0.0

    def run(self):
        t_cpu = time.thread_time()
        sel = selectors.DefaultSelector()
        for i in range(self.n):
            c = StreamClient(i, self.req)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c.sock = s
            rc = s.connect_ex(("127.0.0.1", self.port))
            if rc not in (0, 115):   # EINPROGRESS
                c.error, c.closed = f"connect: {os.strerror(rc)}", True
                s.close()
            else:
                sel.register(s, selectors.EVENT_WRITE, c)
            self.clients.append(c)
        while not self.stop_flag.is_set():
            if not self.all_open.is_set() and all(c.t_headers or c.closed for c in self.clients):
                self.t_all_open = time.time()
                self.all_open.set()
            if all(c.closed for c in self.clients):
                break
            for key, mask in sel.select(0.2):
                c = key.data
                now = time.time()
                try:
                    if c.state == "connect":
                        err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                        if err:
                            raise OSError(err, os.strerror(err))
                        c.state = "send"
                    if c.state == "send":
                        c.sent += c.sock.send(c.req[c.sent:])
                        if c.sent == len(c.req):
                            c.state = "headers"
                            sel.modify(c.sock, selectors.EVENT_READ, c)
                        continue
                    data = c.sock.recv(262144)
                    if not data:
                        if not c.closed:
                            c.closed, c.t_end = True, now
                            if not c.ended:
                                c.error = c.error or "connection closed before the end event"
                        sel.unregister(c.sock)
                        c.sock.close()
                        continue
                    c.feed(data, now)
                    if c.closed:    # the last chunk: done with this client
                        sel.unregister(c.sock)
                        c.sock.close()
                except (OSError, ValueError) as e:
                    c.error, c.closed, c.t_end = f"{type(e).__name__}: {e}", True, now
                    try:
                        sel.unregister(c.sock)
                    except (KeyError, ValueError):
                        pass
                    c.sock.close()
        for c in self.clients:
            if not c.closed:
                try:
                    sel.unregister(c.sock)
                except (KeyError, ValueError):
                    pass
                c.sock.close()
        sel.close()
        self.all_open.set()
        self.cpu_s = time.thread_time() - t_cpu

    def wait_ended(self, timeout):
        t_end = time.time() + timeout
        while time.time() < t_end:
            if all(c.ended or c.closed for c in self.clients):
                return True
            time.sleep(0.05)
        return False

    def stop(self):
        self.stop_flag.set()
        self.join(10)


def seq_of(eid):
    """'3-17' -> ('3', 17)."""
    if not eid or "-" not in eid:
        return None, None
    p, _, s = eid.rpartition("-")
    try:
        return p, int(s)
    except ValueError:
        return p, None


def check_streams(g, window=None):
    """Per-client and across-client checks of one group of clients on one stream.

    - each client's ids share one prefix and their sequence numbers strictly increase;
    - events with the same id carry the same type and data for every client;
    - every non-progress event (state, result, end: the log keeps them all) reaches every client;
    - progress events are snapshots (the log keeps only the latest; a client joining gets the
      latest). Let p* be the highest sequence number among the clients' first progress
      events: every event after p* was logged after every client had subscribed, so each
      client must get every one of them up to the last event all clients got (`end` once
      the stream ends). A progress event some clients got and others did not is a miss.
    window=(t0, t1): progress events per second per client over that interval."""
    cl = g.clients
    r = {"clients": len(cl), "http_200": sum(1 for c in cl if c.status == 200),
         "errors": sorted({c.error for c in cl if c.error}),
         "clients_with_error": sum(1 for c in cl if c.error),
         "ended": sum(1 for c in cl if c.ended)}
    prefixes, increasing, per_type, heart = set(), 0, {}, []
    content, content_mismatch = {}, 0
    for c in cl:
        seqs = []
        for _, eid, typ, data in c.events:
            p, s = seq_of(eid)
            prefixes.add(p)
            seqs.append(s)
            h = hashlib.sha1(data.encode()).hexdigest()
            if s in content and content[s] != (typ, h):
                content_mismatch += 1
            content.setdefault(s, (typ, h))
        if all(s is not None for s in seqs) and all(b > a for a, b in zip(seqs, seqs[1:])):
            increasing += 1
        for _, _, typ, _ in c.events:
            per_type.setdefault(typ, [0] * len(cl))
        heart.append(len(c.heartbeats))
    for typ in per_type:
        for k, c in enumerate(cl):
            per_type[typ][k] = sum(1 for e in c.events if e[2] == typ)
    r["prefixes"] = sorted(p or "?" for p in prefixes)
    r["ids_increasing"] = increasing
    r["content_mismatch"] = content_mismatch
    r["events_per_client"] = {t: spread(v) for t, v in sorted(per_type.items())}
    r["events_total"] = sum(len(c.events) for c in cl)
    r["heartbeats_per_client"] = spread(heart)
    # non-progress events: all of them, everywhere
    np_union = {s for s, (t, _) in content.items() if t != "progress"}
    np_missing = sum(len(np_union - {seq_of(e[1])[1] for e in c.events if e[2] != "progress"}) for c in cl)
    r["non_progress_ids"] = len(np_union)
    r["non_progress_missing"] = np_missing
    # progress after everyone subscribed, up to the last event everyone got
    firsts = [next((seq_of(e[1])[1] for e in c.events if e[2] == "progress"), None) for c in cl]
    lasts = [max((seq_of(e[1])[1] for e in c.events), default=None) for c in cl]
    if all(x is not None for x in firsts) and all(x is not None for x in lasts):
        lo, hi = max(firsts), min(lasts)
        union = {s for s in content if lo < s <= hi}
        miss = [len(union - {seq_of(e[1])[1] for e in c.events}) for c in cl]
        r["common_range"] = [lo, hi]
        r["common_ids"] = len(union)
        r["progress_missing"] = sum(miss)
        r["clients_missing_some"] = sum(1 for m in miss if m)
        r["identical_in_range"] = all(m == 0 for m in miss)
    else:
        r["common_range"] = None
        # no progress at all anywhere is fine (nothing to miss); some clients without any is not
        with_progress = sum(1 for x in firsts if x is not None)
        r["progress_missing"] = 0 if with_progress in (0, len(cl)) else len(cl) - with_progress
        r["clients_missing_some"] = r["progress_missing"]
    # per id: first client to last client (fan-out)
    times = {}
    for c in cl:
        for t, eid, _, _ in c.events:
            times.setdefault(eid, []).append(t)
    sp = sorted(max(v) - min(v) for v in times.values() if len(v) == len(cl))
    r["fanout_ms"] = {"p50": pct(sp, 50) * 1e3, "p99": pct(sp, 99) * 1e3, "max": sp[-1] * 1e3} if sp else None
    conn = sorted(c.t_headers - c.t_open for c in cl if c.t_headers)
    r["connect_ms"] = {"p50": pct(conn, 50) * 1e3, "max": conn[-1] * 1e3} if conn else None
    if window:
        t0, t1 = window
        rates = [sum(1 for e in c.events if e[2] == "progress" and t0 <= e[0] <= t1) / (t1 - t0) for c in cl]
        r["progress_per_s"] = spread(rates, 2)
        r["window_s"] = t1 - t0
    r["sequence_example"] = [f"{e[1]} {e[2]}" for e in (cl[0].events if cl else [])][-8:]
    r["ok"] = (r["http_200"] == len(cl) and not r["clients_with_error"] and r["ended"] == len(cl)
               and increasing == len(cl) and len(prefixes) == 1 and not content_mismatch and not np_missing
               and r.get("progress_missing") == 0)
    return r


def spread(v, nd=0):
    if not v:
        return None
    v = sorted(v)
    f = (lambda x: round(x, nd)) if nd else (lambda x: x)
    return {"min": f(v[0]), "median": f(statistics.median(v)), "max": f(v[-1])}


# ---------------------------------------------------------------- the run


def phase1(a, binary, work, res):
    log("daemon 1: no tokens (loopback, tenant 'default'), 2 workers")
    d = Daemon(binary, work, "d1")
    res["daemon1"] = {"cmd": " ".join(shlex.quote(x) for x in d.cmd).replace(work, "TMP"), "ready_s": d.ready_s}
    port = d.port
    rss = res["rss"] = [dict(point="started, idle", **proc_status(d.pid))]
    try:
        model, ds = upload(port)
        cid, spec = submit(port, model, ds, a.trials)
        res["campaign"] = {"id": cid, "trials": a.trials, "spec": {k: v for k, v in spec.items()
                                                                    if k not in ("model", "dataset")}}
        c, rd = wait_running(port, cid)
        res["campaign"]["ready_while_running"] = rd
        log(f"campaign {cid}: {a.trials:,} trials, running on {rd['chunks_running']} workers")
        rss.append(dict(point="campaign running", **proc_status(d.pid)))
        phases = res["phases"] = []

        ph = Phase("campaign alone", d, port, cid)
        time.sleep(a.idle_seconds)
        phases.append(ph.end())
        log(f"  alone: {phases[-1]['trials_per_s']:.0f} trials/s")

        paths = [f"/v1/campaigns/{cid}", "/v2/health/ready"]
        sequential(port, paths, a.warmup_requests)
        before = proc_status(d.pid)
        rss.append(dict(point=f"after {a.warmup_requests:,} requests of warm-up", **before))
        ph = Phase(f"{a.rss_requests:,} sequential requests", d, port, cid)
        seq = sequential(port, paths, a.rss_requests)
        after = proc_status(d.pid)
        phases.append(ph.end(requests=seq))
        rss.append(dict(point=f"after {a.rss_requests:,} more (one keep-alive connection)", **after))
        res["rss_delta_kib"] = round((after["VmRSS"] - before["VmRSS"]) * 1024)
        res["sequential"] = seq
        log(f"  RSS {before['VmRSS']:.1f} -> {after['VmRSS']:.1f} MiB over {a.rss_requests:,} requests "
            f"({seq['rps']:.0f} req/s, p50 {seq['p50_ms']:.2f} ms)")

        res["wrk"] = []
        for label, path in (("GET /v1/campaigns/{id}", f"/v1/campaigns/{cid}"),
                            ("GET /v2/health/ready", "/v2/health/ready")):
            ph = Phase(f"wrk {label}", d, port, cid)
            w = run_wrk(port, path, a, ph)
            w["endpoint"] = label
            res["wrk"].append(w)
            phases.append(ph.end())
            w["phase"] = phases[-1]
            log(f"  {label}: {w['rps']:,.0f} req/s, p50 {w['latency'].get('50')} ms, p99 {w['latency'].get('99')} ms")
            if not d.alive():
                raise RuntimeError("bitflipd died under wrk: " + d.log_tail())
        rss.append(dict(point="after both wrk runs", **proc_status(d.pid)))
        res["wrk_total_requests"] = sum(w.get("requests", 0) for w in res["wrk"])

        # ---- event streams
        log(f"  {a.sse_clients} clients on /v1/campaigns/{cid}/events for {a.sse_seconds} s")
        ph = Phase("event streams", d, port, cid)
        g = StreamGroup(port, f"/v1/campaigns/{cid}/events", a.sse_clients, label="long")
        g.start()
        g.all_open.wait(30)
        t_open = g.t_all_open or time.time()
        short_id, _ = submit(port, model, ds, a.short_trials)
        t_short = time.time()
        gs = StreamGroup(port, f"/v1/campaigns/{short_id}/events", a.sse_clients, label="short")
        gs.start()
        gs.all_open.wait(30)
        peak = proc_status(d.pid)
        time.sleep(max(0.0, t_open + a.sse_seconds - time.time()))
        t_close = time.time()
        sc = campaign(port, short_id)
        rd = ready(port)
        during = proc_status(d.pid)
        phases.append(ph.end())
        st = must(port, "POST", f"/v1/campaigns/{cid}/cancel")
        t_cancel = time.time()
        ok_long = g.wait_ended(20)
        ok_short = gs.wait_ended(120)
        g.stop()
        gs.stop()
        t_short_end = max((c.t_end or 0) for c in gs.clients) if gs.clients else None
        res["streams"] = {
            "long": dict(check_streams(g, (t_open, t_close)), held_s=t_close - t_open,
                         all_ended_within_s=(max((c.t_end or 0) for c in g.clients) - t_cancel) if ok_long else None),
            "short_same_tenant": dict(check_streams(gs), campaign=short_id,
                                      state_at_window_end=sc["state"], held_s=t_close - t_short,
                                      ended_s_after_cancel=(t_short_end - t_cancel) if ok_short and t_short_end else None),
            "ready_at_window_end": rd, "cancel_reply_state": (st or {}).get("state"),
            "client_cpu_s": g.cpu_s + gs.cpu_s,
        }
        rss.append(dict(point=f"{2 * a.sse_clients} event streams open (start of window)", **peak))
        rss.append(dict(point="end of the event-stream window", **during))
        res["streams"]["sse_gauge_after"] = sse_gauge(port)
        final = campaign(port, short_id)
        res["streams"]["short_same_tenant"]["final_state"] = final["state"]
        rss.append(dict(point="campaign canceled, streams closed", **proc_status(d.pid)))
        res["long_final"] = campaign(port, cid)
    finally:
        rc, secs = d.stop()
        res["daemon1"].update(exit=rc, stop_s=secs, log=d.log_summary())
    log(f"daemon 1 stopped (exit {rc}, {secs:.1f} s)")


def phase2(a, binary, work, res):
    log("daemon 2: two tenants (tokens); tenant A's long campaign, tenant B's short one under load")
    d = Daemon(binary, work, "d2", tokens=TOKENS)
    res["daemon2"] = {"cmd": " ".join(shlex.quote(x) for x in d.cmd).replace(work, "TMP"), "ready_s": d.ready_s}
    port = d.port
    ta, tb = TOKENS["bench-long"], TOKENS["bench-short"]
    try:
        ma, da = upload(port, token=ta)
        mb, db = upload(port, token=tb)
        cid, _ = submit(port, ma, da, a.trials, token=ta)
        wait_running(port, cid, token=ta)
        ph = Phase("short campaign of another tenant", d, port, cid, token=ta)
        sid, _ = submit(port, mb, db, a.short_trials, token=tb)
        t_sub = time.time()
        g = StreamGroup(port, f"/v1/campaigns/{sid}/events", a.sse_clients, token=tb, label="short")
        g.start()
        g.all_open.wait(30)
        t_open = g.t_all_open or time.time()
        ok = g.wait_ended(120)
        rd = ready(port)
        g.stop()
        lc = campaign(port, cid, token=ta)
        sc = campaign(port, sid, token=tb)
        t_end = max((c.t_end or 0) for c in g.clients) if g.clients else None
        chk = check_streams(g)
        first_running = None
        for c in g.clients[:1]:
            for t, _, typ, data in c.events:
                if typ == "state" and '"running"' in data:
                    first_running = t - t_sub
        res["two_tenants"] = dict(chk, campaign=sid, open_s_after_submit=t_open - t_sub,
                                  running_s_after_submit=first_running,
                                  end_s_after_submit=(t_end - t_sub) if ok and t_end else None,
                                  final_state=sc["state"], long_state_after=lc["state"],
                                  ready_after=rd, phase=ph.end())
        must(port, "POST", f"/v1/campaigns/{cid}/cancel", token=ta)
    finally:
        rc, secs = d.stop()
        res["daemon2"].update(exit=rc, stop_s=secs, log=d.log_summary())
    log(f"daemon 2 stopped (exit {rc}, {secs:.1f} s)")


# ---------------------------------------------------------------- report


def problems_of(res):
    P = []
    for k in ("daemon1", "daemon2"):
        dm = res.get(k)
        if not dm:
            continue
        if dm.get("exit") not in (0, None):
            P.append(f"FAILED: {k} exited with status {dm.get('exit')}")
        lg = dm.get("log") or {}
        if lg.get("requests_by_status", {}).get("5xx"):
            P.append(f"FAILED: {k} answered {lg['requests_by_status']['5xx']} requests with 5xx")
        if lg.get("warn_error_lines"):
            P.append(f"{k}: {lg['warn_error_lines']} warn/error lines in its log, first: "
                     + "; ".join(f"`{x[:160]}`" for x in lg["warn_error_first"][:3]))
    if res.get("error"):
        P.append(f"FAILED: {res['error']}")
    for w in res.get("wrk", []):
        errs = sum((w.get("socket_errors") or {}).values())
        if w.get("non_2xx") or errs or w.get("rc"):
            P.append(f"FAILED: wrk {w['endpoint']}: {w.get('non_2xx')} non-2xx responses, socket errors "
                     f"{w.get('socket_errors')}, exit {w.get('rc')}")
    sq = res.get("sequential")
    if sq and sq.get("failed"):
        P.append(f"FAILED: {sq['failed']} of the {sq['requests']:,} sequential requests failed")
    for ph in res.get("phases", []):
        if ph.get("campaign_state") not in (None, "running"):
            P.append(f"FAILED: the long campaign was {ph['campaign_state']} after phase '{ph['phase']}'")
        if disturbed(ph):
            P.append(f"phase '{ph['phase']}' disturbed: other processes in this VM used "
                     f"{ph.get('others_cores', 0):.2f} cores and the hypervisor took (steal) "
                     f"{ph.get('steal_cores', 0):.2f} cores meanwhile (marked †)")
    st = res.get("streams") or {}
    for name, label in (("long", "200 clients on the long campaign"), ("short_same_tenant", "short campaign, same tenant")):
        c = st.get(name)
        if c and not c.get("ok"):
            P.append(f"FAILED: event streams, {label}: " + stream_fail(c))
    if st and st.get("sse_gauge_after") != 0:
        P.append(f"FAILED: after every client had its `end`, GET /metrics still counts "
                 f"{st.get('sse_gauge_after')} open event streams")
    tt = res.get("two_tenants")
    if tt and not tt.get("ok"):
        P.append("FAILED: event streams, short campaign of another tenant: " + stream_fail(tt))
    if tt and tt.get("long_state_after") != "running":
        P.append(f"FAILED: tenant A's long campaign was {tt.get('long_state_after')} after tenant B's ran")
    return P


def stream_fail(c):
    parts = []
    if c["http_200"] != c["clients"]:
        parts.append(f"{c['clients'] - c['http_200']} clients without HTTP 200")
    if c["clients_with_error"]:
        parts.append(f"{c['clients_with_error']} clients with errors ({'; '.join(c['errors'][:3])})")
    if c["ended"] != c["clients"]:
        parts.append(f"{c['clients'] - c['ended']} clients without the end event")
    if c["ids_increasing"] != c["clients"]:
        parts.append(f"{c['clients'] - c['ids_increasing']} clients with ids not strictly increasing")
    if len(c["prefixes"]) != 1:
        parts.append(f"id prefixes {c['prefixes']}")
    if c["content_mismatch"]:
        parts.append(f"{c['content_mismatch']} events whose type/data differ between clients")
    if c["non_progress_missing"]:
        parts.append(f"{c['non_progress_missing']} state/result/end events missing")
    if c.get("progress_missing"):
        parts.append(f"{c['progress_missing']} progress events missing at {c['clients_missing_some']} clients")
    return ", ".join(parts) or "?"


def f0(x):
    return "–" if x is None else f"{x:,.0f}"


def f2(x):
    return "–" if x is None else (f"{x:,.2f}" if x < 100 else f"{x:,.0f}")


def mib(x):
    return "–" if x is None else f"{x:.1f}"


def sp(d, f=f0):
    if not d:
        return "–"
    if d["min"] == d["max"]:
        return f(d["min"])
    return f"{f(d['min'])} / {f(d['median'])} / {f(d['max'])}"


def disturbed(ph):
    return bool(ph) and (ph.get("others_cores", 0) > BUSY_LIMIT or ph.get("steal_cores", 0) > BUSY_LIMIT)


def dag(ph):
    return "†" if disturbed(ph) else ""


def tables(res):
    L = []
    alone = next((p for p in res.get("phases", []) if p["phase"] == "campaign alone"), None)
    base = (alone or {}).get("trials_per_s")
    hdr = ["endpoint", "client", "requests/s", "p50 ms", "p75 ms", "p90 ms", "p99 ms", "max ms", "requests",
           "errors", "daemon CPU: loop / workers (cores)", "client CPU (cores)",
           "others / steal / irq (cores)", "campaign trials/s (alone: " + f0(base) + dag(alone) + ")",
           "load avg (1 min)"]
    L += ["| " + " | ".join(hdr) + " |", "|" + "|".join(["---"] * len(hdr)) + "|"]
    for w in res.get("wrk", []):
        ph = w.get("phase", {})
        lat = w.get("latency", {})
        errs = (w.get("non_2xx") or 0) + sum((w.get("socket_errors") or {}).values())
        L.append("| " + " | ".join([
            w["endpoint"], f"wrk -t{res['meta']['wrk_threads']} -c{res['meta']['wrk_conns']}, "
                           f"{res['meta']['wrk_seconds']} s",
            f0(w.get("rps")) + dag(ph), f2(lat.get("50")), f2(lat.get("75")), f2(lat.get("90")), f2(lat.get("99")),
            f2(w.get("max_ms")), f0(w.get("requests")), str(errs),
            f"{ph.get('daemon_loop_cores', 0):.2f} / {ph.get('daemon_worker_cores', 0):.2f}",
            f"{ph.get('client_cores', 0):.2f}", env_cores(ph), f0(ph.get("trials_per_s")),
            f"{ph['loadavg'][0]:.2f}" if ph.get("loadavg") else "–"]) + " |")
    sq = res.get("sequential")
    ph = next((p for p in res.get("phases", []) if p.get("requests")), None)
    if sq:
        L.append("| " + " | ".join([
            "both, alternately", f"Python http.client, 1 keep-alive connection, one request at a time "
                                 f"({sq['requests']:,})",
            f0(sq["rps"]) + dag(ph), f2(sq["p50_ms"]), "", "", f2(sq["p99_ms"]), f2(sq["max_ms"]), f0(sq["requests"]),
            str(sq["failed"]),
            f"{ph.get('daemon_loop_cores', 0):.2f} / {ph.get('daemon_worker_cores', 0):.2f}" if ph else "–",
            f"{ph.get('client_cores', 0):.2f}" if ph else "–", env_cores(ph), f0((ph or {}).get("trials_per_s")),
            f"{ph['loadavg'][0]:.2f}" if ph and ph.get("loadavg") else "–"]) + " |")
    return "\n".join(L)


def env_cores(ph):
    if not ph or "steal_cores" not in ph:
        return "–"
    return f"{ph['others_cores']:.2f} / {ph['steal_cores']:.2f} / {ph['irq_cores']:.2f}"


def rss_table(res):
    L = ["| when | VmRSS MiB | VmHWM MiB | threads |", "|---|---|---|---|"]
    for r in res.get("rss", []):
        L.append(f"| {r['point']} | {mib(r.get('VmRSS'))} | {mib(r.get('VmHWM'))} | {r.get('Threads', '–')} |")
    return "\n".join(L)


def stream_table(res):
    st = res.get("streams") or {}
    rows = []
    if st.get("long"):
        c = st["long"]
        rows.append(("long campaign (2 workers busy), held "
                     f"{c['held_s']:.0f} s, then canceled", c))
    if st.get("short_same_tenant"):
        c = st["short_same_tenant"]
        rows.append((f"short campaign ({res['meta']['short_trials']} trials), same tenant: "
                     f"{c.get('state_at_window_end')} during the window, ran after the cancel", c))
    if res.get("two_tenants"):
        c = res["two_tenants"]
        rows.append((f"short campaign ({res['meta']['short_trials']} trials) of tenant B while tenant A's "
                     "long one keeps both workers busy", c))
    hdr = ["stream", "clients", "HTTP 200 / got `end`", "events per client: state / progress / result / end "
           "(min / median / max)", "progress events/s per client", "heartbeats per client",
           "ids strictly increasing", "missed events", "same ids & data everywhere", "fan-out ms p50 / p99 / max"]
    L = ["| " + " | ".join(hdr) + " |", "|" + "|".join(["---"] * len(hdr)) + "|"]
    for name, c in rows:
        e = c.get("events_per_client", {})
        ev = " · ".join(f"{t} {sp(e.get(t))}" for t in ("state", "progress", "result", "end") if t in e)
        fo = c.get("fanout_ms")
        missed = (c.get("non_progress_missing") or 0) + (c.get("progress_missing") or 0)
        L.append("| " + " | ".join([
            name, str(c["clients"]), f"{c['http_200']} / {c['ended']}", ev,
            sp(c.get("progress_per_s"), lambda x: f"{x:.2f}") if c.get("progress_per_s") else "–",
            sp(c.get("heartbeats_per_client")), f"{c['ids_increasing']} of {c['clients']}",
            f"{missed}" + (f" (common range {c['common_range'][0]}…{c['common_range'][1]}, "
                           f"{c['common_ids']} ids)" if c.get("common_range") else ""),
            "yes" if c.get("ok") else "**no**",
            f"{fo['p50']:.1f} / {fo['p99']:.1f} / {fo['max']:.1f}" if fo else "–"]) + " |")
    return "\n".join(L)


def section(res, problems):
    m, mi, v = res["meta"], res["meta"]["machine"], res["meta"]["versions"]
    quick = m.get("quick")
    rss = res.get("rss", [])
    before = next((r for r in rss if r["point"].startswith("after") and "warm-up" in r["point"]), None)
    after = next((r for r in rss if "keep-alive" in r["point"]), None)
    st = res.get("streams") or {}
    tt = res.get("two_tenants") or {}
    L = [START,
         "## bitflipd under load: HTTP, memory, event streams"
         + (" (QUICK RUN: short, few clients; not for citing)" if quick else ""),
         "",
         "Generated by `bench/daemon_bench.py --write-doc` (see `bench/README.md`); edit the script, "
         "not this section. The rest of this file belongs to the other benchmark scripts.",
         "",
         f"- Date: {m['date']} (start of the run)",
         *benchlib.machine_lines(mi),
         f"- Versions: {v.get('bitflipd') or 'bitflipd ?'} at commit {v.get('commit', '?')}"
         + (f" (binary {m['binary']})" if m.get("binary") else "")
         + f"; Debian packages libmicrohttpd12 {v.get('libmicrohttpd') or '?'}, libuv1 {v.get('libuv') or '?'}, "
         f"wrk {v.get('wrk') or '?'}; Python {v.get('python')}",
         f"- Command: `{m['command']}` (took {m['elapsed_s']:.0f} s)",
         f"- Daemon: `{res.get('daemon1', {}).get('cmd', '?')}` (a copy of the binary taken at the start; "
         "request log (text, one line per request) to a file)",
         f"- Load: one campaign of {m['trials']:,} trials (`tests/fixtures/specs/digits_weights.json`: single-bit "
         f"weight flips in `demo_digits`, a small CNN, 360 eval samples; {n_chunks(m['trials'])} chunks) kept "
         "both workers busy "
         "from before the first measurement to the last (checked: state `running`, 2 chunks running, progress "
         "moving).",
         "",
         "**This machine has 2 cores and the daemon's 2 workers keep both busy**: wrk (2 threads), the "
         "Python clients and the daemon's event loop compete with the campaign for them. The numbers are "
         "what the HTTP side gets from a fully loaded box, not its ceiling; the campaign's trials/s in each "
         "phase (next to its rate alone) shows what the load took from the workers. *daemon CPU* splits "
         "bitflipd's CPU into its main thread (libuv loop: HTTP, SQLite reads, event streams) and the other "
         "threads (the workers); *client CPU* is wrk's and this script's; *others / steal / irq* (from "
         "`/proc/stat`) is the CPU used by processes of other sessions in this VM, taken by the hypervisor "
         "for other guests (steal), and spent in interrupts (mostly the benchmark's own loopback traffic). "
         f"† marks a phase in which others or steal exceeded {BUSY_LIMIT} cores: its numbers are then too low.",
         "",
         "### Requests/s and latency",
         "",
         "`GET /v1/campaigns/{id}` (about 1.2 KB of JSON: the campaign row from SQLite and the live "
         "progress) and `GET /v2/health/ready` (no storage access), each under "
         f"`wrk -t{m['wrk_threads']} -c{m['wrk_conns']} -d{m['wrk_seconds']}s --latency`, one after the "
         "other; latencies from wrk's `--latency` distribution. The last row is one client sending "
         "requests one at a time (the RSS check below): the latency without queueing, as Python sees it.",
         "",
         tables(res),
         "",
         "### Memory",
         "",
         "VmRSS / VmHWM of the daemon (`/proc/PID/status`) through the run. The leak check: "
         + (f"**{before['VmRSS']:.1f} MiB before and {after['VmRSS']:.1f} MiB after "
            f"{m['rss_requests']:,} requests** ({res.get('rss_delta_kib', 0):+,} KiB; measured after "
            f"{m['warmup_requests']:,} requests of warm-up), and "
            + (f"{rss_after_wrk(res)} after the {res.get('wrk_total_requests', 0):,} requests of the wrk runs."
               if rss_after_wrk(res) else "")
            if before and after else "–"),
         "",
         rss_table(res),
         "",
         stream_memory(res),
         "",
         "### Event streams",
         "",
         f"{m['sse_clients']} clients (raw sockets in one selector thread of this script, HTTP/1.1, chunked) on "
         "`GET /v1/campaigns/{id}/events` of the running campaign, held "
         f"{(st.get('long') or {}).get('held_s', 0):.0f} s; then the campaign is canceled and each client "
         "must get the final `progress`, `state` (canceled) and `end`, after which the daemon ends the "
         "response. The short campaign's clients connected right after it was submitted and stayed until "
         "its `end`.",
         "",
         stream_table(res),
         "",
         "Checks, per client and across clients: ids share one prefix and strictly increase; an id means "
         "the same type and data for every client; every `state` / `result` / `end` event reaches every "
         "client; `progress` events are snapshots (the daemon keeps only the latest and sends it to a client "
         "that joins), so *missed events* counts, for the ids after the highest first-`progress` id any "
         "client got (logged once every client was subscribed) up to the last id all got, the ids some "
         "client got and another did not. *Fan-out*: per id, the time from the first client's receipt to "
         f"the last one's ({m['sse_clients']} sockets read by one Python thread). Heartbeats (`: heartbeat`) come every 15 s.",
         ""]
    if st.get("short_same_tenant"):
        c = st["short_same_tenant"]
        L += [f"Within one tenant, the short campaign stayed `{c.get('state_at_window_end')}` for the whole "
              f"{c.get('held_s', 0):.0f} s window: bitflipd runs a tenant's started campaigns before it "
              "starts new ones (`server/work/scheduler.h`), so a short campaign waits behind a long one of the "
              "same tenant; it ran and ended "
              + (f"{c['ended_s_after_cancel']:.2f} s after the long one was canceled"
                 if c.get("ended_s_after_cancel") is not None else "(it did not end)")
              + f" (final state `{c.get('final_state')}`). That is why the under-load check uses a second "
                "daemon with two tenants (`--tokens-file`, so every `/v1` request carries a bearer token): "
                "tenant B's short campaign was submitted while tenant A's keeps both workers busy, got a "
                "worker when one of A's chunks ended"
              + (f" (state `running` {tt['running_s_after_submit']:.2f} s after the submission, `end` "
                 f"{tt['end_s_after_submit']:.2f} s after)" if tt.get("running_s_after_submit") is not None
                 and tt.get("end_s_after_submit") is not None else "")
              + (f"; tenant A's campaign was still `{tt.get('long_state_after')}` afterwards." if tt else "."),
              ""]
    if problems:
        L += ["Problems in this run:", ""] + [f"- {p}" for p in problems] + [""]
    else:
        L += ["No problems in this run: no failed request, no daemon warning or error, every stream check "
              "passed.", ""]
    L.append(END)
    return "\n".join(L)


def stream_memory(res):
    rss = {r["point"]: r for r in res.get("rss", [])}
    a = rss.get("after both wrk runs")
    o = next((r for p, r in rss.items() if "event streams open" in p), None)
    g = (res.get("streams") or {}).get("sse_gauge_after")
    n = 2 * res["meta"]["sse_clients"]
    if not (a and o):
        return ""
    per = (o["VmRSS"] - a["VmRSS"]) * 1024 / n
    return ("RSS also moves with the campaign itself: each chunk runs on threads the engine starts "
            "and ends (the *threads* column), and their memory comes and goes with them, so a "
            "difference between two points is not by itself a leak or a saving: compare points with "
            "the same number of threads. "
            f"The {n} open event streams (both groups) added {o['VmRSS'] - a['VmRSS']:.1f} MiB, about "
            f"{per:.0f} KiB each (libmicrohttpd's per-connection memory pool, 32 KiB by default, and the "
            "stream's output buffer). RSS does not drop when they close (the allocator keeps the pages); "
            + (f"GET /metrics counted {g} open streams afterwards" if g is not None else
               "GET /metrics was not read") + ".")


def n_chunks(trials):
    """As bitflipd cuts a campaign (server/http/routes_campaigns.c: 256 trials a chunk, at most 256)."""
    return max(1, min(256, (trials + 255) // 256))


def rss_after_wrk(res):
    r = next((x for x in res.get("rss", []) if x["point"] == "after both wrk runs"), None)
    return f"{r['VmRSS']:.1f} MiB" if r else None


def write_doc(path, text):
    benchlib.write_section(path, START, END, text)


def report(res, doc):
    problems = problems_of(res)
    print(tables(res))
    print()
    print(rss_table(res))
    print()
    print(stream_table(res))
    if problems:
        print()
        for p in problems:
            print(f"- {p}")
    if doc:
        path = doc if os.path.isabs(doc) else os.path.join(ROOT, doc)
        write_doc(path, section(res, problems))
        log(f"wrote the daemon section of {os.path.relpath(path, ROOT)}")
    return 1 if any(p.startswith("FAILED") for p in problems) else 0


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description="bitflipd under load: wrk, RSS, event streams")
    ap.add_argument("--bitflipd", default="build/bitflipd")
    ap.add_argument("--quick", action="store_true", help="short runs, fewer clients (to try the script)")
    ap.add_argument("--trials", type=int, default=None, help="trials of the long campaign (default 2,000,000)")
    ap.add_argument("--wrk-seconds", type=int, default=None)
    ap.add_argument("--wrk-threads", type=int, default=2)
    ap.add_argument("--wrk-conns", type=int, default=50)
    ap.add_argument("--sse-clients", type=int, default=None)
    ap.add_argument("--sse-seconds", type=float, default=None)
    ap.add_argument("--rss-requests", type=int, default=None)
    ap.add_argument("--no-two-tenants", action="store_true", help="skip the second daemon (two tenants)")
    ap.add_argument("--quiet-wait", type=float, default=30,
                    help="at the start, wait up to this many seconds for other processes to go quiet")
    ap.add_argument("--keep", action="store_true", help="keep the daemons' data directories and logs")
    ap.add_argument("--write-doc", metavar="PATH")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "out", "daemon.json"))
    ap.add_argument("--render", metavar="JSON", help="run nothing: tables (and --write-doc) from a saved file")
    a = ap.parse_args()

    if a.render:
        with open(a.render) as f:
            return report(json.load(f), a.write_doc)

    q = 1 if a.quick else 0
    for k, v in PLAN.items():
        if getattr(a, k, None) is None:
            setattr(a, k, v[q])
    if shutil.which("wrk") is None:
        sys.exit("daemon_bench: wrk not found (scripts/install-deps.sh --bench, or apt-get install wrk)")
    src = a.bitflipd if os.path.isabs(a.bitflipd) else os.path.join(ROOT, a.bitflipd)
    if not (os.path.isfile(src) and os.access(src, os.X_OK)):
        sys.exit(f"daemon_bench: {src} not found (build it: cmake --build build --target bitflipd)")

    work = tempfile.mkdtemp(prefix="bitflipd-bench-")
    binary = os.path.join(work, "bitflipd")
    for _ in range(6):   # not while the linker is writing it
        bid = file_id(src)
        shutil.copy2(src, binary)
        if file_id(binary) == bid == file_id(src) and subprocess.run([binary, "--version"],
                                                                     capture_output=True).returncode == 0:
            break
        log(f"{src} is being rebuilt, waiting ...")
        time.sleep(10)
    else:
        sys.exit(f"daemon_bench: could not take a stable copy of {src}")

    log(f"waiting up to {a.quiet_wait:g} s for the machine to go quiet")
    quiet = wait_quiet(a.quiet_wait)
    minfo = machine_info()
    date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    res = {"meta": {"date": date, "machine": minfo, "versions": versions(binary), "binary": bid,
                    "quick": a.quick, "trials": a.trials, "wrk_seconds": a.wrk_seconds,
                    "wrk_threads": a.wrk_threads, "wrk_conns": a.wrk_conns, "sse_clients": a.sse_clients,
                    "sse_seconds": a.sse_seconds, "rss_requests": a.rss_requests,
                    "warmup_requests": a.warmup_requests, "short_trials": a.short_trials,
                    "others_cores_at_start": quiet,
                    "command": "/usr/bin/python3 " + shlex.join(
                        [os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)] + sys.argv[1:])}}
    t0 = time.time()
    try:
        phase1(a, binary, work, res)
        if not a.no_two_tenants:
            phase2(a, binary, work, res)
    except (RuntimeError, OSError, http.client.HTTPException, KeyError, ValueError) as e:
        res["error"] = f"{type(e).__name__}: {e}"
        log(f"FAILED: {res['error']}")
    res["meta"]["elapsed_s"] = time.time() - t0
    res["meta"]["machine"]["loadavg_end"] = os.getloadavg()
    if file_id(src) != bid:
        res["meta"]["binary_changed"] = True
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1, default=str)
    log(f"raw results: {os.path.relpath(os.path.abspath(a.out), ROOT)}")
    if a.keep:
        log(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return report(res, a.write_doc)


if __name__ == "__main__":
    sys.exit(main())
