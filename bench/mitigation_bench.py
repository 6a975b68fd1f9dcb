#!/usr/bin/python3
"""What each protection recovers, and what it costs: the results tables of docs/MITIGATIONS.md.

  /usr/bin/python3 bench/mitigation_bench.py [--bitflip build/bitflip] [--threads 2]
        [--repeats 200] [--per-bit 100] [--cov-trials 500] [--quick] [--cases a,b]
        [--write-doc docs/MITIGATIONS.md] [--out bench/out/mitigations.json]
  /usr/bin/python3 bench/mitigation_bench.py --render bench/out/mitigations.json [--write-doc ...]

Each case is one campaign spec with "mitigations": [...] (written to bench/out/mitigations/),
run once with
    bitflip run --local SPEC --threads N --stats --format json --out RESULT.json
which runs the campaign once per protection configuration on the same faults (a paired
comparison) and reports, per configuration, outcome rates, the metric under faults, the
recovery with its paired-bootstrap interval, and the cost (docs/MITIGATIONS.md). The
configurations, the same in every case:

    none          the unprotected model (the baseline)
    clip          activation clipping, bounds profiled on the golden pass (min/max), clamp,
                  at the engine's default places (every Gemm, MatMul and Conv output that is
                  not a graph output)
    clip-pytei    PyTEI's clipping: fixed [-100, 100] with NaN -> 0, on every Linear (Gemm)
                  and Conv output but the last Linear's
    sbp           selective bit protection of the sign and exponent bits (fp32: 31..23)
    abft-detect   Huang-Abraham checksums; a mismatch makes the trial DUE
    abft-correct  the same, correcting a single wrong channel per row

Cases:
    drs_dlrm_small   the DRS experiment (Terrorch/PyTEI): BER over every fp32 weight
                     (embeddings and MLPs) of dlrm_small, rates 1e-7 .. 1e-3, AUC
    drs_dlrm_op13    the same on the project's fixture tests/fixtures/conformance/dlrm_ops_op13
    cnn_digits       the same sweep on digits_cnn (else the fixture cnn_ops_op17), accuracy
    bits_digits_cnn  single-bit weight flips, "sampling": "per_bit" (equal trials per bit)
    bits_dlrm_small  the same on dlrm_small (else dlrm_ops_op13)
    cov_digits_cnn   coverage per fault model: one campaign per fault model (bitflip, stuck_at_0,
                     stuck_at_1, random_value, ber at one rate) on every weight of digits_cnn
                     (else cnn_ops_op17), --cov-trials trials each; per-trial records
                     (--trials-out) pair each trial's outcome with the unprotected one's
    cov_dlrm_small   the same on dlrm_small (else dlrm_ops_op13), with the effective faults in
                     the embedding tables (read by Gather) and in the other weights apart
dlrm_small and digits_cnn come from ../shared/conformance if present (--conformance-dir).

Raw results (the specs, every configuration's result without per-trial data, run times):
bench/out/mitigations.json. --write-doc rewrites only the part of that file between
<!-- mitigation-bench:start --> and <!-- mitigation-bench:end --> (appended if the markers are
absent). Exit status 1 if a campaign failed (a case whose model is missing is skipped).
Standard library only (and benchlib's machine helpers, which need no numpy).
"""
import argparse
import datetime
import json
import math
import os
import shlex
import shutil
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402  (the machine helpers; no numpy needed)

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "conformance")
START, END = "<!-- mitigation-bench:start -->", "<!-- mitigation-bench:end -->"
SEED = 7
RATES = [1e-7, 1e-6, 1e-5, 1e-4, 1e-3]
REPEATS = (200, 10)        # BER repeats per rate: full / --quick
PER_BIT = (100, 20)        # per_bit trials per bit position (x 32): full / --quick
COV_TRIALS = (500, 50)     # trials per fault model in the coverage campaigns: full / --quick
# The coverage campaigns: one per fault model, on every weight. `ber` uses one rate, the
# power of ten nearest 1 / (bits of the parameters): about one bit error per trial, where the
# sweeps show faults starting to cost the metric while ABFT's DUE does not yet dominate
# (digits_cnn: 1e-5, dlrm_small: 1e-6).
FAULT_MODELS = ["bitflip", "stuck_at_0", "stuck_at_1", "random_value", "ber"]
SINGLE = FAULT_MODELS[:4]  # one corrupted weight per trial
# A per-rate recovery whose loss (golden - faulty mean) is below this is marked: the ratio
# of two differences that small is noise (and can be anything).
SMALL_LOSS = 1e-3
STATS_RE_PREFIX = "bitflip run: "

# The paper this reproduces (docs/MITIGATIONS.md): activation clipping recovers "up to 30%" of
# the AUC lost to memory errors in DLRM weights.
PAPER = ("Terrorch/PyTEI's paper, *Evaluating and Enhancing Robustness of Deep Recommendation "
         "Systems Against Hardware Errors*")

CASES = {
    "drs_dlrm_small": dict(kind="ber", models=[("dlrm_small", "conformance")],
                           title="The DRS experiment: BER on the weights of `dlrm_small`, AUC"),
    "drs_dlrm_op13": dict(kind="ber", models=[("dlrm_ops_op13", "fixtures")],
                          title="The DRS experiment on the project's fixture `dlrm_ops_op13`, AUC"),
    "cnn_digits": dict(kind="ber", models=[("digits_cnn", "conformance"), ("cnn_ops_op17", "fixtures")],
                       title="The same sweep on the digits CNN, accuracy"),
    "bits_digits_cnn": dict(kind="per_bit", models=[("digits_cnn", "conformance"), ("cnn_ops_op17", "fixtures")],
                            title="Single-bit weight faults by bit position: digits CNN"),
    "bits_dlrm_small": dict(kind="per_bit", models=[("dlrm_small", "conformance"), ("dlrm_ops_op13", "fixtures")],
                            title="Single-bit weight faults by bit position: DLRM"),
    "cov_digits_cnn": dict(kind="fault_models", models=[("digits_cnn", "conformance"), ("cnn_ops_op17", "fixtures")],
                           title="Coverage per fault model: digits CNN"),
    "cov_dlrm_small": dict(kind="fault_models", models=[("dlrm_small", "conformance"), ("dlrm_ops_op13", "fixtures")],
                           title="Coverage per fault model: DLRM"),
}
CONFIG_NOTES = {
    "none": "no protection (the baseline)",
    "clip": "activation clipping, bounds profiled on the golden pass (min/max), clamp; at the "
            "engine's default places: every Gemm, MatMul and Conv output that is not a graph output",
    "clip-pytei": "PyTEI's clipping: fixed [−100, 100], NaN → 0, on every Linear (Gemm) and Conv "
                  "output but the last Linear's",
    "sbp": "selective bit protection (ECC) of the sign and exponent bits, 31–23, of every weight",
    "abft-detect": "ABFT checksums on every Gemm, MatMul by a weight and Conv; a mismatch makes the trial DUE",
    "abft-correct": "the same checksums; a single wrong channel per row is corrected, else the op "
                    "is recomputed, else DUE",
}


