"""bitflipd under load (bench/daemon_bench.py): the report, its tables and the
doc writer."""
import os
import benchlib  # the machine helpers; numpy not needed
from daemon_proc import BUSY_LIMIT, END, ROOT, START, log


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
