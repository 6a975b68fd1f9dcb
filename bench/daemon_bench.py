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
import http.client
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

# the parts, each a module of its own beside this script (the house's 900 lines)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_proc import (Daemon, PLAN, Phase, ROOT, TOKENS, campaign, file_id, log,  # noqa: E402
                         machine_info, must, proc_status, ready, run_wrk, sequential, sse_gauge, submit,
                         upload, versions, wait_quiet, wait_running)
from daemon_report import report  # noqa: E402
from daemon_streams import StreamGroup, check_streams  # noqa: E402


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
