#!/usr/bin/python3
"""Language-model benchmark (issue 30): bitflip beside PyTorch eager and ONNX Runtime on a
GPT-2-small-shaped decoder (12 layers, width 768, 12 heads, learned positions, tied
embeddings; vocabulary 50,257 unless --vocab says otherwise), one thread.

  /usr/bin/python3 bench/lm_bench.py [--quick] [--write-doc docs/BENCHMARKS.md]

What it measures, each peer in its own process, one at a time:

* perplexity eval: 16 sequences of 256 tokens (--seqs, --seq-len), best of --repeat passes;
  bitflip's and PyTorch's perplexity must agree to 1e-4 relative;
* a campaign of uniform single-bit weight faults (--trials, on the first --camp-seqs
  sequences): `bitflip run --local` against PyTorch's flip-and-rerun loop (flip a bit of a
  weight, run the eval pass, restore), setup counted on both sides (bitflip: the whole
  process; PyTorch: loading the model and the data);
* the structural bound of that campaign: the mean share of a pass a trial must re-run
  exactly, computed from the design, not measured (see structural_bound): a fault in block k
  re-runs blocks k..L-1, the final norm and the logits; a fault in an embedding row re-runs
  the sequences that read it from the first position that does (causal attention leaves
  earlier positions golden), and, tied, one logit column everywhere; a position row p re-runs
  every sequence from position p on;
* a campaign of uniform single-bit KV-cache faults (`"faults": {"target": "kv_cache"}`:
  one bit of one cached K or V entry of one sequence, layer, kind, head, position, dim and
  bit uniform, transient), the same --trials on the same --camp-seqs sequences:
  `bitflip run --local --stats` (whole process, setup counted; its re-run share recorded)
  against `torch-kv-campaign`, PyTorch's loop with the entry flipped in the k or v its
  attention receives (tests/conformance/kv_campaign.py's hook), setup counted;
* the structural bound of that campaign (kv_structural_bound): a fault in layer l,
  position p of one sequence must re-run, for that sequence only, layer l's attention rows
  p..T-1 (the faulted head's only: a K entry changes one score of each row, a V entry one
  column of the weighted sum), its projection and MLP rows p..T-1, layers l+1.. for rows
  p..T-1 and the logits rows p..T-1; the other sequences nothing;
* `kv-check`: --kv-check-trials faults drawn as torch-kv-campaign draws them, run by
  bitflip as a listed kv_cache campaign (k_cache.L / v_cache.L, index (position * heads +
  head) * head_size + dim in the c_attn split); each record must name the same (layer,
  kind, sample, head, position, dim, bit) and its old value, perplexity (1e-4 relative)
  and token accuracy must be PyTorch's with that flip.

The model is random (seeded), not trained: speed does not depend on the weights. Files go to
bench/models/lm/ (gitignored; ~500 MB for the full shape). Sub-commands `torch-eval`,
`torch-campaign`, `torch-kv-campaign` and `kv-check` are the PyTorch peers and the KV check,
run by the harness in subprocesses.
"""
import argparse
import json
import math
import os
import re
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests", "fixtures"))

START = "<!-- lm_bench:start -->"
END = "<!-- lm_bench:end -->"
# bitflip run --stats: the share of the trials' work the differential engine re-ran
RERAN = re.compile(r"the trials re-ran ([0-9.]+)% of the work")


def shape_args(a):
    return dict(vocab=a.vocab, d=a.width, n_layer=a.layers, n_head=a.heads, max_pos=max(a.seq_len, 64))


# ---------------------------------------------------------------- the model and data

