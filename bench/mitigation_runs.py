"""The mitigation benchmark (bench/mitigation_bench.py): the campaign runs and their records."""
import json
import os
import shlex
from mitigation_setup import FAULT_MODELS, ROOT, STATS_RE_PREFIX, log, make_spec, measure_process, model_info, resolve_model


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