def log(msg):
    print(f"[mitigations] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- helpers

BUSY_LIMIT = benchlib.BUSY_LIMIT   # cores used by other processes that make a run count as disturbed
cpu_busy_seconds = benchlib.cpu_busy_seconds
machine_info = benchlib.machine_info
file_id = benchlib.file_id


def wait_quiet(max_wait):
    return benchlib.wait_quiet(max_wait, tag="mitigations")


def default_conformance_dir():
    """../shared/conformance relative to the repo root, else tests/fixtures/conformance."""
    for d in (os.path.join(os.path.dirname(ROOT), "shared", "conformance"), FIXTURES):
        if os.path.isfile(os.path.join(d, "digits_mlp.onnx")):
            return d
    return os.path.join(os.path.dirname(ROOT), "shared", "conformance")


def find_model(name, dirs):
    """Directory of `dirs` holding NAME.onnx and NAME.eval.safetensors; FileNotFoundError."""
    for d in dirs:
        if d and os.path.isfile(os.path.join(d, name + ".onnx")) and \
                os.path.isfile(os.path.join(d, name + ".eval.safetensors")):
            return d
    raise FileNotFoundError(f"model {name!r}: no {name}.onnx + {name}.eval.safetensors in {dirs}")


def labels_are_integers(path):
    """Whether the eval set's `labels` tensor holds integers (classification) or floats (binary),
    from the safetensors header."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return header["labels"]["dtype"] in ("I64", "I32", "I16", "I8", "U8")


def measure_process(cmd, timeout, quiet_wait=0):
    return benchlib.measure_process(cmd, None, timeout, quiet_wait, tag="mitigations")


def resolve_model(a, c):
    """(name, directory, source) of the first of the case's candidate models found."""
    tried = []
    for name, where in c["models"]:
        d = a.cdir if where == "conformance" else FIXTURES
        tried.append(os.path.join(d, name + ".onnx"))
        try:
            return name, find_model(name, [d]), where
        except FileNotFoundError:
            continue
    raise FileNotFoundError("none of " + ", ".join(os.path.relpath(t, ROOT) for t in tried))


def model_info(a, onnx):
    p = subprocess.run([a.bitflip, "info", "--json", onnx], capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"bitflip info {onnx}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def pytei_places(info):
    """PyTEI clips every Linear output but the last: the outputs of every Gemm and Conv node
    except the last Gemm in graph order (PyTorch's exporter names a node's output
    NODE_output_0; bitflip refuses an `at` name that matches no output)."""
    layers = [l for l in info["layers"] if l["op"] in ("Gemm", "Conv")]
    gemms = [i for i, l in enumerate(layers) if l["op"] == "Gemm"]
    if gemms:
        del layers[gemms[-1]]
    return [l["name"] + "_output_0" for l in layers]


def configurations(info):
    return [
        "none",
        {"name": "clip", "clip": {"bounds": "profile"}},
        {"name": "clip-pytei", "clip": {"bounds": [-100, 100], "nan_to_zero": True, "at": pytei_places(info)}},
        "sbp",
        {"name": "abft-detect", "abft": {"mode": "detect"}},
        {"name": "abft-correct", "abft": {"mode": "correct"}},
    ]


def ber_rate_for(param_bits):
    """The power of ten nearest 1 / param_bits: about one bit error per trial."""
    return float(f"1e{round(-math.log10(param_bits))}")


def make_spec(a, c, name, d, info, fault_model=None):
    rel = lambda p: os.path.relpath(p, ROOT)  # noqa: E731  (paths from the repo root)
    task_metric = "accuracy" if labels_are_integers(os.path.join(d, name + ".eval.safetensors")) else "auc"
    spec = {"model": rel(os.path.join(d, name + ".onnx")),
            "dataset": rel(os.path.join(d, name + ".eval.safetensors")),
            "seed": SEED}
    if c["kind"] == "fault_models":
        if fault_model == "ber":
            spec["faults"] = {"target": "weights", "tensors": ["*"], "model": "ber",
                              "rate": ber_rate_for(info["param_bits"]), "repeats": a.cov_trials,
                              "representation": "fp32"}
        else:
            spec["trials"] = a.cov_trials
            spec["faults"] = {"target": "weights", "tensors": ["*"], "model": fault_model}
            if fault_model != "random_value":
                spec["faults"]["bits"] = 1
            spec["faults"]["representation"] = "fp32"
        spec["sampling"] = "uniform"
    elif c["kind"] == "ber":
        spec["faults"] = {"target": "weights", "tensors": ["*"], "model": "ber", "rates": RATES,
                          "repeats": a.repeats, "representation": "fp32"}
    else:
        spec["trials"] = 32 * a.per_bit
        spec["faults"] = {"target": "weights", "tensors": ["*"], "model": "bitflip", "bits": 1,
                          "representation": "fp32"}
        spec["sampling"] = "per_bit"
    spec["metrics"] = [task_metric]
    spec["mitigations"] = configurations(info)
    return spec


def spec_text(spec):
    """The spec as JSON: a field per line, a mitigation per line (short enough to read)."""
    lines = []
    for k, v in spec.items():
        if k == "mitigations":
            lines.append('  "mitigations": [\n' + ",\n".join("    " + json.dumps(m) for m in v) + "\n  ]")
        else:
            lines.append(f"  {json.dumps(k)}: {json.dumps(v)}")
    return "{\n" + ",\n".join(lines) + "\n}"


# ---------------------------------------------------------------- runs


def slim_result(res):
    """The result without what the tables do not use (by_tensor)."""
    res = dict(res)
    res.pop("by_tensor", None)
    return res


def parse_stats(err):
    """bitflip's --stats lines: {configuration: {trials, seconds, trials_per_s}}."""
    out = {}
    for line in err.splitlines():
        if not line.startswith(STATS_RE_PREFIX):
            continue
        rest = line[len(STATS_RE_PREFIX):]
        try:
            cfg, tail = rest.split(": ", 1)
            w = tail.split()
            out[cfg] = {"trials": int(w[0]), "seconds": float(w[3]), "trials_per_s": float(w[5].strip("("))}
        except (ValueError, IndexError):
            continue
    return out


def run_campaign(a, tag, spec, trials_out=False):
    """Write SPEC to bench/out/mitigations/TAG.spec.json and run it: a dict with spec, spec_path,
    command (as shown in the doc), ok, wall, others_cores, rss_mib, stats, and result (or error);
    with trials_out, the per-trial records go to TAG.trials.jsonl (path in `trials_path`)."""
    spec_path = os.path.join(a.outdir, f"{tag}.spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f, indent=1)
        f.write("\n")
    res_path = os.path.join(a.outdir, f"{tag}.result.json")
    cmd = [a.bitflip_copy, "run", "--local", "--threads", str(a.threads), "--stats", "--format", "json",
           "--out", res_path]
    shown = [os.path.relpath(a.bitflip, ROOT), "run", "--local", os.path.relpath(spec_path, ROOT),
             "--threads", str(a.threads), "--format", "json"]
    c = {"spec": spec, "spec_path": os.path.relpath(spec_path, ROOT)}
    if trials_out:
        tpath = os.path.join(a.outdir, f"{tag}.trials.jsonl")
        cmd += ["--trials-out", tpath]
        shown += ["--trials-out", os.path.relpath(tpath, ROOT)]
        c["trials_path"] = tpath
    cmd.append(spec_path)
    c["command"] = shlex.join(shown)
    r = measure_process(cmd, a.timeout, a.quiet_wait)
    c.update(ok=r["ok"], wall=r.get("wall"), others_cores=r.get("others_cores"), rss_mib=r.get("rss_mib"),
             stats=parse_stats(r.get("err", "")))
    if not r["ok"]:
        c["error"] = r.get("error")
        return c
    with open(res_path) as f:
        c["result"] = slim_result(json.load(f))
    return c


def run_case(a, case, c):
    row = {"case": case, "kind": c["kind"], "title": c["title"]}
    try:
        name, d, where = resolve_model(a, c)
    except FileNotFoundError as e:
        row.update(ok=False, skipped=True, error=f"skipped, model not found: {e}")
        log(f"{case}: SKIPPED: {row['error']}")
        return row
    onnx = os.path.join(d, name + ".onnx")
    try:
        info = model_info(a, onnx)
    except (RuntimeError, ValueError) as e:
        row.update(ok=False, error=str(e))
        log(f"{case}: FAILED: {row['error']}")
        return row
    row.update(model=name, model_dir=os.path.relpath(d, ROOT), source=where,
               param_bits=info.get("param_bits"), param_elements=info.get("param_elements"))
    if c["kind"] == "fault_models":
        return run_fault_models(a, case, c, row, name, d, info)
    spec = make_spec(a, c, name, d, info)
    log(f"{case}: {name} ({row['model_dir']}), {len(spec['mitigations'])} configurations")
    r = run_campaign(a, case, spec)
    row.update(r)
    if not r["ok"]:
        log(f"{case}: FAILED: {row['error']}")
        return row
    log(f"{case}: {row['wall']:.1f} s")
    return row


def run_fault_models(a, case, c, row, name, d, info):
    """One campaign per fault model; row["campaigns"] in FAULT_MODELS order, each with its
    result and its trials paired with the unprotected ones (pair_trials)."""
    row["campaigns"] = []
    for fm in FAULT_MODELS:
        spec = make_spec(a, c, name, d, info, fault_model=fm)
        log(f"{case}: {name} ({row['model_dir']}), {fm}, {len(spec['mitigations'])} configurations")
        r = run_campaign(a, f"{case}_{fm}", spec, trials_out=True)
        r["fault_model"] = fm
        if r["ok"]:
            try:
                r["paired"] = pair_trials(r.pop("trials_path"), r["result"])
            except (OSError, ValueError, KeyError) as e:
                r.update(ok=False, error=f"per-trial records: {e}")
            log(f"{case} {fm}: {r['wall']:.1f} s")
        if not r["ok"]:
            log(f"{case} {fm}: FAILED: {r['error']}")
        row["campaigns"].append(r)
    done = [r for r in row["campaigns"] if r["ok"]]
    row["wall"] = sum(r.get("wall") or 0 for r in row["campaigns"])
    row["others_cores"] = max([r.get("others_cores") or 0 for r in row["campaigns"]] or [0])
    row["ok"] = bool(done)
    bad = [f"{r['fault_model']}: {r['error']}" for r in row["campaigns"] if not r["ok"]]
    if bad:
        row["error"] = "; ".join(bad)
    return row


def pair_trials(path, result):
    """Each configuration's trials against the unprotected model's, from the --trials-out
    records: {configuration: {"GROUP|MULTI|NONE_OUTCOME|OUTCOME": count}}, where GROUP is
    "gather" if every fault of the trial is in a tensor read by Gather (an embedding table),
    "other" if none is, "mixed" else; MULTI is 1 if the trial corrupted two or more weights.
    Also, per configuration, the smallest |corrupted value| among trials all in Gather tensors
    that the configuration makes DUE and the unprotected model does not ("gather_due_min_abs").
    The engine's own coverage is recomputed from these pairs as a check (ValueError if it
    differs)."""
    op = {s["name"]: s.get("op") for s in result["campaign"].get("sites") or []}
    trials = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                t = json.loads(line)
                trials.setdefault(t.get("mitigation", "none"), {})[t["trial"]] = t
    base = trials["none"]
    pairs, gmin = {}, {}
    for cfg, ts in trials.items():
        cnt = {}
        for i, t in ts.items():
            b = base[i]
            gather = [op.get(f["tensor"]) == "Gather" for f in b["faults"]]
            group = "gather" if gather and all(gather) else ("mixed" if any(gather) else "other")
            key = f"{group}|{1 if b['n_faults'] > 1 else 0}|{b['outcome']}|{t['outcome']}"
            cnt[key] = cnt.get(key, 0) + 1
            if group == "gather" and t["outcome"] == "due" and b["outcome"] != "due":
                v = min(abs(f["new"]) for f in b["faults"] if f.get("new") is not None)
                gmin[cfg] = min(v, gmin.get(cfg, v))
        pairs[cfg] = cnt
    # the check: the engine's coverage from the same pairs
    for m in result["mitigations"]:
        cov, p = m.get("coverage"), pairs.get(m["name"], {})
        if not cov:
            continue
        eff = det = harm = 0
        for k, n in p.items():
            _, _, o0, o = k.split("|")
            if o0 == "masked":
                continue
            eff += n
            det += n if o == "due" else 0
            harm += n if o in ("masked", "tolerable") else 0
        if (eff, det, harm) != (cov["effective"], cov["detected"]["count"], cov["harmless"]["count"]):
            raise ValueError(f"{m['name']}: coverage from the trial records (effective {eff}, detected {det}, "
                             f"harmless {harm}) differs from the result's ({cov['effective']}, "
                             f"{cov['detected']['count']}, {cov['harmless']['count']})")
    return {"pairs": pairs, "gather_due_min_abs": gmin}


# ---------------------------------------------------------------- formatting


def z(x):
    return x + 0.0 if isinstance(x, float) else x   # -0.0 -> 0.0


def fmt_rate_name(r):
    m, e = f"{r:.0e}".split("e")
    return f"{m}e{int(e)}"


def fmt_num(x, nd=4):
    return "–" if x is None else f"{z(x):.{nd}f}"


def fmt_pct(x):
    if x is None:
        return "–"
    p = 100 * x
    return f"{p:.0f}" if abs(p - round(p)) < 1e-9 else (f"{p:.1f}" if p >= 0.95 else f"{p:.2f}")


def fmt_rec(rec, with_ci=True):
    if not rec or rec.get("value") is None:
        return "–"
    s = f"{z(rec['value']):.2f}"
    ci = rec.get("ci")
    if with_ci and ci and ci[0] is not None:
        s += f" [{z(ci[0]):.2f}, {z(ci[1]):.2f}]"
    return s


def small_loss(rec):
    return rec and rec.get("golden") is not None and rec.get("faulty") is not None and \
        abs(rec["golden"] - rec["faulty"]) < SMALL_LOSS


def disturbed(row):
    o = row.get("others_cores") or 0
    return o > BUSY_LIMIT


def metric_of(row):
    return "auc" if "auc" in row["result"]["golden"] else "accuracy"


def mlabel(metric):
    return "AUC" if metric == "auc" else "accuracy"


def mits(row):
    return row["result"]["mitigations"]


def by_name(row):
    return {m["name"]: m for m in mits(row)}


def table(hdr, rows):
    out = ["| " + " | ".join(hdr) + " |", "|" + "|".join(["---"] * len(hdr)) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def per_rate_table(row):
    met = metric_of(row)
    ms = mits(row)
    hdr = ["BER", "bit errors / trial"] + [f"`{m['name']}`" for m in ms]
    golden = ["golden", "0"] + [fmt_num(m["golden"].get(met)) for m in ms]
    rows = [golden]
    for j, rate in enumerate(row["result"]["campaign"]["rates"]):
        e = row["param_bits"] * rate
        cells = [fmt_rate_name(rate), f"{e:,.0f}" if e >= 100 else f"{e:.3g}"]
        for k, m in enumerate(ms):
            br = m["by_rate"][j]
            s = fmt_num(br["metrics"][met]["mean"])
            rec = br.get("recovery")
            if k > 0:
                if rec and rec.get("value") is not None:
                    s += " · " + (fmt_rec(rec, with_ci=False) + " ‡" if small_loss(rec) else fmt_rec(rec))
                else:
                    s += " · –"
            due = br["outcomes"]["due"] / max(1, br["trials"])
            if due > 0:
                s += f" · DUE {fmt_pct(due)}%"
            cells.append(s)
        rows.append(cells)
    return table(hdr, rows)


def fmt_cov(m):
    """The configuration's coverage of the effective faults (those the unprotected model does
    not mask): detected (DUE) % / left harmless %, of how many."""
    c = m.get("coverage")
    if not c or not c.get("effective"):
        return "–"
    return f"{fmt_pct(c['detected']['rate'])}% / {fmt_pct(c['harmless']['rate'])}% of {c['effective']:,}"


def overall_table(row, with_metric=True):
    met = metric_of(row)
    hdr = ["configuration", f"golden {mlabel(met)}"] + \
          ([f"{mlabel(met)} under faults"] if with_metric else []) + \
          ["recovery [95% CI]", "critical", "DUE", "effective faults: detected / harmless", "time ratio",
           "storage overhead"]
    rows = []
    for k, m in enumerate(mits(row)):
        s = m["summary"]
        cost = m["cost"]
        rows.append([f"`{m['name']}`", fmt_num(m["golden"].get(met))]
                    + ([fmt_num(s["metrics"][met]["mean"])] if with_metric else [])
                    + ["(baseline)" if k == 0 else fmt_rec(m["recovery"]),
                       fmt_pct(s["rates"]["critical"]["rate"]) + "%", fmt_pct(s["rates"]["due"]["rate"]) + "%",
                       fmt_cov(m),
                       f"{cost['time_ratio']:.2f}×" + ("†" if disturbed(row) else ""),
                       fmt_pct(cost["storage_overhead"]) + "%"])
    return table(hdr, rows)


BIT_GROUPS = [("mantissa 0–21", list(range(0, 22)))] + \
             [(f"{b}" + {22: " (mantissa MSB)", 23: " (exponent LSB)", 30: " (exponent MSB)", 31: " (sign)"}.get(b, ""),
               [b]) for b in range(22, 32)]


def bit_cell(m, bits):
    n = crit = due = 0
    for e in m["by_bit"]:
        if e["bit"] in bits:
            n += e["trials"]
            crit += e["outcomes"]["critical"]
            due += e["outcomes"]["due"]
    if not n:
        return "–"
    return f"{fmt_pct(crit / n)} / {fmt_pct(due / n)}"


def bits_table(row):
    ms = mits(row)
    hdr = ["bit (trials)"] + [f"`{m['name']}`" for m in ms]
    rows = []
    for label, bits in BIT_GROUPS:
        n = sum(e["trials"] for e in ms[0]["by_bit"] if e["bit"] in bits)
        rows.append([f"{label} ({n:,})"] + [bit_cell(m, bits) for m in ms])
    rows.append([f"all 32 bits ({row['result']['summary']['trials']:,})"]
                + [bit_cell(m, list(range(32))) for m in ms])
    met = metric_of(row)
    rows.append([f"{mlabel(met)} under faults (golden {fmt_num(ms[0]['golden'].get(met))})"]
                + [fmt_num(m["summary"]["metrics"][met]["mean"]) for m in ms])
    rows.append(["recovery [95% CI]"] + ["(baseline)"] + [fmt_rec(m["recovery"]) for m in ms[1:]])
    rows.append(["effective faults: detected / harmless"] + [fmt_cov(m) for m in ms])
    rows.append(["time ratio / storage"]
                + [f"{m['cost']['time_ratio']:.2f}× / {fmt_pct(m['cost']['storage_overhead'])}%" for m in ms])
    return table(hdr, rows)


# ---------------------------------------------------------------- what the numbers say


def rv(m):
    return (m.get("recovery") or {}).get("value")


def rci(m):
    ci = (m.get("recovery") or {}).get("ci") or [None, None]
    return ci


def r2(x):
    return "–" if x is None else f"{z(x):.2f}"


def pct(x):
    return fmt_pct(x) + "%"


def ranges(bits):
    """[17, 18, 19, 23] -> '17–19, 23'."""
    out, bits = [], sorted(bits)
    i = 0
    while i < len(bits):
        j = i
        while j + 1 < len(bits) and bits[j + 1] == bits[j] + 1:
            j += 1
        out.append(f"{bits[i]}" if i == j else f"{bits[i]}–{bits[j]}")
        i = j + 1
    return ", ".join(out)


def plural(n, word):
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def embedding_share(row):
    sites = row["result"]["campaign"].get("sites") or []
    tot = sum(s["elements"] for s in sites)
    emb = sum(s["elements"] for s in sites if s.get("op") == "Gather")
    return emb / tot if tot else 0.0


def due_rate(m):
    return m["summary"]["rates"]["due"]["rate"]


def crit_rate(m):
    return m["summary"]["rates"]["critical"]["rate"]


def ci_text(m):
    lo, hi = rci(m)
    return f"{r2(rv(m))} [{r2(lo)}, {r2(hi)}]"


def ber_findings(row):
    """Sentences computed from the numbers of a BER case: they hold for any run."""
    B = by_name(row)
    met = mlabel(metric_of(row))
    none, sbp, clip, pytei = B["none"], B["sbp"], B["clip"], B["clip-pytei"]
    ad, ac = B["abft-detect"], B["abft-correct"]
    out = []
    silent = [m for m in (clip, pytei, sbp) if rv(m) is not None]
    if silent:
        best = max(silent, key=rv)
        out.append(f"Of the protections that discard no trial, `{best['name']}` recovers most of the lost "
                   f"{met}, {ci_text(best)} over the sweep, for {pct(best['cost']['storage_overhead'])} extra "
                   f"storage and {best['cost']['time_ratio']:.2f}× the pass time.")
    if rv(ad) is not None and rv(ac) is not None:
        s = (f"ABFT recovers {r2(rv(ad))} (detect) and {r2(rv(ac))} (correct), but by declaring "
             f"{pct(due_rate(ad))} and {pct(due_rate(ac))} of the trials DUE, each counted as recovered "
             f"(re-executed), where the unprotected model has {pct(due_rate(none))} DUE (NaN/Inf outputs); "
             f"the checksums cost {ad['cost']['time_ratio']:.2f}× the pass time and "
             f"{pct(ad['cost']['storage_overhead'])} storage")
        emb = embedding_share(row)
        if emb > 0 and max(crit_rate(ad), crit_rate(ac)) > 0:
            s += (f", and {pct(crit_rate(ad))} / {pct(crit_rate(ac))} of the trials stay critical: the "
                  f"embedding tables ({pct(emb)} of the weights) are read by Gather, which has no checksum")
        out.append(s + ".")
    if rv(clip) is not None and rv(pytei) is not None:
        lo, hi = rci(pytei)
        cmp = ("its interval contains" if lo is not None and lo <= 0.30 <= hi else
               "above" if lo is not None and lo > 0.30 else "below")
        out.append(f"Clipping recovers {ci_text(clip)} with profiled bounds and {ci_text(pytei)} with "
                   f"PyTEI's ±100 (the paper: up to 30%; " + (f"{cmp} 0.30" if cmp.startswith("its") else
                                                               f"{cmp} that") + ").")
    traded = [m for m in (clip, pytei, sbp) if due_rate(m) < due_rate(none) and crit_rate(m) > crit_rate(none)]
    if traded:
        n = row["result"]["golden"]["samples"]
        s = ("Removing NaN/Inf outputs makes those trials silent, DUE → critical: "
             + "; ".join(f"`{m['name']}` DUE {pct(due_rate(none))} → {pct(due_rate(m))}, critical "
                         f"{pct(crit_rate(none))} → {pct(crit_rate(m))}" for m in traded)
             + f". A trial is critical as soon as one of the {n:,} predictions changes")
        if sbp in traded:
            s += (f": under `sbp` these are the mantissa flips it lets through moving a few predictions "
                  f"(its {met} stays {sbp['summary']['metrics'][metric_of(row)]['mean']:.4f})")
        if clip in traded or pytei in traded:
            s += ("; " if sbp in traded else ": ") + ("under clipping, a clamped Inf or a NaN set to 0 gives "
                                                      "finite but wrong outputs")
        out.append(s + ".")
    rates = row["result"]["campaign"]["rates"]
    for m in mits(row)[1:]:
        if rv(m) is not None and rci(m)[1] is not None and rci(m)[1] < 0:
            out.append(f"`{m['name']}` makes the {met} *worse* than no protection over the sweep "
                       f"({ci_text(m)}).")
            continue
        bad = [(rates[j], br["recovery"]) for j, br in enumerate(m["by_rate"])
               if br.get("recovery") and br["recovery"].get("value") is not None and br["recovery"]["value"] < 0
               and (br["recovery"].get("ci") or [None, None])[1] is not None and br["recovery"]["ci"][1] <= 0
               and not small_loss(br["recovery"])]
        if bad:
            out.append(f"`{m['name']}` does slightly *worse* than no protection at BER "
                       + ", ".join(f"{fmt_rate_name(r)} ({fmt_rec(rec)})" for r, rec in bad) + ".")
    for m in mits(row)[1:]:
        rec = m.get("recovery") or {}
        if rec.get("mitigated") is not None and rec.get("golden") is not None and \
                rec["mitigated"] > rec["golden"] + 1e-9 and rci(m)[0] is not None and rci(m)[0] > 1:
            out.append(f"`{m['name']}`'s recovery is above 1: with it the mean {met} under faults "
                       f"({rec['mitigated']:.4f}) ends above the golden one ({rec['golden']:.4f}); the faults "
                       f"it lets through happen to help.")
    return out


def bits_findings(row):
    B = by_name(row)
    ms = mits(row)
    none = B["none"]
    out = []

    def count(m, bits, what):
        return sum(e["outcomes"][what] for e in m["by_bit"] if e["bit"] in bits)

    def bad(m, b):
        return count(m, [b], "critical") + count(m, [b], "due")

    allb = range(32)
    hurt = [b for b in allb if bad(none, b) > 0]
    if hurt:
        out.append(f"Unprotected, the critical and DUE trials are on bits {ranges(hurt)}; no flip of a lower "
                   f"bit changed a prediction in these trials.")
    for m in ms[1:]:
        c, d = count(m, allb, "critical"), count(m, allb, "due")
        c0, d0 = count(none, allb, "critical"), count(none, allb, "due")
        neutral = [b for b in hurt if bad(m, b) == 0]
        if all(count(m, [b], "critical") == count(none, [b], "critical") and
               count(m, [b], "due") == count(none, [b], "due") for b in allb):
            out.append(f"`{m['name']}` neutralises no bit: its critical and DUE counts are the unprotected "
                       f"model's, bit for bit (its recovery, {r2(rv(m))}, comes from fewer wrong predictions "
                       f"within trials that stay critical).")
            continue
        s = f"`{m['name']}` "
        if c == 0 and c0 > 0 and d > d0:
            s += (f"leaves no critical trial: it detects every harmful flip"
                  + (" and many harmless ones" if d > c0 + d0 else "")
                  + f", {plural(d, 'DUE trial')} in all, each a re-execution, against {c0:,} critical and "
                  f"{d0:,} DUE unprotected")
            out.append(s + ".")
            continue
        s += (f"neutralises bit{'s' if len(neutral) > 1 else ''} {ranges(neutral)}" if neutral
              else "neutralises no bit")
        s += f": {plural(c, 'critical trial')} and {plural(d, 'DUE trial')} in all (unprotected: {c0:,} and {d0:,})"
        if d > d0 and m["name"].startswith("abft"):
            s += "; its DUE include its detections, each a re-execution"
        if c > c0 and d < d0:
            s += "; it turns NaN/Inf outputs (DUE) into finite wrong ones (critical)"
        out.append(s + ".")
    for m in ms[1:]:
        if rv(m) is not None and rci(m)[1] is not None and rci(m)[1] < 0:
            out.append(f"`{m['name']}` makes the {mlabel(metric_of(row))} *worse* than no protection "
                       f"(recovery {ci_text(m)}).")
    emb = embedding_share(row)
    ad = B.get("abft-detect")
    ac = B.get("abft-correct")
    if emb > 0 and ad and ac and count(ad, allb, "critical") + count(ac, allb, "critical") > 0:
        out.append(f"ABFT leaves critical trials ({count(ad, allb, 'critical'):,} with detect, "
                   f"{count(ac, allb, 'critical'):,} with correct) because {pct(emb)} of the weights are "
                   f"embedding tables, read by Gather, which has no checksum.")
    return out


# ---------------------------------------------------------------- coverage per fault model


def cov_campaigns(row):
    """The coverage case's campaigns that ran, in FAULT_MODELS order."""
    return [c for c in row.get("campaigns") or [] if c.get("ok")]


def fm_label(c):
    fm = c["fault_model"]
    if fm == "ber":
        return f"`ber` {fmt_rate_name(c['spec']['faults']['rate'])}"
    return f"`{fm}`" + (", 1 bit" if c["spec"]["faults"].get("bits") == 1 else "")


def cov_count(pairs, cfg, groups=None):
    """(effective, detected, harmless, trials) for one configuration from its pairs with the
    unprotected trials, over the trials of the given fault groups (all by default)."""
    eff = det = harm = n = 0
    for k, v in pairs["pairs"].get(cfg, {}).items():
        g, _, o0, o = k.split("|")
        if groups and g not in groups:
            continue
        n += v
        if o0 == "masked":
            continue
        eff += v
        det += v if o == "due" else 0
        harm += v if o in ("masked", "tolerable") else 0
    return eff, det, harm, n


def pair_count(c, cfg, groups=None, multi=None, before=None, after=None):
    """Trials of campaign c whose unprotected outcome is in `before` and outcome under cfg in
    `after` (None: any), in the given fault groups and multi-fault flag."""
    n = 0
    for k, v in c["paired"]["pairs"].get(cfg, {}).items():
        g, mu, o0, o = k.split("|")
        if (groups and g not in groups) or (multi is not None and int(mu) != multi) or \
                (before and o0 not in before) or (after and o not in after):
            continue
        n += v
    return n


def cov_cell(eff, det, harm):
    return "–" if not eff else f"{fmt_pct(det / eff)} / {fmt_pct(harm / eff)}"


def cov_shares(c, cfg):
    """(detected, harmless, critical) shares of the campaign's effective faults under cfg."""
    cov = by_name_c(c)[cfg]["coverage"]
    e, d, h = cov["effective"], cov["detected"]["count"], cov["harmless"]["count"]
    return (d / e, h / e, (e - d - h) / e) if e else (0.0, 0.0, 0.0)


def by_name_c(c):
    return {m["name"]: m for m in c["result"]["mitigations"]}


def has_gather(row):
    cs = cov_campaigns(row)
    return bool(cs) and any(s.get("op") == "Gather" for s in cs[0]["result"]["campaign"].get("sites") or [])


def other_ops(row):
    sites = cov_campaigns(row)[0]["result"]["campaign"].get("sites") or []
    return sorted({s.get("op") for s in sites if s.get("op") != "Gather"})


def cov_table(row):
    cs = cov_campaigns(row)
    names = [m["name"] for m in cs[0]["result"]["mitigations"]]
    hdr = ["fault model (effective / trials)"] + [f"`{n}`" for n in names]
    rows = []
    for c in cs:
        cov0 = by_name_c(c)["none"]["coverage"]
        rows.append([f"{fm_label(c)} ({cov0['effective']:,} / {c['result']['summary']['trials']:,})"]
                    + [cov_cell(m["coverage"]["effective"], m["coverage"]["detected"]["count"],
                                m["coverage"]["harmless"]["count"]) for m in c["result"]["mitigations"]])
    if has_gather(row):
        single = [c for c in cs if c["fault_model"] in SINGLE]
        for group, label in (("gather", "embedding tables (Gather)"),
                             ("other", "other weights (" + ", ".join(other_ops(row)) + ")")):
            tot = [0, 0]
            cells = []
            for n in names:
                e = d = h = 0
                for c in single:
                    e1, d1, h1, n1 = cov_count(c["paired"], n, [group])
                    e, d, h = e + e1, d + d1, h + h1
                    if n == "none":
                        tot[0], tot[1] = tot[0] + e1, tot[1] + n1
                cells.append(cov_cell(e, d, h))
            rows.append([f"{label}, " + (f"the {len(single)} single-element models pooled" if group == "gather"
                                         else "the same") + f" ({tot[0]:,} / {tot[1]:,})"] + cells)
    return table(hdr, rows)


def span(vals, what):
    """[(share, fault model)], 'them' -> 'a% (`x`) to b% (`y`) of them', or 'a% of them under every
    fault model' if all are equal."""
    lo, hi = min(vals), max(vals)
    if fmt_pct(lo[0]) == fmt_pct(hi[0]):
        return f"{pct(lo[0])} of {what}" + (" under every fault model" if len(vals) > 1 else "")
    return f"{pct(lo[0])} (`{lo[1]}`) to {pct(hi[0])} (`{hi[1]}`) of {what}"


def cov_findings(row):
    """Sentences computed from the numbers of a coverage case: they hold for any run."""
    cs = cov_campaigns(row)
    if not cs:
        return []
    names = [m["name"] for m in cs[0]["result"]["mitigations"]]
    single = [c for c in cs if c["fault_model"] in SINGLE]
    ber = [c for c in cs if c["fault_model"] == "ber"]
    n_samples = cs[0]["result"]["golden"]["samples"]
    gather = has_gather(row)
    out = []
    crit0 = [(cov_shares(c, "none")[2], c["fault_model"]) for c in cs]
    out.append(f"Unprotected, {span(crit0, 'the effective faults')} are critical (a prediction changes "
               f"without an error being seen).")
    if "abft-detect" in names:
        det = [(cov_shares(c, "abft-detect")[0], c["fault_model"]) for c in cs]
        crit = [cov_shares(c, "abft-detect")[2] for c in cs]
        s = f"`abft-detect` flags {span(det, 'them')}"
        if max(crit) == 0:
            s += ("; none of those it lets through is critical, under any fault model: a weight fault "
                  "below its tolerance changed no prediction here")
        elif gather and all(pair_count(c, "abft-detect", ["other"], before=["critical", "tolerable", "due"],
                                       after=["critical"]) == 0 for c in cs):
            s += (f"; what stays critical, {span([(x, c['fault_model']) for x, c in zip(crit, cs)], 'them')}, "
                  f"is all in trials with a fault in the embedding tables (below)")
        else:
            s += f"; {span([(x, c['fault_model']) for x, c in zip(crit, cs)], 'them')} stay critical"
        out.append(s + ".")
        flagged = sum(pair_count(c, "abft-detect", before=["critical", "tolerable", "due"], after=["due"])
                      for c in cs)
        tol = sum(pair_count(c, "abft-detect", before=["tolerable"], after=["due"]) for c in cs)
        harmful = sum(pair_count(c, "abft-detect", before=["critical"], after=["due"]) for c in cs)
        if flagged:
            out.append(f"{tol:,} of its {flagged:,} detections of effective faults ({pct(tol / flagged)}, all "
                       f"{len(cs)} campaigns together) are of faults the unprotected model tolerates (no "
                       f"prediction changed), each a re-execution the fault did not need; {harmful:,} are of "
                       f"critical ones"
                       + (", the rest of NaN/Inf outputs." if flagged > tol + harmful else "."))
    if "abft-correct" in names and single:
        harm = [(cov_shares(c, "abft-correct")[1], c["fault_model"]) for c in single]
        new_due = [pair_count(c, "abft-correct", before=["critical", "tolerable"], after=["due"]) for c in single]
        s = ("`abft-correct` corrects instead: it leaves harmless "
             + span(harm, "the single-element faults (" + ", ".join(f"`{c['fault_model']}`" for c in single) + ")"))
        s += (", and flags none the unprotected model does not already turn into NaN/Inf" if sum(new_due) == 0
              else f", and flags {plural(sum(new_due), 'fault')} that the unprotected model does not turn into NaN/Inf")
        for c in ber:
            nd = pair_count(c, "abft-correct", before=["critical", "tolerable", "masked"], after=["due"])
            multi = pair_count(c, "abft-correct", multi=1, before=["critical", "tolerable", "masked"],
                               after=["due"])
            if nd:
                s += (f"; with `ber` it flags {plural(nd, 'trial')} more than the unprotected model's NaN/Inf, "
                      + ("all" if multi == nd else f"{multi:,} of them") + " with two or more corrupted "
                      "weights, which can put two wrong channels in one row of a layer: more than the "
                      "checksums locate")
        out.append(s + ".")
        if gather:
            left = sum(pair_count(c, "abft-correct", ["other"], after=["critical"]) for c in single)
            det_left = sum(pair_count(c, "abft-detect", ["other"], after=["critical"]) for c in single)
            if left:
                out.append(f"In the checksummed layers it leaves {plural(left, 'single-element fault')} "
                           "critical"
                           + (" that `abft-detect` flags" if det_left == 0 else "")
                           + ": the correction is made row by row (sample by sample), only where a row's "
                           "error exceeds the tolerance, and what is left can still flip a prediction at "
                           f"its threshold among the {n_samples:,}.")
    if "sbp" in names:
        harm = [(cov_shares(c, "sbp")[1], c["fault_model"]) for c in cs]
        lo = min(harm)
        s = f"`sbp` flags nothing and leaves harmless {span(harm, 'the effective faults')}"
        if lo[1] == "random_value" and fmt_pct(lo[0]) != fmt_pct(max(harm)[0]):
            c = [c for c in cs if c["fault_model"] == "random_value"][0]
            s += (f"; `random_value` is its weak spot, {pct(cov_shares(c, 'sbp')[2])} critical: the whole "
                  "mantissa it does not protect is random there, which moves a weight by up to a factor of 2 "
                  "(one flipped mantissa bit: at most 1.5)")
        if gather and "abft-correct" in names and single:
            e, _, h, _ = (sum(x) for x in zip(*[cov_count(c["paired"], "sbp", ["other"]) for c in single]))
            e2, _, h2, _ = (sum(x) for x in zip(*[cov_count(c["paired"], "abft-correct", ["other"]) for c in single]))
            if e and e2:
                s += (f"; in the {', '.join(other_ops(row))} weights it leaves {pct(h / e)} of the single-element "
                      f"faults harmless, where `abft-correct` leaves {pct(h2 / e2)}")
        out.append(s + ".")
    clips = [n for n in ("clip", "clip-pytei") if n in names]
    if clips:
        diff = max(abs(cov_shares(c, n)[1] - cov_shares(c, "none")[1]) for c in cs for n in clips)
        s = ("Clipping leaves the same harmless share as `none` in every row" if fmt_pct(diff) == "0" else
             f"Clipping stays within {100 * diff:.1f} points of `none`'s harmless share in every row")
        turned = {n: sum(pair_count(c, n, before=["due"], after=["critical"]) for c in cs) for n in clips}
        worse = {n: sum(pair_count(c, n, before=["tolerable", "masked"], after=["critical"]) for c in cs)
                 for n in clips}
        if any(turned.values()):
            s += ("; what it does change is NaN/Inf outputs (DUE) into silent wrong ones, "
                  + ", ".join(f"{plural(turned[n], 'trial')} with `{n}`" for n in clips if turned[n]))
        if any(worse.values()):
            s += (", and trials the unprotected model tolerates into critical ones, "
                  + ", ".join(f"{worse[n]:,} with `{n}`" for n in clips if worse[n])
                  + " (a clamped activation can end on the other side of a decision threshold "
                  "than the unclamped one)")
        out.append(s + ".")
    if gather and "abft-detect" in names and single:
        sites = cs[0]["result"]["campaign"]["sites"]
        emb = sum(s["elements"] for s in sites if s.get("op") == "Gather") / max(1, sum(s["elements"] for s in sites))
        g = [cov_count(c["paired"], "abft-detect", ["gather"]) for c in single]
        o = [cov_count(c["paired"], "abft-detect", ["other"]) for c in single]
        ge, gd, gh = (sum(x[i] for x in g) for i in range(3))
        oe, od, oh = (sum(x[i] for x in o) for i in range(3))
        if ge and oe:
            over = sum(pair_count(c, "abft-detect", ["gather"], before=["critical", "tolerable", "masked"],
                                  after=["due"]) for c in single)
            nan0 = sum(pair_count(c, "none", ["gather"], before=["due"]) for c in single)
            mins = [c["paired"]["gather_due_min_abs"].get("abft-detect") for c in single]
            mins = [x for x in mins if x is not None]
            s = (f"ABFT does not cover the embedding tables, {pct(emb)} of the weights, read by Gather, which "
                 f"has no checksum: of the effective single-element faults in them, `abft-detect` flags "
                 f"{pct(gd / ge)}")
            parts = []
            if nan0:
                parts.append(f"{nan0:,} of them NaN/Inf outputs unprotected too")
            if over:
                m, e = f"{min(mins):.1e}".split("e") if mins else ("", "0")
                parts.append(f"{over:,} corrupted to {m}e{int(e)} or more, close to the largest float, 3.4e38, "
                             "which a checksum downstream flags" if mins else f"{over:,} others")
            if parts:
                s += " (" + "; ".join(parts) + ")"
            s += (f" and {pct(max(0.0, 1 - (gd + gh) / ge))} stay critical, against {pct(od / oe)} flagged and "
                  f"{pct(max(0.0, 1 - (od + oh) / oe))} critical in the other weights")
            out.append(s + ".")
    return out


# ---------------------------------------------------------------- doc


def section(meta, rows):
    mi = meta["machine"]
    L = [START, "", "Generated by `bench/mitigation_bench.py` (see `bench/README.md`): edit the script, "
         "not this section."
         + (" **QUICK RUN: few trials; not for citing.**" if meta.get("quick") else ""), ""]
    L += [f"- Command: `{meta['command']}`" + (" (what `make bench-mitigations` runs)" if meta.get("is_make") else "")
          + f"; {meta['elapsed_s']:.0f} s in all, {meta.get('campaign_s', 0):.0f} s of it running the campaigns "
          f"(the rest: waiting up to {meta.get('quiet_wait', 0):g} s before each for other processes to go quiet)",
          f"- Date: {meta['date']}",
          benchlib.machine_lines(mi)[0],
          f"- bitflip: commit {meta.get('commit', '?')}" + (f" (binary {meta['binary']})" if meta.get("binary") else "")
          + f"; every campaign with `--threads {meta['threads']}`, seed {SEED}, fp32 weights",
          ""]
    L += ["All tables come from this one run; the script writes each campaign's spec to "
          "`bench/out/mitigations/` (not in git: the spec is under each table) and runs it with the "
          "command given there. The configurations, the same in every campaign:", ""]
    L += [f"- `{k}`: {v}" for k, v in CONFIG_NOTES.items()]
    L += ["",
          "How to read them: *recovery* is (m_mitigated − m_faulty) / (m_golden − m_faulty) on the "
          "metric, with its 95% paired-bootstrap interval (see [What is reported](#what-is-reported)); "
          "1 means the protection gives back everything the faults took, 0 nothing. **A DUE trial "
          "counts as recovered** (its metric is the golden one: a system that detects an error "
          "re-executes), so ABFT's recovery is paid for in re-executions: read it with its DUE rate. "
          "DUE without a detector (`none`, `clip`, `sbp`) means NaN or Inf outputs, and there the "
          "metric is what the outputs give (AUC ranks a NaN score lowest). ‡ marks a recovery (shown "
          "without its interval) where "
          f"the faults cost less than {SMALL_LOSS:g} of the metric on average: a ratio of two such "
          "small differences is noise; – means the faults cost nothing at that rate (the mean "
          "metric under faults equals the golden one). *Critical* and *DUE* are the shares of trials with a changed "
          "prediction and with NaN/Inf outputs or a detection. *Time ratio*: one golden pass with "
          "the protection over one without (single-threaded, best of 5, measured by bitflip after "
          "each configuration's trials; the passes take milliseconds here, so expect ±10% between "
          "runs, more on a busy machine); † marks a campaign during which other processes used more than "
          f"{BUSY_LIMIT} cores. *Storage overhead*: protected bits, checksums and bounds "
          "over the bits of the parameters.", ""]
    failed = [r for r in rows if not r.get("ok") or r.get("error")]
    if failed:
        L += ["Campaigns that did not run:", ""] + \
             [f"- {r['case']}: {r.get('error')}" for r in failed] + [""]

    def header(r, n_what):
        src = ("from `" + r["model_dir"] + "`") if r["source"] == "conformance" else \
              ("the project's fixture in `" + r["model_dir"] + "`")
        return [f"Model: `{r['model']}` ({src}; {r['param_elements']:,} parameters, "
                f"{r['param_bits']:,} bits; {r['result']['golden']['samples']:,} eval samples). {n_what} "
                f"Campaign, from the repo root: `{r['command']}` ({r['wall']:.1f} s for the {len(mits(r))} "
                "configurations"
                + (f", † {r['others_cores']:.2f} cores used by other processes" if disturbed(r) else "")
                + ").", "",
                "<details><summary>Spec</summary>", "", "```json", spec_text(r["spec"]), "```", "",
                "</details>", ""]

    def ber_block(r):
        met = mlabel(metric_of(r))
        s = r["spec"]["faults"]
        L = header(r, "Every bit of every weight" + (" (embedding tables included)" if embedding_share(r) else "")
                   + " flips independently with probability BER; "
                      f"{s['repeats']} independent trials per rate, {len(s['rates']) * s['repeats']:,} per "
                      f"configuration.")
        L += [f"Per rate: {met} under faults (mean over the trials) · recovery [95% CI] · DUE share "
              "(when not 0):", "", per_rate_table(r), "",
              "Over the whole sweep, per configuration:", "", overall_table(r), ""]
        L += [" ".join(ber_findings(r)), ""]
        return L

    ber = [r for r in rows if r.get("ok") and r["kind"] == "ber"]
    bits = [r for r in rows if r.get("ok") and r["kind"] == "per_bit"]
    drs = [r for r in ber if r["case"].startswith("drs_")]
    if drs:
        L += ["### 1. The DRS experiment: BER on the DLRM weights, AUC", "",
              f"After {PAPER}, which found that activation clipping recovers up to 30% of the AUC "
              "lost to memory errors. The paper's setting is 10 trials per rate; these use more, "
              "since the whole sweep takes seconds, and ten give intervals too wide to read.", ""]
        for r in drs:
            L += [f"#### `{r['model']}`", ""] + ber_block(r)
    cnn = [r for r in ber if r["case"] == "cnn_digits"]
    if cnn:
        r = cnn[0]
        L += ["### 2. The digits CNN: the same sweep, accuracy", ""]
        if r["model"] != "digits_cnn":
            L += [f"`digits_cnn` was not found (no `../shared/conformance`); this uses the project's "
                  f"fixture `{r['model']}` instead.", ""]
        L += ber_block(r)
    if bits:
        L += ["### 3. Single-bit weight faults by bit position", "",
              "Which bits each protection neutralises: one flipped bit per trial, `\"sampling\": "
              "\"per_bit\"` (equal trials per bit position, uniform over the weights within it). Each "
              "cell: critical % / DUE % of that bit's trials (the mantissa bits 0–21 pooled).", ""]
        for r in bits:
            n_per = r["spec"]["trials"] // 32
            L += [f"#### `{r['model']}`", ""]
            L += header(r, f"{r['spec']['trials']:,} trials per configuration, {n_per} per bit position.")
            L += [bits_table(r), "", " ".join(bits_findings(r)), ""]
    cov = [r for r in rows if r.get("ok") and r["kind"] == "fault_models"]
    if cov:
        L += coverage_section(cov)
    L += [END]
    return "\n".join(L)


def coverage_section(rows):
    """Section 4: one table per model, rows = fault models, cells = detected % / harmless %."""
    n_tr = cov_campaigns(rows[0])[0]["result"]["summary"]["trials"]
    widest = None
    for r in rows:
        for c in cov_campaigns(r):
            for m in c["result"]["mitigations"]:
                cv = m["coverage"]
                for k in ("detected", "harmless"):
                    lo, hi = cv[k]["ci"]
                    if lo is not None and (widest is None or (hi - lo) / 2 > widest[0]):
                        widest = ((hi - lo) / 2, cv["effective"])
    L = ["### 4. Coverage per fault model", "",
         "Which fault models each protection covers: one campaign per fault model on every fp32 weight "
         "(embedding tables included), faults drawn uniformly over the weights' bits: `bitflip` (one "
         "bit inverted), `stuck_at_0` and `stuck_at_1` (one bit forced; a bit already at that value "
         "leaves the weight intact, so many of these trials are masked), `random_value` (the whole "
         "word replaced by random bits), and `ber` at one rate, the power of ten nearest 1 / (bits of "
         "the parameters): about one bit error per trial, where the sweeps above show the faults "
         "starting to cost the metric while ABFT's DUE does not yet dominate. Each cell: of the row's "
         "*effective* faults (the trials whose outputs the faults change in the unprotected model, "
         "paired trial by trial), the share the configuration makes DUE (*detected*: a detector fired, "
         "or NaN/Inf outputs) / the share it leaves *harmless* (masked or tolerable: no prediction "
         "changed), in %; the rest, 100 − both, is critical: a silent wrong prediction. For `none`, "
         "detected is its NaN/Inf outputs and harmless the faults it tolerates. The Wilson 95% "
         "intervals are in the raw results (`coverage` of each configuration)"
         + (f"; the widest here is ±{100 * widest[0]:.1f} points, on {widest[1]:,} effective faults"
            if widest else "") + ".", ""]
    for r in rows:
        cs = cov_campaigns(r)
        c0 = cs[0]
        src = ("from `" + r["model_dir"] + "`") if r["source"] == "conformance" else \
              ("the project's fixture in `" + r["model_dir"] + "`")
        ber = [c for c in cs if c["fault_model"] == "ber"]
        cmds = [c["command"] for c in cs]
        tmpl = c0["command"].replace(f"{r['case']}_{c0['fault_model']}", f"{r['case']}_FM")
        if all(cmd == tmpl.replace("_FM", f"_{c['fault_model']}") for cmd, c in zip(cmds, cs)):
            how = (f"Campaigns, from the repo root, one per fault model FM = "
                   + ", ".join(c["fault_model"] for c in cs) + f": `{tmpl}`")
        else:
            how = "Campaigns, from the repo root: " + "; ".join(f"`{cmd}`" for cmd in cmds)
        times = ", ".join(f"{c['fault_model']} {c['wall']:.1f} s" + ("†" if disturbed(c) else "") for c in cs)
        busy = [c for c in cs if disturbed(c)]
        L += [f"#### `{r['model']}`", ""]
        if r["model"] not in ("digits_cnn", "dlrm_small"):
            L += [f"The conformance model was not found (no `../shared/conformance`); this uses the project's "
                  f"fixture `{r['model']}` instead.", ""]
        L += [f"Model: `{r['model']}` ({src}; {r['param_elements']:,} parameters, {r['param_bits']:,} bits; "
              f"{c0['result']['golden']['samples']:,} eval samples). {n_tr:,} trials per fault model and "
              f"configuration"
              + (f"; `ber` at {fmt_rate_name(ber[0]['spec']['faults']['rate'])}, "
                 f"{r['param_bits'] * ber[0]['spec']['faults']['rate']:.3g} bit errors per trial on average"
                 if ber else "")
              + f". {how} ({r['wall']:.1f} s for the {len(cs)} × {len(c0['result']['mitigations'])} "
              f"configurations: {times}"
              + (f"; † {max(c['others_cores'] for c in busy):.2f} cores used by other processes" if busy else "")
              + "). `--trials-out` writes the per-trial records the pairing below reads (the engine's "
              "coverage is recomputed from them as a check).", "",
              "<details><summary>Specs</summary>", "", f"`{c0['fault_model']}`:", "", "```json",
              spec_text(c0["spec"]), "```", "", "The others differ only in:", ""]
        for c in cs[1:]:
            diff = [f"`{json.dumps(k)}: {json.dumps(v)}`" for k, v in c["spec"].items() if c0["spec"].get(k) != v]
            gone = [f"no `{json.dumps(k)}`" for k in c0["spec"] if k not in c["spec"]]
            L.append(f"- `{c['fault_model']}`: " + ", ".join(diff + gone))
        L += ["", "</details>", "", cov_table(r), "", " ".join(cov_findings(r)), ""]
    return L


def write_doc(path, text):
    benchlib.write_section(path, START, END, text)


def print_tables(rows):
    for r in rows:
        print(f"\n== {r['case']}: {r['title']}")
        if not r.get("ok"):
            print(f"FAILED: {r.get('error')}")
            continue
        if r["kind"] == "fault_models":
            print(cov_table(r) + "\n\n" + " ".join(cov_findings(r)))
        elif r["kind"] == "ber":
            print(per_rate_table(r) + "\n\n" + overall_table(r) + "\n\n" + " ".join(ber_findings(r)))
        else:
            print(bits_table(r) + "\n\n" + " ".join(bits_findings(r)))


# ---------------------------------------------------------------- main


def engine_commit():
    """HEAD's short hash, +dirty if the engine's sources (not docs or bench/) have changes."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "core", "api",
                                "clients", "server", "CMakeLists.txt", "cmake"],
                               cwd=ROOT, capture_output=True, text=True).stdout.strip()
        return rev.stdout.strip() + (" with uncommitted changes to the engine" if dirty else "")
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser(description="what each protection recovers and costs (docs/MITIGATIONS.md)")
    ap.add_argument("--bitflip", default="build/bitflip")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true",
                    help=f"{REPEATS[1]} repeats per rate, {PER_BIT[1]} trials per bit, {COV_TRIALS[1]} per fault model")
    ap.add_argument("--repeats", type=int, default=None,
                    help=f"BER trials per rate (default {REPEATS[0]}, {REPEATS[1]} with --quick)")
    ap.add_argument("--per-bit", type=int, default=None,
                    help=f"trials per bit position (default {PER_BIT[0]}, {PER_BIT[1]} with --quick)")
    ap.add_argument("--cov-trials", type=int, default=None,
                    help=f"trials per fault model in the coverage campaigns (default {COV_TRIALS[0]}, "
                         f"{COV_TRIALS[1]} with --quick)")
    ap.add_argument("--cases", default=",".join(CASES), help="subset of: " + ", ".join(CASES))
    ap.add_argument("--conformance-dir", default=None,
                    help="where dlrm_small and digits_cnn live (default ../shared/conformance)")
    ap.add_argument("--quiet-wait", type=float, default=10,
                    help="before each campaign, wait up to this many seconds for other processes to go quiet")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--write-doc", metavar="PATH")
    ap.add_argument("--out", default=os.path.join(BENCH, "out", "mitigations.json"))
    ap.add_argument("--render", metavar="JSON", help="run nothing: tables (and --write-doc) from a saved file")
    a = ap.parse_args()

    if a.render:
        saved = json.load(open(a.render))
        return report(saved["meta"], saved["rows"], a.write_doc)

    a.repeats = a.repeats or REPEATS[1 if a.quick else 0]
    a.per_bit = a.per_bit or PER_BIT[1 if a.quick else 0]
    a.cov_trials = a.cov_trials or COV_TRIALS[1 if a.quick else 0]
    cases = [c for c in a.cases.split(",") if c]
    bad = [c for c in cases if c not in CASES]
    if bad:
        ap.error(f"unknown case(s) {bad}; known: {list(CASES)}")
    a.bitflip = a.bitflip if os.path.isabs(a.bitflip) else os.path.join(ROOT, a.bitflip)
    if not (os.path.isfile(a.bitflip) and os.access(a.bitflip, os.X_OK)):
        sys.exit(f"mitigation_bench: {a.bitflip} not found (build it: make build)")
    a.cdir = a.conformance_dir or default_conformance_dir()
    a.cdir = a.cdir if os.path.isabs(a.cdir) else os.path.join(ROOT, a.cdir)
    a.outdir = os.path.join(os.path.dirname(os.path.abspath(a.out)), "mitigations")
    os.makedirs(a.outdir, exist_ok=True)
    # every number from one binary: a private copy (the CLI may be rebuilt meanwhile)
    a.bitflip_copy = os.path.join(a.outdir, "bitflip")
    binary = file_id(a.bitflip)
    shutil.copy2(a.bitflip, a.bitflip_copy)

    minfo = machine_info()
    date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    argv = [os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)] + sys.argv[1:]
    t0 = time.time()
    rows = []
    for c in cases:
        rows.append(run_case(a, c, CASES[c]))
    minfo["loadavg_end"] = os.getloadavg()
    meta = {"date": date, "command": "/usr/bin/python3 " + shlex.join(argv),
            "is_make": argv[1:] == ["--bitflip", "build/bitflip", "--write-doc", "docs/MITIGATIONS.md"],
            "machine": minfo, "commit": engine_commit(), "binary": binary, "threads": a.threads,
            "quick": a.quick, "repeats": a.repeats, "per_bit": a.per_bit, "cov_trials": a.cov_trials,
            "elapsed_s": time.time() - t0,
            "campaign_s": sum(r.get("wall") or 0 for r in rows), "quiet_wait": a.quiet_wait}
    with open(a.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    log(f"raw results: {os.path.relpath(os.path.abspath(a.out), ROOT)}")
    return report(meta, rows, a.write_doc)


def report(meta, rows, doc):
    print_tables(rows)
    if doc:
        path = doc if os.path.isabs(doc) else os.path.join(ROOT, doc)
        write_doc(path, section(meta, rows))
        log(f"wrote the results section of {os.path.relpath(path, ROOT)}")
    return 1 if any((not r.get("ok") or r.get("error")) and not r.get("skipped") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