def make(a):
    """Writes gpt2.pt (state dict), gpt2.onnx and the eval sets, unless present."""
    import numpy as np
    import torch
    import benchlib
    import lm_models
    os.makedirs(a.dir, exist_ok=True)
    onnx_path = os.path.join(a.dir, "gpt2.onnx")
    meta_path = os.path.join(a.dir, "gpt2.json")
    want = {"shape": shape_args(a), "seqs": a.seqs, "seq_len": a.seq_len, "camp_seqs": a.camp_seqs, "format": 2}
    if os.path.exists(meta_path) and json.load(open(meta_path)) == want and os.path.exists(onnx_path):
        return
    torch.manual_seed(0)
    m = lm_models.GPT2LM(**shape_args(a)).eval()
    torch.save(m.state_dict(), os.path.join(a.dir, "gpt2.pt"))
    lm_models.export_lm(m, onnx_path, opset=14)
    rng = np.random.default_rng(1)
    ids = rng.integers(0, a.vocab, size=(a.seqs, a.seq_len + 1), dtype=np.int64)
    for name, n in (("eval", a.seqs), ("camp", a.camp_seqs)):
        x, y = ids[:n, :-1].copy(), ids[:n, 1:].copy()
        benchlib.write_safetensors(os.path.join(a.dir, f"{name}.safetensors"), {"input_ids": x, "labels": y})
    json.dump(want, open(meta_path, "w"))


def load_torch(a):
    import torch
    import lm_models
    m = lm_models.GPT2LM(**shape_args(a)).eval()
    m.load_state_dict(torch.load(os.path.join(a.dir, "gpt2.pt")))
    return m


def read_set(a, name):
    import torch
    import benchlib
    t = benchlib.read_safetensors(os.path.join(a.dir, f"{name}.safetensors"))
    return torch.from_numpy(t["input_ids"]), torch.from_numpy(t["labels"])


def perplexity(model, ids, labels, batch):
    import torch
    import torch.nn.functional as F
    nll, n = 0.0, 0
    with torch.inference_mode():
        for s in range(0, ids.shape[0], batch):
            out = model(ids[s:s + batch])
            logits = out[0] if isinstance(out, (tuple, list)) else out
            lab = labels[s:s + batch]
            nll += F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), lab.reshape(-1),
                                   ignore_index=-100, reduction="sum").item()
            n += int((lab != -100).sum())
    return exp_or_inf(nll / n)


def exp_or_inf(x):
    """exp of a mean NLL; a fault can push it past float range (perplexity inf, not a crash)."""
    try:
        return math.exp(x)
    except OverflowError:
        return float("inf")


def torch_eval(a):
    """PyTorch eager peer: best of --repeat passes at the best of batches 1, 4, 16."""
    import torch
    torch.set_num_threads(a.threads)
    import benchlib
    benchlib.torch_keep_memory()
    t0 = time.time()
    m = load_torch(a)
    ids, labels = read_set(a, "eval")
    setup = time.time() - t0
    best = None
    for batch in (1, 4, 16):
        for _ in range(a.repeat):
            t = time.time()
            ppl = perplexity(m, ids, labels, batch)
            dt = time.time() - t
            if best is None or dt < best["seconds"]:
                best = {"seconds": dt, "batch": batch, "perplexity": ppl}
    import benchlib
    best.update(setup=setup, samples=int(ids.shape[0]), blas=benchlib.warn_if_reference_blas("lm"))
    print(json.dumps(best))


def all_weights(model):
    """(name, tensor) of every float parameter, tied ones once."""
    seen, out = set(), []
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        out.append((name, p))
    return out


def torch_campaign(a):
    """PyTorch's flip-and-rerun loop: per trial one bit of one weight element, drawn
    uniformly over every bit of every weight, flipped in place, a full pass, restored."""
    import numpy as np
    import torch
    torch.set_num_threads(a.threads)
    import benchlib
    benchlib.torch_keep_memory()
    t0 = time.time()
    m = load_torch(a)
    ids, labels = read_set(a, "camp")
    ws = all_weights(m)
    sizes = np.array([p.numel() for _, p in ws], dtype=np.float64)
    setup = time.time() - t0
    rng = np.random.default_rng(a.seed)
    t1 = time.time()
    ppl = []
    for _ in range(a.trials):
        k = int(rng.choice(len(ws), p=sizes / sizes.sum()))
        idx = int(rng.integers(0, ws[k][1].numel()))
        bit = int(rng.integers(0, 32))
        flat = ws[k][1].data.view(-1)
        iv = flat.view(torch.int32)
        old = int(iv[idx])
        iv[idx] = old ^ (1 << bit) if bit < 31 else old ^ -(1 << 31)
        ppl.append(perplexity(m, ids, labels, ids.shape[0]))
        iv[idx] = old
    loop = time.time() - t1
    print(json.dumps({"setup": setup, "loop": loop, "trials": a.trials, "seconds": setup + loop}))


