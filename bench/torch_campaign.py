#!/usr/bin/python3
"""Replay a bitflip fault campaign in PyTorch, the way PyTorch fault-injection tools do it.

  /usr/bin/python3 bench/torch_campaign.py MODEL_NAME TRIALS.jsonl (--flip | --pytorchfi | --activation)
        [--threads N] [--max-seconds S] [--max-trials K] [--batch B] [--interaction matmul|pairs]
        [--dir DIR] [--tol 1e-5] [--trials-report PATH]
  /usr/bin/python3 bench/torch_campaign.py MODEL_NAME --ber-draw 1e-9,1e-5 [--draws K] [--threads N]

TRIALS.jsonl is what `bitflip run --trials-out` wrote: one JSON object per trial with its
faults ({"tensor", "index", "bits", "old", "new"[, "sample"]}) and the metrics bitflip
computed. This script runs exactly those faults on a hand-written nn.Module equivalent to
MODEL_NAME.onnx (bench/nets.py; every parameter loaded from the ONNX initializer of the same
name, for dlrm_large too), over the whole eval set, and reports trials/s of the trial loop.

Patterns (one per process):
  --flip        PyTEI-style hand-written loop on one model: per trial, XOR the listed bits
                into the float32 parameters viewed as int32 (in place), run the eval set
                forward under torch.inference_mode(), compute the task metric (accuracy, or
                AUC with sklearn.metrics.roc_auc_score) and compare the outputs with golden
                (changed predictions, MSE, max abs deviation, bit-identical, NaN/Inf), then
                XOR again to restore.
  --pytorchfi   PyTorchFI's per-trial pattern: copy.deepcopy(model), flip the bits in the
                copy's weights, forward the eval set, metric + golden comparison, drop the copy.
  --activation  transient activation faults: per trial, register a forward hook on the module
                whose output is the faulted ONNX value; the hook flips the bits of element
                `index` of sample `sample` of that output; forward the whole eval set, metric
                + golden comparison, remove the hook.
  --ber-draw    no replay: time drawing one BER trial's errors the per-bit way (a Bernoulli
                draw for every bit of every fp32 parameter, torch.rand(n_bits) < rate, then
                nonzero()), per rate, to compare with bitflip's per-error drawing.

The eval set runs at PyTorch's best batch for this model and thread count, measured before
the loop (the whole set in one batch, 1024 and 256; for DLRM also the `pairs` interaction of
nets.DLRM), unless --batch / --interaction fix it. Only the trial loop is timed (not loading,
calibration or checks). With --max-seconds, the loop stops after the first trial that ends
past the budget: trials/s is over the trials that ran. BER campaigns (trials with a "rate")
are replayed round-robin over the rates, so a budget-limited prefix covers every rate.

bitflip's trial records list at most the first 8 faults of a trial: for a BER trial with more,
the missing ones are drawn here (uniformly over the bits of the --ber-tensors, seeded, before
the loop) so that the trial flips as many bits as bitflip's did; such trials are not compared.

Checks (reported in the JSON, never timed):
  - before the loop, every replayed weight fault's `old` equals the parameter's value and
    flipping its bits gives `new` (bit for bit); for activation faults, `old` is compared
    with PyTorch's own golden activation (different engines: within 1e-5 relative);
  - after the loop, every parameter is bit-identical to before (flip + restore);
  - per trial, the task metric (and top1_mismatch, outcome) against bitflip's (--tol).
Prints one JSON object on stdout. Exit 3 if PyTorch's golden outputs disagree with
NAME.ref.json, 4 if a fault's old/new value or the restore check fails.
"""
import argparse
import copy
import fnmatch
import json
import math
import os
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description="replay bitflip trials in PyTorch")
    ap.add_argument("model", help="model name: digits_mlp, digits_cnn, dlrm_small, dlrm_large")
    ap.add_argument("trials", nargs="?", help="TRIALS.jsonl from bitflip run --trials-out")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--flip", dest="pattern", action="store_const", const="flip",
                   help="in-place flip / forward / restore loop (PyTEI-style)")
    g.add_argument("--pytorchfi", dest="pattern", action="store_const", const="pytorchfi",
                   help="deepcopy the model per trial, inject into the copy (PyTorchFI-style)")
    g.add_argument("--activation", dest="pattern", action="store_const", const="activation",
                   help="forward hook flipping one activation element of one sample per trial")
    g.add_argument("--ber-draw", metavar="RATES",
                   help="time per-bit BER draws at these comma-separated rates (no replay)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=60.0,
                    help="time budget of the trial loop (0: no limit)")
    ap.add_argument("--max-trials", type=int, default=0, help="replay at most K trials (0: all)")
    ap.add_argument("--batch", type=int, default=None,
                    help="eval batch (0 = whole set); default: the fastest, measured")
    ap.add_argument("--interaction", choices=["matmul", "pairs"], default=None,
                    help="DLRM only; default: the faster, measured")
    ap.add_argument("--dir", help="directory with NAME.onnx/.eval.safetensors/.ref.json")
    ap.add_argument("--tol", type=float, default=1e-5, help="metric agreement tolerance")
    ap.add_argument("--draws", type=int, default=3, help="--ber-draw: draws per rate")
    ap.add_argument("--ber-tensors", default="*",
                    help="comma-separated globs: the tensors a BER campaign selected (to draw the "
                         "faults a trial record leaves out)")
    ap.add_argument("--seed", type=int, default=7, help="seed of those extra draws")
    ap.add_argument("--trials-report", metavar="PATH",
                    help="write one JSON line per replayed trial (PyTorch's metrics next to bitflip's)")
    a = ap.parse_args()
    if a.ber_draw:
        a.pattern = "ber-draw"
    elif not a.trials:
        ap.error("TRIALS.jsonl is required for --flip, --pytorchfi and --activation")
    return a


