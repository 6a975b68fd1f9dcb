#!/usr/bin/python3
"""Fault-campaign throughput: `bitflip run --local` vs PyTorch doing the same faults.

  /usr/bin/python3 bench/campaign_bench.py [--quick] [--cases a,b] [--threads 1,2]
        [--bitflip build/bitflip] [--write-doc docs/BENCHMARKS.md] [--out bench/out/campaigns.json]
  /usr/bin/python3 bench/campaign_bench.py --render bench/out/campaigns.json [--write-doc ...]

For each case it writes a campaign spec into bench/out/campaigns/, then, one process at a
time (after waiting for the machine to go quiet):
  - bitflip run --local --threads N --stats --format json --out R.json --trials-out T.jsonl SPEC
    for each thread count N (the fastest of --reps processes is kept; trials/s from the
    `--stats` line, which excludes loading and the golden pass), and once with --exact at
    1 thread on a spec with fewer trials (the full re-execution engine, as a reference);
  - bench/torch_campaign.py MODEL T.jsonl --flip | --pytorchfi | --activation --threads N
    --max-seconds S: PyTorch 1.13 replaying exactly the faults bitflip drew (the 1-thread run's
    T.jsonl), as PyTorch fault-injection tools do it, over the first trials that fit in S
    seconds; it checks its per-trial metric against bitflip's and that the weights are
    restored bit for bit.
Records trials/s, ratios bitflip / PyTorch at the same thread count, each process's peak RSS
(os.wait4) and bitflip's golden-cache size. The BER case also times bitflip at single rates
from 1e-9 to 1e-5 (0.04 to 380 errors per trial among 38M bits) and PyTorch drawing a BER
trial the per-bit way. Raw results: bench/out/campaigns.json; --write-doc rewrites only the
section between <!-- campaign-bench:start --> and <!-- campaign-bench:end --> of that file
(appended if the markers are absent). Exit status 1 if a run failed, a metric disagreed or a
restore check failed.
"""
import argparse
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import run as evalbench  # noqa: E402  (bench/run.py: wait_quiet, machine_info, versions, ...)

PY = "/usr/bin/python3"
BENCH = benchlib.BENCH_DIR
ROOT = benchlib.REPO_ROOT
TORCH_CAMPAIGN = os.path.join(BENCH, "torch_campaign.py")
START, END = "<!-- campaign-bench:start -->", "<!-- campaign-bench:end -->"
SEED = 7

# trials: full / --quick; exact: trials of the --exact reference run; budget: PyTorch's
# --max-seconds (full / quick); target: the bitflip / PyTorch flip-loop ratio aimed at.
CASES = {
    "dlrm_small": dict(model="dlrm_small", kind="weights", trials=(5000, 1000), exact=(300, 60),
                       patterns=["flip", "pytorchfi"], target=100,
                       what="single-bit flips, uniform over every bit of every fp32 parameter (42k)"),
    "dlrm_large": dict(model="dlrm_large", kind="weights", trials=(5000, 1000), exact=(150, 40),
                       patterns=["flip", "pytorchfi"], target=100,
                       what="single-bit flips, uniform over every bit of every fp32 parameter (1.19M)"),
    "digits_mlp": dict(model="digits_mlp", kind="weights", trials=(10000, 2000), exact=(2000, 400),
                       patterns=["flip", "pytorchfi"], target=20,
                       what="single-bit flips, uniform over every bit of every fp32 parameter (17k)"),
    "digits_cnn": dict(model="digits_cnn", kind="weights", trials=(5000, 1000), exact=(1000, 200),
                       patterns=["flip", "pytorchfi"], target=20,
                       what="single-bit flips, uniform over every bit of every fp32 parameter (3.8k)"),
    "digits_mlp_act": dict(model="digits_mlp", kind="activations", value="/net/net.0/Gemm_output_0",
                           trials=(10000, 2000), exact=(2000, 400), patterns=["activation"], target=100,
                           what="transient single-bit flips of one element of one sample of the first "
                                "Linear's output (`/net/net.0/Gemm_output_0`, 128 per sample)"),
    "dlrm_large_act": dict(model="dlrm_large", kind="activations", value="/top/top.0/Gemm_output_0",
                           trials=(5000, 1000), exact=(150, 40), patterns=["activation"], target=100,
                           what="transient single-bit flips of one element of one sample of the top "
                                "MLP's first Linear output (`/top/top.0/Gemm_output_0`, 256 per sample)"),
    "dlrm_large_ber": dict(model="dlrm_large", kind="ber", rates=[1e-7, 1e-6, 1e-5],
                           trials=(50, 10), exact=(3, 1), patterns=["flip"], target=1,
                           what="BER sweep over every bit of every fp32 parameter (38.0M bits), "
                                "rates 1e-7, 1e-6, 1e-5 (about 3.8, 38 and 380 errors per trial); "
                                "`trials` here is repeats per rate"),
}
# bitflip alone at single BER rates on dlrm_large: repeats (full, quick)
BER_SCALING = [(1e-9, (2000, 400)), (1e-8, (2000, 400)), (1e-7, (1000, 200)),
               (1e-6, (300, 60)), (1e-5, (100, 20))]