# ---------------------------------------------------------------- KV-cache faults

def kv_conformance():
    """tests/conformance/kv_campaign.py: its Fault (one bit of one cache entry, as the
    attention receives it), run_torch (the hook in lm_models.attend) and compare."""
    sys.path.insert(0, os.path.join(REPO, "tests", "conformance"))
    import kv_campaign
    return kv_campaign


def draw_kv_fault(rng, a, n_seqs):
    """(layer, kind, sample, head, position, dim, bit), each uniform: every (layer, kind,
    head, position, dim, bit) cell of one sequence's cache equally likely, as bitflip's
    kv_cache target draws them."""
    hd = a.width // a.heads
    return (int(rng.integers(0, a.layers)), "kv"[int(rng.integers(0, 2))], int(rng.integers(0, n_seqs)),
            int(rng.integers(0, a.heads)), int(rng.integers(0, a.seq_len)), int(rng.integers(0, hd)),
            int(rng.integers(0, 32)))


def torch_kv_campaign(a):
    """PyTorch's loop for KV-cache faults: per trial one bit of one cached K or V entry of
    one sequence flipped in the k or v the attention receives, then the eval pass over the
    campaign sequences (nothing to restore: the hook's copy goes with the pass)."""
    import numpy as np
    import torch
    kvc = kv_conformance()
    torch.set_num_threads(a.threads)
    import benchlib
    benchlib.torch_keep_memory()
    t0 = time.time()
    m = load_torch(a)
    ids, labels = read_set(a, "camp")
    setup = time.time() - t0
    rng = np.random.default_rng(a.seed)
    t1 = time.time()
    ppl = []
    for _ in range(a.torch_trials):
        fault = kvc.Fault(*draw_kv_fault(rng, a, int(ids.shape[0])))
        with torch.inference_mode():
            logits = kvc.run_torch(m, [ids], fault)
            ppl.append(exp_or_inf(torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]).double(), labels.reshape(-1), ignore_index=-100).item()))
    loop = time.time() - t1
    print(json.dumps({"setup": setup, "loop": loop, "trials": a.torch_trials, "seconds": setup + loop}))


def kv_check(a):
    """Faults drawn as torch_kv_campaign draws them, run by bitflip as a listed kv_cache
    campaign; each record checked against PyTorch with kv_campaign.compare (old value,
    perplexity to 1e-4, token accuracy) and for naming the entry listed."""
    import subprocess
    import tempfile
    import numpy as np
    import torch
    kvc = kv_conformance()
    torch.set_num_threads(a.threads)
    import benchlib
    benchlib.torch_keep_memory()
    m = load_torch(a)
    ids, labels = read_set(a, "camp")
    rng = np.random.default_rng(a.seed + 1000)
    hd = a.width // a.heads
    drawn = [draw_kv_fault(rng, a, int(ids.shape[0])) for _ in range(a.kv_check_trials)]
    # GPT-2's no-cache export: the site is c_attn's split, [N, T, heads*D] per sample
    lst = [{"tensor": f"{kind}_cache.{layer}", "index": (pos * a.heads + head) * hd + dim, "bit": bit,
            "sample": sample} for layer, kind, sample, head, pos, dim, bit in drawn]
    with tempfile.TemporaryDirectory() as tmp:
        spec = {"model": os.path.join(a.dir, "gpt2.onnx"), "dataset": os.path.join(a.dir, "camp.safetensors"),
                "seed": a.seed, "faults": {"target": "kv_cache"}, "sampling": {"list": lst},
                "metrics": ["perplexity", "token_accuracy"]}
        path, recs_path = os.path.join(tmp, "kv.json"), os.path.join(tmp, "kv.trials")
        json.dump(spec, open(path, "w"))
        p = subprocess.run([a.bitflip, "run", "--local", "--threads", "1", "--format", "json", "--trials-out",
                            recs_path, path], capture_output=True, text=True)
        if p.returncode != 0:
            print(json.dumps({"ok": False, "error": p.stderr.strip()[-500:]}))
            return 1
        recs = [json.loads(line) for line in open(recs_path)]
    kvc.check(len(recs) == len(drawn), f"{len(recs)} records for {len(drawn)} listed faults")
    for rec, want in zip(recs, drawn):
        f = rec["faults"][0]
        got = (f["layer"], f["kind"], f["sample"], f["head"], f["position"], f["dim"], f["bits"][0])
        kvc.check(got == want, f"record names {got}, listed {want}")
        kvc.compare("lm_bench", m, [ids], labels, rec)
    print(json.dumps({"ok": not kvc.failures, "faults": len(drawn), "failures": kvc.failures[:5]}))
    return 0 if not kvc.failures else 1