A = parse_args()
# Thread env must be in place before numpy/torch (and their OpenMP/OpenBLAS) are loaded.
for _k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_k] = str(A.threads)
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

import benchlib  # noqa: E402
import nets  # noqa: E402

torch.set_num_threads(A.threads)
benchlib.torch_keep_memory()


def log(msg):
    print(f"torch_campaign: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- model


def dlrm_config(sd):
    """nets.DLRM constructor arguments from the shapes of a DLRM state dict (ONNX initializers)."""
    rows, t = [], 0
    while f"emb.{t}.weight" in sd:
        rows.append(sd[f"emb.{t}.weight"].shape[0])
        t += 1

    def chain(prefix):
        outs, i = [], 0
        while i < 64:
            w = sd.get(f"{prefix}.{i}.weight")
            if w is not None:
                outs.append(w.shape)
            i += 1
        return outs
    bot, top = chain("bot"), chain("top")
    return dict(rows=rows, dim=sd["emb.0.weight"].shape[1], n_dense=bot[0][1],
                bot_hidden=[s[0] for s in bot[:-1]], top_hidden=[s[0] for s in top[:-1]])


def build_model(name, onnx_path):
    """(module, graph input names): nets.py module with every parameter/buffer loaded (strict)
    from the ONNX initializer of the same name."""
    sd = nets.state_dict_from_onnx(onnx_path)
    if name in nets.CONFORMANCE:
        ctor, input_names = nets.CONFORMANCE[name]
        model = ctor()
    elif name.startswith("dlrm"):
        model = nets.DLRM(**dlrm_config(sd))
        input_names = ["dense", "sparse"]
    else:
        sys.exit(f"torch_campaign: no torch module for {name!r}")
    model.load_state_dict(sd, strict=True)
    model.eval()
    model.requires_grad_(False)
    if input_names != nets.graph_input_names(onnx_path):
        sys.exit(f"torch_campaign: input names {input_names} != ONNX graph inputs")
    return model, input_names


def module_for_value(model, value_name):
    """The submodule whose output is ONNX value `value_name`. torch.onnx.export names a node's
    output /scope/.../<module path>/<Op>_output_0, the last scope being the module's dotted
    path (e.g. /top/top.0/Gemm_output_0 -> top.0)."""
    parts = value_name.strip("/").split("/")
    mods = dict(model.named_modules())
    op = parts[-1].split("_output")[0] if parts else ""
    want = {"Gemm": torch.nn.Linear, "Conv": torch.nn.Conv2d, "MaxPool": torch.nn.MaxPool2d}
    if len(parts) >= 2 and parts[-2] in mods:
        m = mods[parts[-2]]
        if op in want and not isinstance(m, want[op]):
            sys.exit(f"torch_campaign: {value_name}: module {parts[-2]} is {type(m).__name__}, "
                     f"not the {want[op].__name__} an ONNX {op} comes from")
        return parts[-2], m
    sys.exit(f"torch_campaign: cannot map ONNX value {value_name!r} to a module of "
             f"{type(model).__name__}")


# ---------------------------------------------------------------- metrics


def auc_of(labels_np, scores):
    """AUC with sklearn; a NaN score ranks below every number (as bitflip does)."""
    s = scores.astype(np.float64, copy=False)
    if not np.isfinite(s).all():
        s = s.copy()
        fin = np.isfinite(s)
        lo = s[fin].min() if fin.any() else 0.0
        hi = s[fin].max() if fin.any() else 0.0
        s[np.isposinf(s)] = hi + 2.0
        s[np.isneginf(s)] = lo - 1.0
        s[np.isnan(s)] = lo - 2.0
    return float(roc_auc_score(labels_np, s))


def bits_mask(bits):
    m = 0
    for b in bits:
        m |= 1 << int(b)
    return m - (1 << 32) if m >= 1 << 31 else m   # as a signed int32


def f32_bits(x):
    """int32 bit pattern of a float32 (JSON number, or "NaN"/"Infinity"/"-Infinity")."""
    if isinstance(x, str):
        x = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[x]
    return int(np.array([x], dtype=np.float32).view(np.int32)[0])


def same_f32(bits, x):
    """Is the float32 with int32 pattern `bits` the JSON value x? JSON writes every NaN as
    "NaN" (no payload): any NaN matches it."""
    if x == "NaN":
        return bool(np.isnan(np.array([bits], dtype=np.int32).view(np.float32)[0]))
    return bits == f32_bits(x)


def jnum(x):
    if x is None:
        return None
    if isinstance(x, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(x)
    return float(x)


def group_faults(per):
    """{tensor: {element: xor mask}} -> [(tensor, index, mask)], one entry per tensor: python
    ints for a single element, index and mask tensors for several."""
    groups = []
    for name, em in per.items():
        if len(em) == 1:
            (idx, m), = em.items()
            groups.append((name, idx, m))
        else:
            groups.append((name, torch.tensor(list(em.keys()), dtype=torch.int64),
                           torch.tensor(list(em.values()), dtype=torch.int32)))
    return groups


def draw_faults(k, pop, rng):
    """k distinct bits drawn uniformly among every bit of the tensors in pop [(name, numel)],
    as [(name, element, signed int32 mask)]."""
    sizes = np.array([n * 32 for _, n in pop], dtype=np.int64)
    ends = np.cumsum(sizes)
    pos = rng.choice(int(ends[-1]), size=k, replace=False)
    out = []
    for p in pos:
        ti = int(np.searchsorted(ends, p, side="right"))
        off = int(p - (ends[ti] - sizes[ti]))
        out.append((pop[ti][0], off // 32, bits_mask([off % 32])))
    return out


# ---------------------------------------------------------------- ber-draw mode


def ber_draw(model):
    params = [p for _, p in model.named_parameters() if p.dtype == torch.float32]
    n_bits = sum(p.numel() for p in params) * 32
    rates = [float(r) for r in A.ber_draw.split(",") if r]
    gen = torch.Generator().manual_seed(7)
    out = []
    for rate in rates:
        times, errs = [], []
        for _ in range(max(1, A.draws)):
            t0 = time.perf_counter()
            n = 0
            for p in params:   # one Bernoulli draw per bit, as per-bit BER injectors do
                hit = (torch.rand(p.numel() * 32, generator=gen) < rate).nonzero()
                n += hit.shape[0]
            times.append(time.perf_counter() - t0)
            errs.append(n)
        out.append({"rate": rate, "draws": len(times), "seconds_per_draw": min(times),
                    "seconds_median": sorted(times)[len(times) // 2],
                    "mean_errors": sum(errs) / len(errs)})
        log(f"per-bit draw at rate {rate:g}: {min(times) * 1e3:.1f} ms ({sum(errs) / len(errs):.1f} errors)")
    print(json.dumps({"model": A.model, "pattern": "ber-draw", "threads": A.threads,
                      "population_bits": n_bits, "rates": out, "torch_version": torch.__version__}))


# ---------------------------------------------------------------- main


def main():
    d = A.dir or benchlib.find_model(A.model)
    onnx_path = os.path.join(d, A.model + ".onnx")
    model, input_names = build_model(A.model, onnx_path)
    if A.pattern == "ber-draw":
        return ber_draw(model)

    data = benchlib.read_safetensors(os.path.join(d, A.model + ".eval.safetensors"))
    ref_path = os.path.join(d, A.model + ".ref.json")
    ref = json.load(open(ref_path)) if os.path.exists(ref_path) else None
    labels_np = data["labels"]
    task = benchlib.task_of(labels_np)
    mname = "accuracy" if task == "classification" else "auc"
    inputs = [torch.from_numpy(data[k]) for k in input_names]
    n = inputs[0].shape[0]
    labels_t = torch.from_numpy(labels_np)

    # ---- the trials
    trials = []
    with open(A.trials) as f:
        for line in f:
            if line.strip():
                trials.append(json.loads(line))
    n_total = len(trials)
    is_act = any("sample" in fl for t in trials for fl in t["faults"])
    if is_act != (A.pattern == "activation"):
        sys.exit("torch_campaign: " + ("activation faults need --activation" if is_act else
                                       "--activation needs a campaign on activations"))
    rates = sorted({t["rate"] for t in trials if "rate" in t})
    if rates:   # BER sweep: round-robin over the rates
        groups = [[t for t in trials if t.get("rate") == r] for r in rates]
        inter = []
        for i in range(max(len(g) for g in groups)):
            inter += [g[i] for g in groups if i < len(g)]
        trials = inter
    if A.max_trials > 0:
        trials = trials[:A.max_trials]

    # ---- the forward pass at the best batch
    is_dlrm = isinstance(model, nets.DLRM)

    def make_pass(batch):
        starts = list(range(0, n, batch))
        slices = [[x[s:s + batch] for x in inputs] for s in starts]
        out = torch.empty((n,) + tuple(model(*[x[:1] for x in inputs]).shape[1:]), dtype=torch.float32)
        state = {"start": 0}

        def run(m):
            if len(starts) == 1:
                return m(*slices[0])
            for s, xs in zip(starts, slices):
                state["start"] = s
                out[s:s + batch] = m(*xs)
            return out
        return run, state

    cands = []
    batches = [A.batch if A.batch else n] if A.batch is not None else \
        sorted({n} | {b for b in (1024, 256) if b < n}, reverse=True)
    variants = [A.interaction] if A.interaction else (["matmul", "pairs"] if is_dlrm else ["-"])
    calib = []
    with torch.inference_mode():
        for v in variants:
            if is_dlrm:
                model.interaction = v
            for b in batches:
                run, _ = make_pass(min(b, n))
                run(model)
                ts = []   # at least 3 passes and 0.2 s (1 pass if there is no choice)
                while not ts or (len(batches) * len(variants) > 1 and len(ts) < 200
                                 and (len(ts) < 3 or sum(ts) < 0.2)):
                    t0 = time.perf_counter()
                    run(model)
                    ts.append(time.perf_counter() - t0)
                calib.append({"batch": min(b, n), "interaction": v, "seconds": min(ts)})
                cands.append((min(ts), min(b, n), v))
    _, batch, variant = min(cands)
    if is_dlrm:
        model.interaction = variant
    run, run_state = make_pass(batch)

    # ---- golden
    with torch.inference_mode():
        golden = run(model).clone()
    if ref is not None:
        ok, err, worst = benchlib.compare_golden(golden.numpy(), benchlib.load_golden(ref))
        if not ok:
            log(f"{A.model}: golden outputs do NOT match {ref_path} (max abs err {err:g})")
            sys.exit(3)
    classif = task == "classification"
    g_pred = golden.argmax(1) if classif else (golden.reshape(-1) > 0.5)

    def evaluate(out):
        """What a tool computes per trial: the task metric and the comparison with golden."""
        o = out if classif else out.reshape(-1)
        if classif:
            pred = out.argmax(1)
            metric = (pred == labels_t).double().mean().item()
        else:
            pred = o > 0.5
            metric = auc_of(labels_np, o.numpy())
        finite = bool(torch.isfinite(out).all())
        changed = int((pred != g_pred).sum())
        diff = (out - golden).double()
        mse = float((diff * diff).mean()) if finite else None
        max_abs = float(diff.abs().max()) if finite else None
        if not finite:
            outcome = "due"
        elif changed:
            outcome = "critical"
        elif torch.equal(out, golden):
            outcome = "masked"
        else:
            outcome = "tolerable"
        return {mname: metric, "top1_mismatch": changed / n, "mse": mse, "max_abs": max_abs,
                "outcome": outcome}

    # ---- prepare the faults (outside the timed loop) and check old/new
    checks = {"old_new_checked": 0, "old_new_bad": 0}
    params = dict(model.named_parameters())
    if not is_act:
        ivs = {k: p.detach().view(-1).view(torch.int32) for k, p in params.items()
               if p.dtype == torch.float32}
        snapshot = {k: v.clone() for k, v in ivs.items()}
        # the population extra BER faults are drawn from (--ber-tensors globs)
        pop = [(k, ivs[k].numel()) for k in ivs
               if any(fnmatch.fnmatchcase(k, g) for g in A.ber_tensors.split(","))]
        rng = np.random.default_rng(A.seed)
        incomplete = set()
        prepared = []
        for t in trials:
            per = {}
            for fl in t["faults"]:
                name = fl["tensor"]
                if name not in ivs:
                    sys.exit(f"torch_campaign: fault in {name!r}: no float32 parameter of that name "
                             f"(parameters: {sorted(ivs)})")
                iv, idx, m = ivs[name], int(fl["index"]), bits_mask(fl["bits"])
                # old/new, applied in order on the live tensor, undone below
                cur = int(iv[idx])
                checks["old_new_checked"] += 1
                if cur != f32_bits(fl["old"]) or not same_f32(cur ^ m, fl["new"]):
                    checks["old_new_bad"] += 1
                    if checks["old_new_bad"] <= 5:
                        log(f"trial {t['trial']}: {name}[{idx}] is {iv.view(torch.float32)[idx].item()!r},"
                            f" bitflip says old {fl['old']!r} new {fl['new']!r}")
                iv[idx] ^= m
                per.setdefault(name, {})
                per[name][idx] = per[name].get(idx, 0) ^ m
            for name, em in per.items():
                for idx, m in em.items():
                    ivs[name][idx] ^= m
            groups = group_faults(per)
            prepared.append(groups)
            # bitflip's trial records keep at most the first few faults of a trial (8): draw
            # the rest here, uniformly over the campaign's bits like bitflip's BER draw, so
            # the trial flips as many bits as bitflip's did. Its metrics then differ from
            # bitflip's (other faults) and are left out of the comparison.
            extra = int(t.get("n_faults", len(t["faults"]))) - len(t["faults"])
            if extra > 0:
                incomplete.add(t["trial"])
                for name, idx, m in draw_faults(extra, pop, rng):
                    per.setdefault(name, {})
                    per[name][idx] = per[name].get(idx, 0) ^ m
                groups[:] = group_faults(per)
        if any(not torch.equal(ivs[k], snapshot[k]) for k in ivs):
            log("parameters changed by the old/new check")
            sys.exit(4)
    else:
        value = trials[0]["faults"][0]["tensor"]
        if any(fl["tensor"] != value for t in trials for fl in t["faults"]):
            sys.exit("torch_campaign: --activation: every fault must be in the same ONNX value")
        mod_name, module = module_for_value(model, value)
        # the golden activation, to check `old`
        acts = []
        h = module.register_forward_hook(lambda m, i, o: acts.append(o.detach().clone()))
        with torch.inference_mode():
            run(model)
        h.remove()
        act = torch.cat(acts) if len(acts) > 1 else acts[0]
        act_flat = act.reshape(n, -1)
        checks.update(old_exact=0, old_close=0)
        prepared = []
        for t in trials:
            fs = []
            for fl in t["faults"]:
                s, idx, m = int(fl["sample"]), int(fl["index"]), bits_mask(fl["bits"])
                ours = float(act_flat[s, idx])
                old = jnum(fl["old"])
                checks["old_new_checked"] += 1
                if f32_bits(ours) == f32_bits(fl["old"]):
                    checks["old_exact"] += 1
                if old is not None and abs(ours - old) <= 1e-5 * max(1.0, abs(old)):
                    checks["old_close"] += 1
                else:
                    checks["old_new_bad"] += 1
                    if checks["old_new_bad"] <= 5:
                        log(f"trial {t['trial']}: {value} sample {s} [{idx}] is {ours!r} in PyTorch, "
                            f"bitflip says old {fl['old']!r}")
                fs.append((s, idx, m))
            prepared.append(fs)

    # ---- the timed trial loop
    results = []
    per_trial_s = []
    budget = A.max_seconds if A.max_seconds and A.max_seconds > 0 else math.inf

    def timed(one):
        """Runs one(trial's faults) per prepared trial until the budget is spent;
        returns the loop's wall time. One function call per trial is noise next
        to a forward pass over the eval set."""
        t_start = time.perf_counter()
        for groups in prepared:
            t0 = time.perf_counter()
            results.append(one(groups))
            t1 = time.perf_counter()
            per_trial_s.append(t1 - t0)
            if t1 - t_start >= budget:
                break
        return time.perf_counter() - t_start

    if A.pattern == "flip":
        def flip_trial(groups):
            for name, idx, m in groups:
                ivs[name][idx] ^= m
            r = evaluate(run(model))
            for name, idx, m in groups:
                ivs[name][idx] ^= m
            return r
        with torch.inference_mode():
            elapsed = timed(flip_trial)
    elif A.pattern == "pytorchfi":
        def pytorchfi_trial(groups):
            fi = copy.deepcopy(model)
            fparams = dict(fi.named_parameters())
            with torch.no_grad():
                for name, idx, m in groups:
                    fparams[name].view(-1).view(torch.int32)[idx] ^= m
            with torch.inference_mode():
                return evaluate(run(fi))
        elapsed = timed(pytorchfi_trial)
    else:   # activation
        def make_hook(fs):
            def hook(mod, inp, output):
                b0 = run_state["start"]
                b1 = b0 + output.shape[0]
                for s, idx, m in fs:
                    if b0 <= s < b1:
                        output[s - b0].reshape(-1).view(torch.int32)[idx] ^= m
            return hook

        def activation_trial(fs):
            h = module.register_forward_hook(make_hook(fs))
            r = evaluate(run(model))
            h.remove()
            return r
        with torch.inference_mode():
            elapsed = timed(activation_trial)

    # ---- checks after the loop
    restored = None
    if not is_act:
        restored = all(torch.equal(ivs[k], snapshot[k]) for k in ivs)
    else:   # the hook must not have touched the model: a clean pass equals golden
        with torch.inference_mode():
            restored = bool(torch.equal(run(model), golden))

    k = len(results)
    cmp = {"compared": 0, "metric_match": 0, "metric_max_abs_diff": 0.0, "top1_match": 0,
           "outcome_match": 0, "mismatches": []}
    report = open(A.trials_report, "w") if A.trials_report else None
    if is_act:
        incomplete = set()
    cmp["not_compared_incomplete"] = 0
    for t, r in zip(trials, results):
        bm = t.get("metrics", {})
        if t["trial"] in incomplete:
            cmp["not_compared_incomplete"] += 1
            if report:
                report.write(json.dumps({"trial": t["trial"], "torch": r, "bitflip": bm,
                                         "bitflip_outcome": t.get("outcome"),
                                         "incomplete_record": True}) + "\n")
            continue
        bv, pv = jnum(bm.get(mname)), r[mname]
        cmp["compared"] += 1
        both_nan = (bv is None or math.isnan(bv)) and math.isnan(pv)
        ok = both_nan or (bv is not None and abs(bv - pv) <= A.tol)
        if ok:
            cmp["metric_match"] += 1
        elif len(cmp["mismatches"]) < 10:
            cmp["mismatches"].append({"trial": t["trial"], "bitflip": bv, "torch": pv,
                                      "bitflip_outcome": t.get("outcome"), "torch_outcome": r["outcome"],
                                      "faults": t["faults"][:3]})
        if bv is not None and not math.isnan(bv) and not math.isnan(pv):
            cmp["metric_max_abs_diff"] = max(cmp["metric_max_abs_diff"], abs(bv - pv))
        b1 = jnum(bm.get("top1_mismatch"))
        if b1 is not None and abs(b1 - r["top1_mismatch"]) <= 1e-9:
            cmp["top1_match"] += 1
        if t.get("outcome") == r["outcome"]:
            cmp["outcome_match"] += 1
        if report:
            report.write(json.dumps({"trial": t["trial"], "torch": r, "bitflip": bm,
                                     "bitflip_outcome": t.get("outcome")}) + "\n")
    if report:
        report.close()

    res = {"blas": benchlib.warn_if_reference_blas("torch_campaign"),
           "model": A.model, "pattern": A.pattern, "threads": A.threads,
           "torch_threads": torch.get_num_threads(), "torch_version": torch.__version__,
           "samples": n, "task": task, "metric": mname, "batch": batch, "interaction": variant,
           "calibration": calib, "trials_total": n_total, "trials_run": k, "seconds": elapsed,
           "trials_per_s": k / elapsed if elapsed > 0 else None,
           "budget_s": A.max_seconds, "restored_bit_identical": restored}
    if is_act:
        res["activation"] = {"value": value, "module": mod_name}
    if rates:
        pr = {}
        for t, s in zip(trials, per_trial_s):
            e = pr.setdefault(repr(t["rate"]), {"rate": t["rate"], "trials": 0, "seconds": 0.0,
                                                  "faults": 0})
            e["trials"] += 1
            e["seconds"] += s
            e["faults"] += t["n_faults"]
        for e in pr.values():
            e["trials_per_s"] = e["trials"] / e["seconds"] if e["seconds"] > 0 else None
            e["mean_faults"] = e["faults"] / e["trials"]
        res["per_rate"] = sorted(pr.values(), key=lambda e: e["rate"])
    res.update(checks)
    res["agreement"] = cmp
    print(json.dumps(res))
    if checks["old_new_bad"] and not is_act or restored is False:
        log("old/new or restore check FAILED")
        sys.exit(4)


if __name__ == "__main__":
    main()