SPEEDUP_CASE, SPEEDUP_TARGET = "dlrm_large", 1.8
BUDGET = (20.0, 4.0)    # PyTorch --max-seconds, full / quick
CHAIN_RE = re.compile(r"(\d+) trials in chain mode \((\d+) of them redone exactly\)"
                      r"(?:, (\d+) samples through linear segments)?")
STATS_RE = re.compile(r"bitflip run: (\d+) trials in ([\d.]+) s \(([\d.]+) trials/s\), (\S+) engine, "
                      r"(\d+) threads?, (?:batch \d+, )?golden cache ([\d.]+) (\w+)")


def log(msg):
    print(f"[campaigns] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- processes


def run_proc(cmd, env, timeout, quiet_wait):
    """Run cmd from the repo root (see run.py's measure_process): dict(ok, rc, out, err,
    rss_mib, wall, cpu_s, others_cores)."""
    return evalbench.measure_process(cmd, env, timeout, quiet_wait)


def disturbed(r):
    o = (r or {}).get("others_cores") or 0
    return bool(r and r.get("ok") and o > evalbench.BUSY_LIMIT and o * r["wall"] > 0.05)


def slim(r):
    """A run record without the captured output (kept short for campaigns.json)."""
    r = dict(r)
    r.pop("out", None)
    err = r.pop("err", "")
    r["stderr_tail"] = err.strip().splitlines()[-3:] if err else []
    return r


def bitflip_run(a, case, spec, tag, threads, exact, reps, timeout):
    """Run bitflip `reps` times; keep the fastest. Returns the kept run with `stats`."""
    res_path = os.path.join(a.outdir, f"{case}.{tag}.result.json")
    trials_path = os.path.join(a.outdir, f"{case}.{tag}.trials.jsonl")
    # Timed runs write no per-trial records (users rarely do; at tens of thousands of
    # trials/s the JSON lines would be what is measured); one more, untimed run writes
    # the records PyTorch replays.
    cmd = [a.bitflip, "run", "--local", "--threads", str(threads), "--stats", "--format", "json",
           "--out", res_path] + (["--exact"] if exact else []) + [spec]
    rec_cmd = cmd[:-1] + ["--trials-out", trials_path, spec]
    best, rates = None, []
    for i in range(max(1, reps)):
        log(f"{case}: bitflip {tag} ({i + 1}/{reps})")
        r = run_proc(cmd, benchlib.thread_env(threads), timeout, a.quiet_wait)
        m = STATS_RE.search(r.get("err", ""))
        if r["ok"] and not m:
            r.update(ok=False, error="no --stats line on stderr: " + r.get("err", "")[-200:])
        if not r["ok"]:
            log(f"{case}: bitflip {tag} FAILED: {r.get('error')}")
            return slim(r)
        size, unit = float(m.group(6)), m.group(7)
        r["stats"] = {"trials": int(m.group(1)), "seconds": float(m.group(2)),
                      "trials_per_s": float(m.group(3)), "engine": m.group(4),
                      "threads": int(m.group(5)),
                      "cache_mib": size * {"B": 1 / 2 ** 20, "KiB": 1 / 1024, "MiB": 1, "GiB": 1024}.get(unit, 1)}
        c = CHAIN_RE.search(r.get("err", ""))
        if c:
            r["stats"].update(chain_trials=int(c.group(1)), chain_exact=int(c.group(2)),
                              chain_linear=int(c.group(3) or 0))
        rates.append(r["stats"]["trials_per_s"])
        if best is None or r["stats"]["trials_per_s"] > best["stats"]["trials_per_s"]:
            best = r
    best = slim(best)
    best["all_rates"] = rates
    rec = run_proc(rec_cmd, benchlib.thread_env(threads), timeout, 0)
    if not rec["ok"]:
        log(f"{case}: bitflip {tag} writing the trial records FAILED: {rec.get('error')}")
        return slim(rec)
    best["trials_path"] = trials_path
    best["result_path"] = res_path
    with open(trials_path, "rb") as f:
        best["trials_sha256"] = hashlib.sha256(f.read()).hexdigest()[:16]
    return best


def torch_run(a, case, model_dir, model, trials_path, pattern, threads, timeout, extra=()):
    log(f"{case}: PyTorch {pattern} threads={threads}")
    cmd = [PY, TORCH_CAMPAIGN, model] + ([trials_path] if trials_path else []) + \
          ([f"--{pattern}"] if pattern != "ber-draw" else []) + \
          ["--threads", str(threads), "--dir", model_dir] + list(extra)
    if pattern != "ber-draw":
        cmd += ["--max-seconds", str(a.budget)]
    r = run_proc(cmd, benchlib.thread_env(threads), timeout, a.quiet_wait)
    obj = None
    for line in reversed(r.get("out", "").strip().splitlines()):
        try:
            obj = json.loads(line)
            break
        except ValueError:
            continue
    if obj is not None:
        r["json"] = obj
        if not r["ok"] and r["rc"] == 4:
            r["error"] = "restore or old/new check FAILED: " + r.get("error", "")
    elif r["ok"]:
        r.update(ok=False, error="no JSON on stdout")
    if not r["ok"]:
        log(f"{case}: PyTorch {pattern} threads={threads} FAILED: {r.get('error')}")
    return slim(r)


# ---------------------------------------------------------------- specs


def write_spec(a, case, c, model_dir, n_trials, suffix=""):
    rel = lambda p: os.path.relpath(p, ROOT)  # noqa: E731  (paths in the spec: from the repo root)
    spec = {"model": rel(os.path.join(model_dir, c["model"] + ".onnx")),
            "dataset": rel(os.path.join(model_dir, c["model"] + ".eval.safetensors")),
            "seed": SEED}
    if c["kind"] == "ber":
        spec["faults"] = {"target": "weights", "tensors": ["*"], "model": "ber",
                          "representation": "fp32"}
        if "rate" in c:
            spec["faults"]["rate"] = c["rate"]
        else:
            spec["faults"]["rates"] = c["rates"]
        spec["faults"]["repeats"] = n_trials
    else:
        spec["trials"] = n_trials
        f = {"target": c["kind"], "tensors": [c["value"]] if c["kind"] == "activations" else ["*"],
             "model": "bitflip", "bits": 1, "representation": "fp32"}
        if c["kind"] == "activations":
            f["persistence"] = "transient"
        spec["faults"] = f
        spec["sampling"] = "uniform"
    path = os.path.join(a.outdir, f"{case}{suffix}.spec.json")
    with open(path, "w") as fh:
        json.dump(spec, fh, indent=1)
        fh.write("\n")
    return path, spec


# ---------------------------------------------------------------- the cases


def run_case(a, case, c, cdir):
    q = 1 if a.quick else 0
    d = benchlib.find_model(c["model"], [cdir, benchlib.MODELS_DIR])
    n_samples = benchlib.read_safetensors(os.path.join(d, c["model"] + ".eval.safetensors"))["labels"].shape[0]
    spec_path, spec = write_spec(a, case, c, d, c["trials"][q])
    exact_path, _ = write_spec(a, case, c, d, c["exact"][q], ".exact")
    row = {"case": case, "model": c["model"], "kind": c["kind"], "what": c["what"],
           "samples": n_samples, "target": c["target"], "spec": os.path.relpath(spec_path, ROOT),
           "spec_json": spec, "bitflip": {}, "torch": {}, "exact": None}
    timeout = a.timeout
    for t in a.threads:
        row["bitflip"][str(t)] = bitflip_run(a, case, spec_path, f"bitflip_{t}t", t, False, a.reps, timeout)
    row["exact"] = bitflip_run(a, case, exact_path, "bitflip_exact_1t", 1, True, 1, timeout)
    ref = row["bitflip"].get(str(a.threads[0]))
    if not ref or not ref.get("ok"):
        return row
    for pattern in c["patterns"]:
        ths = a.threads if pattern in ("flip", "activation") else a.threads[:1]
        for t in ths:
            row["torch"][f"{pattern}_{t}"] = torch_run(a, case, d, c["model"], ref["trials_path"],
                                                       pattern, t, timeout)
    if c["kind"] == "ber":
        row["scaling"] = []
        for rate, reps in BER_SCALING:
            cc = dict(c, rate=rate)
            cc.pop("rates")
            p, _ = write_spec(a, case, cc, d, reps[q], f".rate{rate:g}")
            r = bitflip_run(a, case, p, f"rate{rate:g}_1t", 1, False, 1, timeout)
            if r.get("ok"):
                with open(r["trials_path"]) as fh:
                    nf = [json.loads(line)["n_faults"] for line in fh if line.strip()]
                r["mean_faults"] = sum(nf) / max(1, len(nf))
            row["scaling"].append({"rate": rate, "repeats": reps[q], "run": r})
        row["ber_draw"] = torch_run(a, case, d, c["model"], None, "ber-draw", 1, timeout,
                                    ["--ber-draw", "1e-9,1e-5", "--draws", "2" if a.quick else "3"])
    return row


# ---------------------------------------------------------------- summary


def rate_of(r):
    if not r or not r.get("ok"):
        return None
    if "stats" in r:
        return r["stats"]["trials_per_s"]
    return (r.get("json") or {}).get("trials_per_s")


def summarize(rows, threads):
    problems = []
    for row in rows:
        tag = row["case"]
        row["rate"] = {}
        for t in threads:
            row["rate"][f"bitflip_{t}"] = rate_of(row["bitflip"].get(str(t)))
        row["rate"]["exact_1"] = rate_of(row["exact"])
        for k, r in row["torch"].items():
            row["rate"][k] = rate_of(r)
        runs = [(f"bitflip {t}t", row["bitflip"].get(str(t))) for t in threads] + \
               [("bitflip --exact", row["exact"])] + [(f"PyTorch {k}", r) for k, r in row["torch"].items()]
        if row.get("ber_draw"):
            runs.append(("PyTorch per-bit BER draw", row["ber_draw"]))
        for s in row.get("scaling", []):
            runs.append((f"bitflip rate {s['rate']:g}", s["run"]))
        for name, r in runs:
            if r is None:
                continue
            if not r.get("ok"):
                problems.append(f"{tag}: {name} FAILED: {r.get('error')}")
            elif disturbed(r):
                problems.append(f"{tag}: {name} disturbed: other processes used "
                                f"{r['others_cores']:.2f} cores meanwhile (marked †)")
        # agreement of PyTorch's per-trial metric with bitflip's
        row["agreement"] = {}
        for k, r in row["torch"].items():
            j = (r or {}).get("json") or {}
            ag = j.get("agreement")
            if not ag:
                continue
            row["agreement"][k] = ag
            if ag["metric_match"] != ag["compared"]:
                problems.append(f"{tag}: PyTorch {k}: {j.get('metric')} MISMATCH in "
                                f"{ag['compared'] - ag['metric_match']} of {ag['compared']} trials "
                                f"(max |diff| {ag['metric_max_abs_diff']:.2g})")
            if j.get("restored_bit_identical") is False:
                problems.append(f"{tag}: PyTorch {k}: weights NOT restored bit-identically")
            if j.get("old_new_bad"):
                problems.append(f"{tag}: PyTorch {k}: {j['old_new_bad']} faults whose old/new value "
                                "does not match bitflip's record")
        b = [row["bitflip"].get(str(t)) for t in threads]
        if len(b) == 2 and all(x and x.get("ok") for x in b) and b[0]["trials_sha256"] != b[1]["trials_sha256"]:
            problems.append(f"{tag}: bitflip's trial records differ between {threads[0]} and "
                            f"{threads[1]} threads")
        base = "activation" if row["kind"] == "activations" else "flip"
        row["ratio"] = {}
        for t in threads:
            bf, pt = row["rate"].get(f"bitflip_{t}"), row["rate"].get(f"{base}_{t}")
            row["ratio"][str(t)] = bf / pt if bf and pt else None
        bf1, fi1 = row["rate"].get(f"bitflip_{threads[0]}"), row["rate"].get(f"pytorchfi_{threads[0]}")
        row["ratio"]["pytorchfi"] = bf1 / fi1 if bf1 and fi1 else None
        rs = [v for v in (row["ratio"].get(str(t)) for t in threads) if v]
        row["meets_target"] = bool(rs) and min(rs) >= row["target"]
        if len(threads) >= 2:
            r1, r2 = row["rate"].get(f"bitflip_{threads[0]}"), row["rate"].get(f"bitflip_{threads[1]}")
            row["speedup"] = r2 / r1 if r1 and r2 else None
    return problems


def fmt_rate(x, dag=""):
    if x is None:
        return "–"
    s = f"{x:,.0f}" if x >= 100 else (f"{x:,.1f}" if x >= 10 else f"{x:.2f}")
    return s + dag


def fmt_x(x):
    return "–" if x is None else (f"{x:,.0f}×" if x >= 100 else f"{x:.1f}×" if x >= 10 else f"{x:.2f}×")


def dag(r):
    return "†" if disturbed(r) else ""


def summary_table(rows, threads):
    t1 = threads[0]
    t2 = threads[1] if len(threads) > 1 else None
    hdr = ["case", f"bitflip {t1}t"] + ([f"bitflip {t2}t", f"{t2}t / {t1}t"] if t2 else []) + \
          ["bitflip --exact 1t", f"PyTorch {t1}t"] + ([f"PyTorch {t2}t"] if t2 else []) + \
          [f"PyTorchFI-style {t1}t", f"bitflip / PyTorch {t1}t"] + \
          ([f"bitflip / PyTorch {t2}t"] if t2 else []) + [f"bitflip / PyTorchFI {t1}t", "target", "met",
                                                            "metric agrees"]
    out = ["| " + " | ".join(hdr) + " |", "|" + "|".join(["---"] * len(hdr)) + "|"]
    for r in rows:
        base = "activation" if r["kind"] == "activations" else "flip"
        bf = lambda t: fmt_rate(r["rate"].get(f"bitflip_{t}"), dag(r["bitflip"].get(str(t))))  # noqa: E731
        pt = lambda k: fmt_rate(r["rate"].get(k), dag(r["torch"].get(k))) if k in r["torch"] else "–"  # noqa: E731
        agree = []
        for k, ag in r["agreement"].items():
            agree.append(f"{ag['metric_match']}/{ag['compared']}")
        cells = [r["case"], bf(t1)] + ([bf(t2), fmt_x(r.get("speedup"))] if t2 else []) + \
                [fmt_rate(r["rate"].get("exact_1"), dag(r["exact"])), pt(f"{base}_{t1}")] + \
                ([pt(f"{base}_{t2}")] if t2 else []) + [pt(f"pytorchfi_{t1}"), fmt_x(r["ratio"].get(str(t1)))] + \
                ([fmt_x(r["ratio"].get(str(t2)))] if t2 else []) + \
                [fmt_x(r["ratio"].get("pytorchfi")), f"≥{r['target']}×", "yes" if r["meets_target"] else "**no**",
                 ", ".join(agree) or "–"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def case_table(r, threads):
    """One row per process of the case."""
    hdr = ["run", "threads", "trials timed", "trials/s", "bitflip ÷ this (same threads)",
           "peak RSS MiB", "notes"]
    out = ["| " + " | ".join(hdr) + " |", "|" + "|".join(["---"] * len(hdr)) + "|"]
    for t in threads:
        b = r["bitflip"].get(str(t))
        if not b:
            continue
        st = b.get("stats", {})
        chain = (f", {st['chain_trials']:,} in chain mode ({st['chain_exact']:,} redone exactly"
                 + (f"; {st['chain_linear']:,} samples through linear segments" if st.get("chain_linear") else "")
                 + ")" if st.get("chain_trials") else "")
        note = (f"{st.get('engine')} engine, golden cache {st.get('cache_mib', 0):.1f} MiB{chain}; best of "
                + ", ".join(fmt_rate(x) for x in b.get("all_rates", []))) if b.get("ok") else b.get("error")
        out.append("| " + " | ".join(["bitflip", str(t), str(st.get("trials", "–")),
                                      fmt_rate(rate_of(b), dag(b)), "", f"{b.get('rss_mib', 0):.0f}",
                                      note]) + " |")
    e = r["exact"]
    if e:
        st = e.get("stats", {})
        bf1 = r["rate"].get(f"bitflip_{threads[0]}")
        ratio = fmt_x(bf1 / rate_of(e)) if bf1 and rate_of(e) else "–"
        out.append("| " + " | ".join(["bitflip --exact", "1", str(st.get("trials", "–")),
                                      fmt_rate(rate_of(e), dag(e)), ratio + " (vs bitflip 1t)",
                                      f"{e.get('rss_mib', 0):.0f}",
                                      "full re-execution of the eval set per trial (first trials of "
                                      "the same campaign)" if e.get("ok") else e.get("error")]) + " |")
    names = {"flip": "PyTorch flip loop", "pytorchfi": "PyTorchFI-style (deepcopy)",
             "activation": "PyTorch forward hook"}
    for k, x in r["torch"].items():
        pattern, t = k.rsplit("_", 1)
        j = x.get("json") or {}
        bf = r["rate"].get(f"bitflip_{t}")
        ag = j.get("agreement") or {}
        if x.get("ok"):
            note = (f"batch {j.get('batch')}" + (f", {j['interaction']}" if j.get("interaction") not in
                                                 (None, "-") else "")
                    + f"; {j.get('metric')} = bitflip's (±1e-5) in {ag.get('metric_match')}/"
                      f"{ag.get('compared')} trials (max diff {ag.get('metric_max_abs_diff', 0):.1g}), "
                      f"outcome in {ag.get('outcome_match')}/{ag.get('compared')}")
            if ag.get("not_compared_incomplete"):
                note += (f", {ag['not_compared_incomplete']} trials not compared (bitflip's record lists "
                         "only their first 8 faults; the rest drawn by PyTorch)")
            if j.get("restored_bit_identical") is not None and pattern != "activation":
                note += "; weights restored bit-identically" if j["restored_bit_identical"] else \
                    "; **weights NOT restored**"
        else:
            note = x.get("error")
        out.append("| " + " | ".join([names.get(pattern, pattern), t,
                                      f"{j.get('trials_run', '–')} of {j.get('trials_total', '–')}",
                                      fmt_rate(rate_of(x), dag(x)),
                                      fmt_x(bf / rate_of(x)) if bf and rate_of(x) else "–",
                                      f"{x.get('rss_mib', 0):.0f}", note]) + " |")
    return "\n".join(out)


def scaling_table(r):
    t_rows = {}
    j = (r["torch"].get("flip_1") or {}).get("json") or {}
    for e in j.get("per_rate", []):
        t_rows[e["rate"]] = e
    draw = {e["rate"]: e for e in ((r.get("ber_draw") or {}).get("json") or {}).get("rates", [])}
    hdr = ["rate", "errors / trial (mean)", "bitflip 1t trials/s", "bitflip µs / trial",
           "PyTorch flip loop 1t trials/s (replay)", "PyTorch per-bit draw, ms / trial"]
    out = ["| " + " | ".join(hdr) + " |", "|" + "|".join(["---"] * len(hdr)) + "|"]
    for s in r.get("scaling", []):
        x = rate_of(s["run"])
        pt = t_rows.get(s["rate"])
        dr = draw.get(s["rate"])
        out.append("| " + " | ".join([
            f"{s['rate']:g}", f"{s['run'].get('mean_faults', float('nan')):.3g}",
            fmt_rate(x, dag(s["run"])), f"{1e6 / x:,.0f}" if x else "–",
            fmt_rate(pt["trials_per_s"]) if pt else "",
            f"{dr['seconds_per_draw'] * 1e3:,.0f}" if dr else ""]) + " |")
    return "\n".join(out)


# ---------------------------------------------------------------- doc


def section(meta, rows, problems):
    threads = meta["threads"]
    mi, v = meta["machine"], meta["versions"]
    quick = meta["quick"]
    L = [START,
         "## Fault campaigns: `bitflip run` vs PyTorch fault-injection loops"
         + (" (QUICK RUN: few trials, short budgets; not for citing)" if quick else ""),
         "",
         "Generated by `bench/campaign_bench.py --write-doc` (see `bench/README.md`); edit the script, "
         "not this section. The rest of this file is `bench/run.py`'s.",
         "",
         f"- Date: {meta['date']} (start of the run)",
         *benchlib.machine_lines(mi),
         f"- Versions: PyTorch {v.get('torch', '?')}, scikit-learn {v.get('sklearn', '?')}, bitflip at "
         f"commit {v.get('bitflip_commit', '?')}"
         + (f" (binary {v['bitflip_binary']})" if v.get("bitflip_binary") else ""),
         f"- Command: `{meta['command']}` (took {meta['elapsed_s']:.0f} s)",
         "- bitflip: " + (f"fastest of {meta['reps']} processes" if meta["reps"] > 1 else "one process")
         + " per thread count (a copy of the CLI taken at the start); PyTorch: one process per "
         f"number, replaying the first trials that fit in {meta['budget']:g} s",
         "",
         "trials/s: bitflip's own `--stats` figure (trials / wall time of the trial loop, without "
         "loading the model and the golden pass); PyTorch's: trials replayed / wall time of its "
         "trial loop (without loading, batch calibration and checks). Every trial evaluates the "
         "whole eval set (digits: 397 samples, dlrm_small: 4,000, dlrm_large: 8,192). Ratios are "
         "bitflip / PyTorch at the same thread count; above 1× bitflip is faster. PyTorch replays "
         "*exactly the faults bitflip drew* (its 1-thread `--trials-out` file) and its per-trial "
         "metric is compared with bitflip's (*metric agrees*: trials within 1e-5 of bitflip's, for "
         "each PyTorch run in the order of the columns; the BER case compares only the trials "
         "whose faults bitflip's record lists in full). "
         "Peak RSS is the whole process's, from `wait4`. † marks a number taken while other "
         f"processes on this shared machine used more than {evalbench.BUSY_LIMIT} cores.",
         "",
         summary_table(rows, threads),
         ""]
    if len(threads) >= 2:
        sp = next((r for r in rows if r["case"] == SPEEDUP_CASE), None)
        if sp and sp.get("speedup"):
            L += [f"Thread scaling of bitflip on `{SPEEDUP_CASE}` ({threads[1]} vs {threads[0]} threads): "
                  f"**{sp['speedup']:.2f}×** (target ≥{SPEEDUP_TARGET}×; the column "
                  f"*{threads[1]}t / {threads[0]}t* has the others).", ""]
    if problems:
        L += ["Problems in this run:", ""] + [f"- {p}" for p in problems] + [""]
    for r in rows:
        L += [f"### {r['case']}", "",
              f"{r['model']} ({r['samples']} eval samples): {r['what']}. Spec: "
              f"`{r['spec']}` (seed {SEED}).", "", case_table(r, threads), ""]
        if r.get("scaling"):
            L += ["Fault drawing scales with the number of errors, not of bits: bitflip alone at "
                  "single rates (the same 38.0M-bit population; a trial draws, injects, evaluates "
                  "and scores), next to PyTorch replaying the sweep above (per rate) and PyTorch "
                  "drawing one trial's errors the per-bit way (`torch.rand(n_bits) < rate` per "
                  "tensor, then `nonzero()`), which costs the same at every rate. The flip-loop "
                  "replay above does not include that draw (it replays bitflip's faults).", "",
                  scaling_table(r), ""]
    L += ["### What each baseline does per trial", "",
          "All PyTorch baselines run `bench/torch_campaign.py` on the hand-written modules of "
          "`bench/nets.py` with every parameter loaded from the ONNX initializer of the same name, "
          "under `torch.inference_mode()`, with `torch.set_num_threads(N)`, "
          "`OMP_NUM_THREADS`/`OPENBLAS_NUM_THREADS`/`MKL_NUM_THREADS=N` and `OMP_WAIT_POLICY=PASSIVE`. "
          "The eval set runs at PyTorch's fastest batch for that model and thread count, measured "
          "before the loop among the whole set, 1024 and 256 (and, for DLRM, both interaction "
          "variants of `nets.DLRM`); the tables name the batch chosen. Per trial, after the "
          "forward pass, each computes the task metric (accuracy as argmax hits, or ROC AUC with "
          "`sklearn.metrics.roc_auc_score`) and compares the outputs with the golden ones "
          "(changed predictions, MSE, max |deviation|, NaN/Inf, bit-identical), as bitflip does.",
          "",
          "- **bitflip** (`bitflip run --local --threads N --stats`): draws each trial's faults "
          "from the seed, injects them and evaluates the whole eval set with its differential "
          "engine (only what the faults reach is recomputed; golden activations are cached, "
          "size in the tables), classifies the trial and accumulates the metrics. "
          "**`--exact`** re-executes the whole eval set for every trial instead: the reference "
          "for what the differential engine saves. Timed runs write no per-trial records "
          "(`--trials-out`); one more, untimed run writes the records PyTorch replays (the same "
          "faults: they depend only on the seed).",
          "- **PyTorch flip loop** (`--flip`, the hand-written loop of PyTEI-style tools): one "
          "model; per trial, XOR the trial's bits into the float32 parameters viewed as int32, "
          "in place (`w.view(-1).view(torch.int32)[i] ^= mask`; a trial's several elements of one "
          "tensor in one indexed op), forward the whole eval set, metric + golden comparison, XOR "
          "again to restore. After the loop every parameter is checked bit-identical to before; "
          "before it, every fault's `old`/`new` from bitflip's record is checked against the "
          "parameter (so the replay flips the very same bits).",
          "- **PyTorchFI-style** (`--pytorchfi`): per trial, `copy.deepcopy(model)`, flip the bits "
          "in the copy's weights, forward the eval set, metric + golden comparison, drop the copy "
          "(PyTorchFI's `declare_weight_fault_injection` deep-copies the model per injection).",
          "- **PyTorch forward hook** (`--activation`, how PyTorch tools inject activation "
          "faults): per trial, register a forward hook on the module whose output is the faulted "
          "ONNX value (`nn.Linear` `net.0` / `top.0`); the hook XORs the bit into element `index` of "
          "sample `sample` of the module's output; forward the whole eval set, metric + golden "
          "comparison, remove the hook. bitflip's recorded `old` values are checked against "
          "PyTorch's golden activations (equal within 1e-5 relative; different engines round "
          "differently).",
          "- **BER** (`dlrm_large_ber`): PyTorch replays each trial's faults with the flip loop, "
          "round-robin over the rates, so a budget-limited prefix covers every rate. bitflip's "
          "per-trial record lists at most the first 8 faults of a trial, so for trials with more "
          "errors PyTorch draws the missing ones itself (uniformly over the same bits; the trial "
          "flips as many bits as bitflip's did) and their metrics are not compared.",
          "",
          "Notes: the PyTorch numbers are per process and budget-limited (one process each): "
          "expect ±10–20% between runs on this shared VM. The faults of a campaign are the same "
          "for any thread count (bitflip's trial records are compared between the thread counts). "
          "Outcome agreement (masked / tolerable / critical / due) is reported but not required: "
          "*masked* means bit-identical outputs within one engine, and a low-mantissa flip can "
          "change PyTorch's output by one ulp where bitflip's summation order absorbs it (or the "
          "reverse).",
          END]
    return "\n".join(L)


def write_doc(path, text):
    benchlib.write_section(path, START, END, text)


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description="bitflip run vs PyTorch fault-campaign throughput")
    ap.add_argument("--bitflip", default="build/bitflip")
    ap.add_argument("--quick", action="store_true", help="fewer trials, shorter PyTorch budgets, 1 process each")
    ap.add_argument("--cases", default=",".join(CASES), help="subset of: " + ", ".join(CASES))
    ap.add_argument("--threads", default="1,2", help="thread counts (the first is the reference)")
    ap.add_argument("--conformance-dir", default=None)
    ap.add_argument("--budget", type=float, default=None,
                    help=f"PyTorch trial-loop seconds per run (default {BUDGET[0]:g}, {BUDGET[1]:g} with --quick)")
    ap.add_argument("--reps", type=int, default=None,
                    help="bitflip processes per thread count, fastest kept (default 3, 1 with --quick)")
    ap.add_argument("--quiet-wait", type=float, default=15,
                    help="before each run, wait up to this many seconds for other processes to go quiet")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--write-doc", metavar="PATH")
    ap.add_argument("--out", default=os.path.join(BENCH, "out", "campaigns.json"))
    ap.add_argument("--render", metavar="JSON", help="run nothing: tables (and --write-doc) from a saved file")
    a = ap.parse_args()

    if a.render:
        saved = json.load(open(a.render))
        return report(saved["meta"], saved["rows"], a.write_doc)

    a.threads = [int(t) for t in a.threads.split(",") if t]
    a.budget = a.budget if a.budget is not None else BUDGET[1 if a.quick else 0]
    a.reps = a.reps or (1 if a.quick else 3)
    cases = [c for c in a.cases.split(",") if c]
    bad = [c for c in cases if c not in CASES]
    if bad:
        ap.error(f"unknown case(s) {bad}; known: {list(CASES)}")
    a.bitflip = a.bitflip if os.path.isabs(a.bitflip) else os.path.join(ROOT, a.bitflip)
    if not (os.path.isfile(a.bitflip) and os.access(a.bitflip, os.X_OK)):
        sys.exit(f"campaign_bench: {a.bitflip} not found (build it: cmake --build build)")
    cdir = a.conformance_dir or benchlib.default_conformance_dir()
    evalbench.ensure_generated([CASES[c]["model"] for c in cases])
    a.outdir = os.path.join(os.path.dirname(os.path.abspath(a.out)), "campaigns")
    os.makedirs(a.outdir, exist_ok=True)

    minfo = evalbench.machine_info()
    vers = {k: v for k, v in evalbench.versions(a.bitflip).items()
            if k in ("torch", "bitflip_commit")}
    try:
        vers["sklearn"] = subprocess.run([PY, "-c", "import sklearn;print(sklearn.__version__)"],
                                         capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    # run a private copy: the CLI may be rebuilt while this runs (make, another session), and
    # every number here must come from one binary
    orig, a.bitflip = a.bitflip, os.path.join(a.outdir, "bitflip")
    for attempt in range(6):   # not while the linker is writing it
        bid = evalbench.file_id(orig)
        shutil.copy2(orig, a.bitflip)
        if evalbench.file_id(a.bitflip) == bid == evalbench.file_id(orig) and subprocess.run(
                [a.bitflip, "help"], capture_output=True).returncode == 0:
            break
        log(f"{orig} is being rebuilt, waiting ...")
        time.sleep(20)
    else:
        sys.exit(f"campaign_bench: could not take a stable copy of {orig}")
    vers["bitflip_binary"] = bid
    date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    t0 = time.time()
    rows = []
    for c in cases:
        rows.append(run_case(a, c, CASES[c], cdir))
    minfo["loadavg_end"] = os.getloadavg()
    changed = evalbench.file_id(orig) != bid
    meta = {"date": date, "command": "/usr/bin/python3 " + shlex.join(
                [os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)] + sys.argv[1:]),
            "machine": minfo, "versions": vers, "quick": a.quick, "threads": a.threads,
            "budget": a.budget, "reps": a.reps, "elapsed_s": time.time() - t0,
            "bitflip_changed": changed}
    log(f"raw results: {benchlib.save_results(a.out, meta, rows)}")
    return report(meta, rows, a.write_doc)


def report(meta, rows, doc):
    problems = summarize(rows, meta["threads"])
    if meta.get("bitflip_changed"):
        problems.insert(0, "the bitflip binary was rebuilt during the run; every number here is from a "
                           "copy taken at the start (the binary named above)")
    print(summary_table(rows, meta["threads"]))
    for r in rows:
        print(f"\n{r['case']}:\n" + case_table(r, meta["threads"]))
        if r.get("scaling"):
            print("\n" + scaling_table(r))
    if problems:
        print()
        for p in problems:
            print(f"- {p}")
    if doc:
        path = doc if os.path.isabs(doc) else os.path.join(ROOT, doc)
        write_doc(path, section(meta, rows, problems))
        log(f"wrote the campaign section of {os.path.relpath(path, ROOT)}")
    fail = any(("FAILED" in p or "MISMATCH" in p or "NOT restored" in p or "does not match" in p
                or "differ between" in p) for p in problems)
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