def kv_structural_bound(a):
    """The mean share of a full pass over the --camp-seqs sequences that a uniform KV-cache
    fault must re-run, from the design (multiply-adds, as structural_bound counts them;
    norms and softmax left out as there). A fault in layer l, position p, head h of one
    sequence reaches query rows p..T-1 only (causal; the row that wrote the entry reads it
    too), in that sequence only:
      layer l: K entry: head h's score for key p in rows q >= p (D each), then the row's
               softmax changed, so head h's weighted sum of rows q (q+1)*D each;
               V entry: the one column dim of head h's weighted sum, rows q: q+1 each;
               then c_proj (d^2) and the MLP (8 d^2) of rows p..T-1 (the q, k, v
               projections stay golden: the fault is in their output);
      layers l+1..L-1: rows p..T-1 whole (qkv 3d^2, attention (q+1)*2d, c_proj d^2,
               MLP 8d^2; keys and values of positions < p stay golden);
      logits rows p..T-1 (d*V each).
    Averaged over uniform layer, kind and position (heads and dims weigh alike)."""
    d, L, V, T, N = a.width, a.layers, a.vocab, a.seq_len, a.camp_seqs
    D = d // a.heads
    total = N * (L * (12 * d * d * T + T * (T + 1) * d) + T * d * V)
    share = 0.0
    for l in range(L):
        for p in range(T):
            rows = range(p, T)
            k_attn = sum(D + (q + 1) * D for q in rows)
            v_attn = sum(q + 1 for q in rows)
            rest_l = len(rows) * 9 * d * d
            later = (L - 1 - l) * sum(12 * d * d + (q + 1) * 2 * d for q in rows)
            head = len(rows) * d * V
            share += ((k_attn + v_attn) / 2 + rest_l + later + head) / total
    return share / (L * T)


# ---------------------------------------------------------------- the structural bound

def structural_bound(a, first_pos_share):
    """The mean share of a full pass a uniform single-bit weight fault must re-run, from the
    design: multiply-adds per token of each part (the attention's by its mean causal length),
    a fault's share = the parts from its own on, weighted by the fault's probability
    (parameter size). first_pos_share: for an embedding row, the mean share of the eval
    set's token positions at or after the row's first use in a sequence (over rows, each
    weighted as likely)."""
    d, L, V, T = a.width, a.layers, a.vocab, a.seq_len
    attn = (T + 1) / 2 * d * 2            # scores and weighted sum per token, causal mean
    block = 12 * d * d + attn             # qkv 3d^2, proj d^2, mlp 8d^2
    head = d * V
    total = L * block + head
    params = {"block": 12 * d * d + 13 * d, "ln_f": 2 * d, "wte": V * d, "wpe": a.max_pos * d}
    n = params["block"] * L + params["ln_f"] + params["wte"] + params["wpe"]
    share = 0.0
    for k in range(L):   # a block-k fault re-runs blocks k.., the norm and the logits
        share += params["block"] / n * ((L - k) * block + head) / total
    share += params["ln_f"] / n * head / total
    # wte row r: the sequences that read it from their first use on, every layer; the
    # logit column r everywhere (one column of the head: d of d*V per token)
    share += params["wte"] / n * (first_pos_share * (L * block + head) + d) / total
    # wpe row p < T: every sequence from position p on; rows >= T are read by nobody
    wpe_share = sum((T - p) / T for p in range(T)) / a.max_pos
    share += params["wpe"] / n * wpe_share * (L * block + head) / total
    return share


