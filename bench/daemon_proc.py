"""bitflipd under load (bench/daemon_bench.py): its files and plan, the machine,
the daemon process, its HTTP API, the CPU phases and wrk."""
import http.client
import json
import os
import platform
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
import benchlib  # the machine helpers; numpy not needed


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