def first_use_share(a):
    import numpy as np
    import benchlib
    ids = benchlib.read_safetensors(os.path.join(a.dir, "camp.safetensors"))["input_ids"]
    n, T = ids.shape
    tot = 0.0
    for r in np.unique(ids):
        hit = ids == r
        first = np.where(hit.any(1), hit.argmax(1), T)
        tot += float((T - first).sum()) / (n * T)
    return tot / a.vocab   # rows nobody reads add 0


# ---------------------------------------------------------------- the harness

def run(a):
    import benchlib
    make(a)
    py, me = "/usr/bin/python3", os.path.abspath(__file__)
    common = ["--dir", a.dir, "--vocab", str(a.vocab), "--width", str(a.width), "--layers", str(a.layers),
              "--heads", str(a.heads), "--seqs", str(a.seqs), "--seq-len", str(a.seq_len),
              "--camp-seqs", str(a.camp_seqs), "--threads", "1"]
    env = benchlib.thread_env(1)
    rows = {}
    onnx_path, data = os.path.join(a.dir, "gpt2.onnx"), os.path.join(a.dir, "eval.safetensors")

    r = benchlib.measure_process([py, me, "torch-eval", "--repeat", str(a.repeat)] + common, env, 7200, a.quiet_wait, "lm")
    rows["torch_eval"] = dict(r, **(json.loads(r["out"]) if r["ok"] else {}))
    best = None
    for _ in range(a.repeat):
        r = benchlib.measure_process([a.bitflip, "eval", onnx_path, data, "--threads", "1", "--batch", "16", "--json"],
                                     env, 7200, a.quiet_wait, "lm")
        if r["ok"]:
            j = json.loads(r["out"])
            r.update(seconds=j.get("seconds"), perplexity=j.get("perplexity"))
            if best is None or r["seconds"] < best["seconds"]:
                best = r
        else:
            best = best or r
    rows["bitflip_eval"] = best
    ort = os.path.join(BENCH_DIR, "node_modules", "onnxruntime-node")
    if os.path.isdir(ort):
        r = benchlib.measure_process(["node", os.path.join(BENCH_DIR, "ort_eval.js"), onnx_path, data, "--threads", "1",
                                      "--batch", "16", "--repeat", str(a.repeat), "--no-check"], env, 7200, a.quiet_wait, "lm")
        rows["ort_eval"] = dict(r, **(json.loads(r["out"]) if r["ok"] else {}))

    spec = {"model": onnx_path, "dataset": os.path.join(a.dir, "camp.safetensors"), "seed": a.seed,
            "trials": a.trials, "faults": {"target": "weights", "model": "bitflip", "bits": 1},
            "metrics": ["perplexity", "token_accuracy"]}
    spec_path = os.path.join(a.dir, "camp.json")
    json.dump(spec, open(spec_path, "w"))
    r = benchlib.measure_process([a.bitflip, "run", "--local", spec_path, "--threads", "1", "--stats"], env, 7200,
                                 a.quiet_wait, "lm")
    rows["bitflip_campaign"] = r
    r = benchlib.measure_process([py, me, "torch-campaign", "--trials", str(a.torch_trials), "--seed", str(a.seed)] + common,
                                 env, 7200, a.quiet_wait, "lm")
    rows["torch_campaign"] = dict(r, **(json.loads(r["out"]) if r["ok"] else {}))
    rows["bound"] = structural_bound(a, first_use_share(a))

    kv_spec = dict(spec, faults={"target": "kv_cache"})
    kv_path = os.path.join(a.dir, "camp_kv.json")
    json.dump(kv_spec, open(kv_path, "w"))
    r = benchlib.measure_process([a.bitflip, "run", "--local", kv_path, "--threads", "1", "--stats"], env, 7200,
                                 a.quiet_wait, "lm")
    rows["bitflip_kv_campaign"] = r
    r = benchlib.measure_process([py, me, "torch-kv-campaign", "--torch-trials", str(a.torch_trials),
                                  "--seed", str(a.seed)] + common, env, 7200, a.quiet_wait, "lm")
    rows["torch_kv_campaign"] = dict(r, **(json.loads(r["out"]) if r["ok"] else {}))
    rows["kv_bound"] = kv_structural_bound(a)
    for name in ("bitflip_campaign", "bitflip_kv_campaign"):
        m = RERAN.search(rows[name].get("err", ""))
        rows[name]["reran"] = float(m.group(1)) / 100 if m else None
    if a.kv_check_trials:
        r = benchlib.measure_process([py, me, "kv-check", "--kv-check-trials", str(a.kv_check_trials), "--bitflip",
                                      a.bitflip, "--seed", str(a.seed)] + common, env, 7200, 0, "lm")
        rows["kv_check"] = dict(r, **(json.loads(r["out"].strip().splitlines()[-1]) if r.get("out", "").strip() else {}))
    text = render(a, rows)
    print(text)
    benchlib.save_results(os.path.join(BENCH_DIR, "out", "lm_bench.json"), vars(a), rows)
    if a.write_doc:
        benchlib.write_section(a.write_doc, START, END, text)
    return 0 if all(v.get("ok", True) for v in rows.values() if isinstance(v, dict)) else 1


def render(a, rows):
    import benchlib
    te, be, oe = rows.get("torch_eval", {}), rows.get("bitflip_eval", {}), rows.get("ort_eval")
    bc, tc = rows.get("bitflip_campaign", {}), rows.get("torch_campaign", {})
    out = [START, "", f"### A GPT-2-small-shaped LM (issue 30)", "",
           f"`/usr/bin/python3 bench/lm_bench.py{' --quick' if a.quick else ''} --write-doc docs/BENCHMARKS.md`, "
           f"{time.strftime('%Y-%m-%d')}; {a.layers} layers, width {a.width}, {a.heads} heads, vocabulary {a.vocab}, "
           f"random seeded weights, 1 thread.", ""]
    out += benchlib.machine_lines(benchlib.machine_info()) + [""]
    if te.get("blas") and "openblas" not in str(te["blas"]).lower():
        out += [f"**PyTorch ran on {te['blas']}, not OpenBLAS: its times are a weak baseline** "
                "(`scripts/install-deps.sh --bench` installs libopenblas0-pthread).", ""]
    out += ["| perplexity eval, %d x %d tokens | seconds | vs PyTorch |" % (a.seqs, a.seq_len), "| --- | ---: | ---: |"]
    ts = te.get("seconds")
    for name, r in (("PyTorch eager (best batch %s)" % te.get("batch"), te), ("bitflip eval", be), ("ONNX Runtime", oe)):
        if r and r.get("seconds"):
            out.append(f"| {name} | {r['seconds']:.2f} | {ts / r['seconds']:.2f}x |" if ts else f"| {name} | {r['seconds']:.2f} | |")
    out.append("")
    if be.get("perplexity") and te.get("perplexity"):
        out.append(f"Perplexity: bitflip {be['perplexity']:.6f}, PyTorch {te['perplexity']:.6f}.")
    if tc.get("loop") and bc.get("wall"):
        per_t = tc["loop"] / tc["trials"]
        torch_total = tc["setup"] + per_t * a.trials
        out += ["", f"Campaign, {a.trials} uniform single-bit weight faults on {a.camp_seqs} sequences: bitflip "
                f"{bc['wall']:.1f} s in all (setup included, peak RSS {bc['rss_mib']:.0f} MiB); PyTorch's loop "
                f"{per_t:.2f} s a trial ({tc['trials']} timed) + {tc['setup']:.1f} s setup = {torch_total:.1f} s "
                f"for the same trials: {torch_total / bc['wall']:.2f}x. Structural bound: a trial must re-run "
                f"{100 * rows['bound']:.1f}% of a pass on average, so the loop's time times that is "
                f"{tc['setup'] + per_t * a.trials * rows['bound']:.1f} s."]
    out += kv_lines(a, rows)
    out += ["", END]
    return "\n".join(out)


def kv_lines(a, rows):
    """The two campaigns side by side: bitflip's whole process against PyTorch's loop for the
    same trials (its timed trials extrapolated, setup added once), the structural bound and
    what bitflip's --stats says its trials re-ran."""
    out = ["", f"| campaign, {a.trials} trials on {a.camp_seqs} x {a.seq_len} tokens | bitflip s (setup incl.) | "
           "PyTorch loop s (setup incl.) | PyTorch / bitflip | structural bound | bitflip re-ran |",
           "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for label, b, t, bound in (("uniform single-bit weight faults", "bitflip_campaign", "torch_campaign", "bound"),
                               ("uniform single-bit KV-cache faults", "bitflip_kv_campaign", "torch_kv_campaign",
                                "kv_bound")):
        bc, tc = rows.get(b, {}), rows.get(t, {})
        if not (bc.get("wall") and tc.get("loop")):
            continue
        torch_total = tc["setup"] + tc["loop"] / tc["trials"] * a.trials
        reran = f"{100 * bc['reran']:.2f}%" if bc.get("reran") is not None else "?"
        out.append(f"| {label} | {bc['wall']:.1f} | {torch_total:.1f} | {torch_total / bc['wall']:.2f}x | "
                   f"{100 * rows[bound]:.2f}% | {reran} |")
    kc = rows.get("kv_check")
    if kc:
        out += ["", f"KV-cache faults against PyTorch (`lm_bench.py kv-check`): {kc.get('faults', '?')} faults drawn "
                "as the PyTorch loop draws them, run by bitflip as a listed campaign: "
                + ("every record named the entry listed and matched PyTorch's flip (old value, perplexity to "
                   "1e-4, token accuracy)." if kc.get("ok") else f"**disagreed**: {kc.get('failures') or kc.get('error')}")]
    out += ["", "PyTorch's loop: its timed trials' mean times the campaign's trials, plus its setup (loading the "
            "model and the data). The KV bound: a fault at layer l, position p of one sequence re-runs that "
            "sequence's rows p..T-1 from layer l's attention (the faulted head only) through the later layers "
            "and the logits, the other sequences nothing (bench/lm_bench.py kv_structural_bound). The bounds count "
            "multiply-adds; *bitflip re-ran* is its `--stats` share, the steps its trials ran weighted by their time "
            "on the golden pass."]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", nargs="?", default="run", choices=["run", "make", "torch-eval", "torch-campaign", "torch-kv-campaign", "kv-check"],
                    help="run: the whole bench (default); make: write the model and data; torch-eval, "
                         "torch-campaign (weight faults), torch-kv-campaign (KV-cache faults): the PyTorch peers; "
                         "kv-check: listed KV-cache faults run by bitflip, each checked against PyTorch")
    ap.add_argument("--dir", default=os.path.join(BENCH_DIR, "models", "lm"))
    ap.add_argument("--bitflip", default=os.path.join(REPO, "build", "bitflip"))
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seqs", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--camp-seqs", type=int, default=4)
    ap.add_argument("--trials", type=int, default=200, help="bitflip campaign trials (weight and KV-cache campaigns)")
    ap.add_argument("--torch-trials", type=int, default=10, help="PyTorch loop trials timed, each campaign (per-trial time extrapolated)")
    ap.add_argument("--kv-check-trials", type=int, default=8,
                    help="KV-cache faults kv-check runs by bitflip and PyTorch and compares (0: no check)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quiet-wait", type=float, default=30)
    ap.add_argument("--quick", action="store_true", help="a 4-layer, width-256, vocabulary-4096 model, 50 trials")
    ap.add_argument("--write-doc")
    a = ap.parse_args()
    a.max_pos = max(a.seq_len, 64)
    if a.quick:
        a.layers, a.width, a.heads, a.vocab, a.trials, a.torch_trials, a.repeat = 4, 256, 4, 4096, 50, 5, 1
        a.dir = a.dir + "-quick"
    if a.command == "make":
        return make(a)
    if a.command == "torch-eval":
        return torch_eval(a)
    if a.command == "torch-campaign":
        return torch_campaign(a)
    if a.command == "torch-kv-campaign":
        return torch_kv_campaign(a)
    if a.command == "kv-check":
        return kv_check(a)
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
