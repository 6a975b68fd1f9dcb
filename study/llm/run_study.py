#!/usr/bin/python3
"""The language-model study of issue 30 (`make study-llm`): docs/study/llm.md.

Trains a small Llama-style decoder (RMSNorm, rotate-half RoPE, grouped-query attention,
SwiGLU) on the synthetic language of tests/fixtures/make_lm_models.py, so that its
predictions are sharp (token accuracy ~0.9) and faults visible, exports it with and
without a KV cache, and runs bitflip campaigns on it:

1. perplexity and token accuracy against the bit error rate, weights stored in fp32, bf16,
   fp16, int8 (per channel) and int4 (groups of 32 along the input dimension);
2. the most vulnerable bits (bf16, stratified per bit) and tensors (fp32, per tensor);
3. KV-cache faults against weight faults: single bit flips in the cached keys and values
   (the KV export's past_key_values inputs, each flip seen by every new token) against
   single bit flips in the weights, in bf16;
4. what activation clipping (bounds from a profile of the golden pass), selective
   protection of the sign and exponent bits (ECC on them) and ABFT on the matmuls recover,
   with paired intervals, on the bf16 BER sweep;

then writes the tables beside the published findings the issue quotes. Everything is
seeded; the model is cached in --work between runs (--retrain to redo it).

  /usr/bin/python3 study/llm/run_study.py --bitflip build/bitflip --work build/study/llm \
      --doc docs/study/llm.md [--quick]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "fixtures"))
sys.path.insert(0, os.path.join(REPO, "clients", "python"))

# the study model: larger than the fixtures' (2 layers, width 32) so that layers differ
SHAPE = dict(vocab=64, d=64, n_layer=4, n_head=4, n_kv_head=2, hidden=128, max_pos=64, rope="half",
             gqa="expand", mask="tril", mask_apply="masked_fill")
SEQ = 32
PROMPT_LEN, GEN_NEW, GEN_PROMPTS = 8, 16, 16
GEN_RATES = {"fp32": [1e-7, 1e-6, 1e-5, 1e-4], "bf16": [1e-6, 1e-5, 1e-4, 1e-3]}

REPRS = [   # (name in tables, faults fields, BER rates)
    ("fp32", {"representation": "fp32"}, [1e-7, 1e-6, 1e-5, 1e-4]),
    ("bf16", {"representation": "bf16"}, [1e-6, 1e-5, 1e-4, 1e-3]),
    ("fp16", {"representation": "fp16"}, [1e-6, 1e-5, 1e-4, 1e-3]),
    ("int8", {"representation": "int8", "per_channel": True}, [1e-5, 1e-4, 1e-3, 1e-2]),
    ("int4 g32", {"representation": "int4", "group_size": 32}, [1e-5, 1e-4, 1e-3, 1e-2]),
]

PUBLISHED = [
    ("exponent bits of BF16 weights are the critical ones (NewComputeBench; arXiv 2604.17249: "
     "13 of 16 BF16 bit positions of a KV block give coherent but altered output)", "bits"),
    ("two sign-bit flips collapse an MoE model (arXiv 2502.07408)", "sign"),
    ("random bit flips collapse Qwen2.5-7B in about 3% of trials (arXiv 2603.16382)", "collapse"),
]


def log(msg):
    print(f"[study-llm] {msg}", file=sys.stderr, flush=True)


def build_models(a):
    """Trains (or reuses) the model; writes lm.onnx, lm_kv.onnx and the eval sets."""
    import numpy as np
    import torch
    import lm_models
    import make_lm_models as mk
    from bitflip.safetensors import write_safetensors
    os.makedirs(a.work, exist_ok=True)
    pt = os.path.join(a.work, "lm.pt")
    steps = 150 if a.quick else 600
    lang = mk.Language()
    if a.retrain or not os.path.exists(pt):
        torch.set_num_threads(1)
        t0 = time.time()
        old = mk.TRAIN_STEPS
        mk.TRAIN_STEPS = steps
        model = mk.train(lm_models.LlamaLM, SHAPE, lang, 7, log)
        mk.TRAIN_STEPS = old
        torch.save(model.state_dict(), pt)
        log(f"trained {steps} steps in {time.time() - t0:.0f} s")
    model = lm_models.LlamaLM(**SHAPE).eval()
    model.load_state_dict(torch.load(pt))
    kv = lm_models.LlamaLM(kv_cache=True, **SHAPE).eval()
    kv.load_state_dict(torch.load(pt))
    lm_models.export_lm(model, os.path.join(a.work, "lm.onnx"), opset=17)
    lm_models.export_lm(kv, os.path.join(a.work, "lm_kv.onnx"), opset=17)
    n = 16 if a.quick else 32
    ids, labels = lang.padded_rows(n, SEQ, seed=99)
    write_safetensors(os.path.join(a.work, "eval.safetensors"), {"input_ids": ids, "labels": labels})
    # the KV export: the cache of P tokens before each row, the next T tokens as input
    stream = np.array(lang.stream(n * (2 * SEQ) + 1, seed=98), np.int64)
    rows = stream[: n * 2 * SEQ + 1]
    past_ids = np.stack([rows[i * 2 * SEQ: i * 2 * SEQ + SEQ] for i in range(n)])
    new_ids = np.stack([rows[i * 2 * SEQ + SEQ: i * 2 * SEQ + 2 * SEQ] for i in range(n)])
    new_lab = np.stack([rows[i * 2 * SEQ + SEQ + 1: i * 2 * SEQ + 2 * SEQ + 1] for i in range(n)])
    with torch.no_grad():
        empty = [torch.zeros(n, SHAPE["n_kv_head"], 0, SHAPE["d"] // SHAPE["n_head"]) for _ in range(2 * SHAPE["n_layer"])]
        out = kv(torch.from_numpy(past_ids), *empty)
    feed = {"input_ids": new_ids, "labels": new_lab}
    names = lm_models.io_names(kv)[0][1:]
    for name, t in zip(names, out[1:]):
        feed[name] = t.numpy()
    write_safetensors(os.path.join(a.work, "eval_kv.safetensors"), feed)
    # generation: prompts of PROMPT_LEN tokens from the stream, and a copy of the KV
    # export with every float weight rounded to bf16 (so that a flip of fp32 bit 16 + b
    # is exactly a flip of bf16 bit b)
    g_ids = np.stack([stream[i * 2 * SEQ: i * 2 * SEQ + PROMPT_LEN] for i in range(GEN_PROMPTS)])
    write_safetensors(os.path.join(a.work, "prompts.safetensors"), {"input_ids": g_ids})
    bf16_copy(os.path.join(a.work, "lm_kv.onnx"), os.path.join(a.work, "lm_kv_bf16.onnx"))
    return model


def bf16_copy(src, dst):
    import numpy as np
    import onnx
    from onnx import numpy_helper
    om = onnx.load(src)
    for init in om.graph.initializer:
        if init.data_type != onnx.TensorProto.FLOAT:
            continue
        w = numpy_helper.to_array(init).astype(np.float32)
        u = w.view(np.uint32).astype(np.uint64)
        u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16          # round half to even
        init.CopyFrom(numpy_helper.from_array(u.astype(np.uint32).view(np.float32).reshape(w.shape), init.name))
    onnx.save(om, dst)


def weight_sites(path):
    """(name, elements) of the float initializers a campaign's default selector takes."""
    import numpy as np
    import onnx
    om = onnx.load(path)
    return [(i.name, int(np.prod(i.dims))) for i in om.graph.initializer
            if i.data_type == onnx.TensorProto.FLOAT and int(np.prod(i.dims)) > 1]


def generate(a, model, args):
    cmd = [a.bitflip, "generate", model, os.path.join(a.work, "prompts.safetensors"), "-n", str(GEN_NEW), "--json"] + args
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bitflip generate failed ({r.returncode}): {r.stderr.strip()[:2000]}")
    return json.loads(r.stdout)


def gen_ber(a, reps):
    """Generation match against BER, weights in fp32 and bf16: per trial, each weight bit
    flips with probability rate (the number of flips drawn binomially, the flips placed
    uniformly, seeded), all of a trial's flips in one generation (--together)."""
    import numpy as np
    out = {}
    for label, model, width, base in (("fp32", "lm_kv.onnx", 32, 0), ("bf16", "lm_kv_bf16.onnx", 16, 16)):
        path = os.path.join(a.work, model)
        sites = weight_sites(path)
        sizes = np.array([n for _, n in sites], np.int64)
        total = int(sizes.sum())
        cum = np.cumsum(sizes)
        rng = np.random.default_rng(3030)
        rows = []
        for rate in GEN_RATES[label]:
            matches, firsts, trials = [], [], 0
            for _ in range(reps):
                k = int(rng.binomial(total * width, rate))
                trials += 1
                if k == 0:
                    matches.append(1.0)
                    firsts.append(float(GEN_NEW))
                    continue
                flat = rng.integers(0, total, k)
                bits = rng.integers(0, width, k) + base
                args = ["--together"]
                for f, b in zip(flat, bits):
                    t = int(np.searchsorted(cum, f, side="right"))
                    idx = int(f - (cum[t - 1] if t else 0))
                    args += ["--flip", f"{sites[t][0]}:{idx}:{int(b)}"]
                doc = generate(a, path, args)
                fr = doc["faults"][0]
                matches.append(fr["generation_match"])
                firsts.append(fr["first_divergence"])
            rows.append(dict(rate=rate, bits=total * width, trials=trials, match=mean_ci(matches),
                             first=mean_ci(firsts)))
        out[label] = rows
        log(f"generation BER {label} done")
    return out


def gen_kv_bits(a, per_bit):
    """Single flips per bf16 bit position, in the weights and in the KV cache (one entry,
    all prompts), each its own generation; the bf16-rounded export, fp32 bit 16 + b."""
    import numpy as np
    path = os.path.join(a.work, "lm_kv_bf16.onnx")
    sites = weight_sites(path)
    sizes = np.array([n for _, n in sites], np.int64)
    cum = np.cumsum(sizes)
    rng = np.random.default_rng(3031)
    L, H, D = SHAPE["n_layer"], SHAPE["n_kv_head"], SHAPE["d"] // SHAPE["n_head"]
    wargs, kargs = [], []
    for b in range(16):
        for _ in range(per_bit):
            f = int(rng.integers(0, int(sizes.sum())))
            t = int(np.searchsorted(cum, f, side="right"))
            wargs += ["--flip", f"{sites[t][0]}:{f - (int(cum[t - 1]) if t else 0)}:{16 + b}"]
            # a cached position the prompt wrote (every later step reads it)
            kargs += ["--kv-flip", f"{rng.integers(L)}:{'kv'[rng.integers(2)]}:{rng.integers(H)}:"
                                   f"{rng.integers(PROMPT_LEN)}:{rng.integers(D)}:{16 + b}"]
    res = {}
    for label, args in (("weights", wargs), ("KV cache", kargs)):
        doc = generate(a, path, args)
        rows = []
        for b in range(16):
            fs = doc["faults"][b * per_bit:(b + 1) * per_bit]
            rows.append(dict(bit=b, match=mean_ci([f["generation_match"] for f in fs]),
                             changed=sum(1 for f in fs if f["generation_match"] < 1) / len(fs),
                             nonfinite_like=sum(1 for f in fs if f["generation_match"] == 0) / len(fs)))
        res[label] = rows
    return res


def mean_ci(xs):
    """Mean and a Student-t 95% interval (normal quantile past 30 samples)."""
    import math
    n = len(xs)
    mu = sum(xs) / n
    if n < 2:
        return (mu, mu, mu)
    sd = math.sqrt(sum((x - mu) ** 2 for x in xs) / (n - 1))
    tq = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 8: 2.36, 10: 2.26, 12: 2.20, 16: 2.13, 20: 2.09}.get(n, 2.0)
    h = tq * sd / math.sqrt(n)
    return (mu, mu - h, mu + h)


def run(a, name, spec):
    path = os.path.join(a.work, f"{name}.json")
    spec = dict(spec)
    spec.setdefault("model", os.path.join(a.work, "lm.onnx"))
    spec.setdefault("dataset", os.path.join(a.work, "eval.safetensors"))
    spec.setdefault("seed", 30)
    spec.setdefault("metrics", ["perplexity", "token_accuracy", "top1_mismatch"])
    with open(path, "w") as fh:
        json.dump(spec, fh, indent=1)
    out = path.replace(".json", ".out.json")
    t0 = time.time()
    r = subprocess.run([a.bitflip, "run", "--local", path, "--threads", str(a.threads), "--format", "json", "--out", out],
                       capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"bitflip run {path} failed ({r.returncode}): {r.stderr.strip()}")
    log(f"{name}: {time.time() - t0:.1f} s")
    with open(out) as fh:
        return json.load(fh)


def m(doc, metric, key="mean"):
    v = doc.get("metrics", {}).get(metric, {})
    return v.get(key)


def fmt(x, nd=3):
    if x is None:
        return "–"
    if isinstance(x, float) and (x != x or abs(x) == float("inf")):
        return str(x)
    return f"{x:.{nd}g}" if abs(x) >= 1e4 or (abs(x) < 1e-3 and x != 0) else f"{x:.{nd}f}"


def ci(doc, metric):
    """mean [lo, hi]; a perplexity's Student-t bound below 1 (its minimum) is shown as 1."""
    v = doc.get("metrics", {}).get(metric, {})
    c = v.get("ci")
    if not c:
        return fmt(v.get("mean"))
    lo = c[0]
    if metric == "perplexity" and lo is not None and lo < 1:
        lo = 1.0
    return f"{fmt(v.get('mean'))} [{fmt(lo)}, {fmt(c[1])}]"


def study(a):
    reps = 4 if a.quick else 20
    res = {"ber": {}, "golden": None}
    for label, fields, rates in REPRS:
        doc = run(a, "ber_" + label.replace(" ", "_"),
                  {"faults": dict(fields, model="ber", rates=rates, repeats=reps)})
        res["ber"][label] = doc
        res["golden"] = res["golden"] or doc.get("golden")
    per_bit = run(a, "bits_bf16", {"faults": {"model": "bitflip", "bits": 1, "representation": "bf16"},
                                   "sampling": "per_bit", "trials": 16 * (8 if a.quick else 80)})
    per_tensor = run(a, "tensors_fp32", {"faults": {"model": "bitflip", "bits": 1}, "sampling": "per_tensor",
                                         "trials": 400 if a.quick else 1500})
    n_single = 200 if a.quick else 1500
    weights_bf16 = run(a, "single_weights_bf16", {"faults": {"model": "bitflip", "bits": 1, "representation": "bf16"},
                                                  "trials": n_single})
    kv = run(a, "single_kv_bf16", {"model": os.path.join(a.work, "lm_kv.onnx"),
                                   "dataset": os.path.join(a.work, "eval_kv.safetensors"),
                                   "faults": {"target": "inputs", "tensors": ["past_key_values.*"], "model": "bitflip",
                                              "bits": 1, "representation": "bf16", "persistence": "permanent"},
                                   "trials": n_single})
    mit = run(a, "mitigations_bf16", {"faults": {"model": "ber", "rates": [1e-6, 1e-5, 1e-4], "repeats": reps,
                                                 "representation": "bf16"},
                                      "mitigations": [{"name": "clip", "clip": {"bounds": "profile"}}, "sbp",
                                                      {"name": "abft", "abft": {"mode": "correct"}}]})
    gen = gen_ber(a, 3 if a.quick else 12)
    gen_per_bit = 2 if a.quick else 20
    gen_bits = gen_kv_bits(a, gen_per_bit)
    return dict(res, per_bit=per_bit, per_tensor=per_tensor, weights_bf16=weights_bf16, kv=kv, mit=mit,
                gen=gen, gen_bits=gen_bits, gen_per_bit=gen_per_bit, counts=dict(reps=reps, n_single=n_single))


def pct(x):
    return "–" if x is None else f"{100 * x:.1f}%"


def rate_ci(o):
    """'12.3% [10.1%, 14.6%]' from an outcome entry {rate, ci}."""
    if not o:
        return "–"
    c = o.get("ci")
    return f"{pct(o.get('rate'))} [{pct(c[0])}, {pct(c[1])}]" if c else pct(o.get("rate"))


def mci(t, nd=3):
    return f"{fmt(t[0], nd)} [{fmt(max(t[1], 0.0), nd)}, {fmt(min(t[2], 1.0) if t[0] <= 1 else t[2], nd)}]"


def layer_of(name):
    parts = name.split(".")
    if parts[0] == "layers" and len(parts) > 1:
        return "layer " + parts[1]
    return name


def render(a, r, seconds):
    g = r["golden"] or {}
    gm = g.get("metrics", g)
    c = r["counts"]
    out = ["# Language models under bit flips", "",
           f"Written by `make study-llm` (study/llm/run_study.py{' --quick' if a.quick else ''}) "
           f"in {seconds / 60:.0f} min on {a.threads} threads of a shared 2-core machine. Everything is seeded; "
           "rerunning gives the same tables.", "",
           "**The model.** A Llama-style decoder (%(n_layer)d layers, width %(d)d, %(n_head)d heads over %(n_kv_head)d "
           "key/value heads by `expand`, rotate-half RoPE, RMSNorm, SwiGLU %(hidden)d, vocabulary %(vocab)d, "
           "%(params)s parameters) trained for %(steps)d Adam steps on the synthetic sentence grammar of "
           "tests/fixtures/make_lm_models.py, so that its predictions are sharp. Evaluated on %(n)d sequences of %(seq)d "
           "tokens: golden perplexity %(ppl)s, token accuracy %(acc)s (the grammar's own entropy bounds both). "
           "Generations: %(gp)d prompts of %(pl)d tokens, %(gn)d greedy tokens each, through the KV-cache export." % dict(
               SHAPE, seq=SEQ, ppl=fmt(gm.get("perplexity")), acc=fmt(gm.get("token_accuracy")),
               params=f"{r['params']:,}", steps=r["steps"], n=r["n_eval"], gp=GEN_PROMPTS, pl=PROMPT_LEN, gn=GEN_NEW), "",
           "**Outcomes** (docs/CAMPAIGNS.md): *critical* = the arg-max changed at some labelled position of some "
           "sequence; *DUE* = NaN/Inf logits or perplexity. Intervals are 95%: Wilson for rates, Student-t for means.", ""]
    out += ["## Findings", ""] + summary(r) + ["", "## Perplexity against the bit error rate", "",
            f"Each weight bit (as stored in the format) flips with probability BER; {c['reps']} trials per rate. "
            "int8: symmetric, one scale per output channel; int4: one fp16 scale per 32 weights along the input "
            "dimension (the GPTQ/AWQ layout), faults in the 4-bit codes. Perplexity is the mean over the trials whose "
            "perplexity is finite (a lower bound where it hits the cap, see docs/CAMPAIGNS.md).", "",
            "| format | BER | flips / trial | perplexity [95% CI] | token accuracy [95% CI] | critical | DUE |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for label, doc in r["ber"].items():
        bits = sum(s_.get("elements", 0) * s_.get("bits", 0) for s_ in doc.get("campaign", {}).get("sites", []))
        for g_ in doc.get("by_rate", []):
            out.append(f"| {label} | {g_['rate']:.0e} | {fmt(bits * g_['rate'], 2) if bits else '–'} | "
                       f"{ci(g_, 'perplexity')} | {ci(g_, 'token_accuracy')} | "
                       f"{pct(g_.get('rates', g_).get('critical', {}).get('rate'))} | "
                       f"{pct(g_.get('rates', g_).get('due', {}).get('rate'))} |")
    out += ["", "## Generation match against the bit error rate", "",
            f"Share of the {GEN_PROMPTS} prompts whose {GEN_NEW} greedy tokens all equal the fault-free generation's, "
            "and the mean position of the first changed token; mean over the trials with a Student-t interval. The "
            "flips of a trial are drawn by the study (seeded: binomial count, uniform places over every float weight) "
            "and passed to `bitflip generate --together`. fp32 and bf16 only: `bitflip generate` runs fp32 weights, "
            "and bf16 is exact on a copy whose weights are rounded to bf16 (a flip of fp32 bit 16+b is a flip of "
            "bf16 bit b); for fp16, int8 and int4 the perplexity table above is the measurement.", "",
            "| format | BER | flips / trial | trials | generation match [95% CI] | first divergence [95% CI] |",
            "|---|---:|---:|---:|---:|---:|"]
    for label, rows in r["gen"].items():
        for row in rows:
            out.append(f"| {label} | {row['rate']:.0e} | {fmt(row['bits'] * row['rate'], 2)} | {row['trials']} | "
                       f"{mci(row['match'])} | {fmt(row['first'][0], 2)} [{fmt(max(row['first'][1], 0.0), 2)}, "
                       f"{fmt(min(row['first'][2], float(GEN_NEW)), 2)}] |")
    pb = sorted(r["per_bit"].get("by_bit", []), key=lambda b: -b["bit"])
    out += ["", "## The most vulnerable bits", "",
            "Single bit flips in bf16 weights, equal trials per bit position (perplexity, `sampling: per_bit`), and in "
            "generation: single flips per bf16 bit in a uniformly chosen weight and in one KV-cache entry (a cached "
            "key or value of a prompt position, read by every later step), the share of flips that changed at least "
            "one prompt's generation.", "",
            "| bit | field | trials | critical (perplexity eval) | DUE | generation changed: weight flip | "
            "generation changed: KV-cache flip |", "|---:|---|---:|---:|---:|---:|---:|"]
    gw = {row["bit"]: row for row in r["gen_bits"]["weights"]}
    gk = {row["bit"]: row for row in r["gen_bits"]["KV cache"]}
    for b in pb:
        field = "sign" if b["bit"] == 15 else "exponent" if b["bit"] >= 7 else "mantissa"
        out.append(f"| {b['bit']} | {field} | {b['trials']} | {rate_ci(b.get('critical'))} | "
                   f"{pct(b.get('due', {}).get('rate'))} | {pct(gw[b['bit']]['changed'])} | {pct(gk[b['bit']]['changed'])} |")
    out += ["", f"(generation columns: {r['gen_per_bit']} flips per bit each.)", ""]
    tens = r["per_tensor"].get("by_tensor", [])
    layers = {}
    for t in tens:
        k = layer_of(t.get("torch_name", t["tensor"]))
        e = layers.setdefault(k, [0, 0, 0])
        e[0] += t["trials"]
        e[1] += t.get("outcomes", {}).get("critical", 0)
        e[2] += t.get("outcomes", {}).get("due", 0)
    out += ["## The most vulnerable tensors and layers", "",
            f"Single bit flips in fp32 weights, uniform bit, equal trials per tensor ({r['per_tensor']['summary']['trials']} "
            "in all). The twelve tensors with the highest critical + DUE share:", "",
            "| tensor | trials | critical [95% CI] | DUE |", "|---|---:|---:|---:|"]
    for t in sorted(tens, key=lambda t: -(t["critical"]["rate"] + t["due"]["rate"]))[:12]:
        out.append(f"| {t.get('torch_name', t['tensor'])} | {t['trials']} | {rate_ci(t.get('critical'))} | "
                   f"{pct(t['due']['rate'])} |")
    out += ["", "Per layer (the tensors of a block pooled; equal trials per tensor, so a layer's share weighs its "
            "tensors equally, not by size):", "", "| layer / tensor | trials | critical | DUE |", "|---|---:|---:|---:|"]
    for k, (n, cr, du) in sorted(layers.items(), key=lambda kv: kv[0]):
        out.append(f"| {k} | {n} | {pct(cr / n if n else None)} | {pct(du / n if n else None)} |")
    out += ["", "## KV-cache faults against weight faults", "",
            f"One bf16 bit flip a trial, {c['n_single']} trials each, uniform over the bits: in the weights, or in the "
            f"cached keys and values of the KV export (its `past_key_values.*` inputs: a {SEQ}-token past, computed "
            f"fault-free, then {SEQ} new tokens scored; a flipped cache entry is read by every new token).", "",
            "| where | trials | masked | critical [95% CI] | DUE | perplexity [95% CI] |", "|---|---:|---:|---:|---:|---:|"]
    for label, doc in (("weights", r["weights_bf16"]), ("KV cache (past keys and values)", r["kv"])):
        s = doc["summary"]
        out.append(f"| {label} | {s['trials']} | {pct(s['rates']['masked']['rate'])} | {rate_ci(s['rates']['critical'])} | "
                   f"{pct(s['rates']['due']['rate'])} | {ci(s, 'perplexity')} |")
    gol = r["kv"].get("golden", {})
    gol = gol.get("metrics", gol)
    out += ["", f"(golden of the KV set: perplexity {fmt(gol.get('perplexity'))}, token accuracy "
            f"{fmt(gol.get('token_accuracy'))}.)", ""]
    out += ["## What the protections recover", "",
            f"The bf16 BER sweep, {c['reps']} trials per rate, the same faults for every configuration: `clip` clamps "
            "every MatMul output to the golden pass's min/max (a profile), `sbp` corrects the sign and exponent bits "
            "(15-7) of every weight (ECC on 9 of 16 bits), `abft` checks the matmuls by a weight with checksums and "
            "corrects a single wrong output column, else recomputes, else flags the trial DUE. Recovery is on token "
            "accuracy: (mitigated - faulty) / (golden - faulty), 1 = everything back, with a paired-bootstrap 95% "
            "interval; a DUE trial counts as recovered (re-executed), so read it with the DUE share.", "",
            "| configuration | BER | token accuracy | perplexity | recovery [95% CI] | critical | DUE |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for mm in r["mit"].get("mitigations", []):
        for g_ in mm.get("summary", {}).get("by_rate", mm.get("by_rate", [])):
            rec = g_.get("recovery")
            rtxt = "–"
            if isinstance(rec, dict) and rec.get("value") is not None:
                rtxt = f"{fmt(rec['value'], 2)}" + (f" [{fmt(rec['ci'][0], 2)}, {fmt(rec['ci'][1], 2)}]" if rec.get("ci") else "")
            elif isinstance(rec, (int, float)):
                rtxt = fmt(rec, 2)
            out.append(f"| `{mm.get('name')}` | {g_['rate']:.0e} | {ci(g_, 'token_accuracy')} | {fmt(m(g_, 'perplexity'))} | "
                       f"{rtxt} | {pct(g_.get('rates', g_).get('critical', {}).get('rate'))} | "
                       f"{pct(g_.get('rates', g_).get('due', {}).get('rate'))} |")
    out += ["", "## Beside the published findings", ""]
    out += findings(r)
    return "\n".join(out) + "\n"


def onset(doc, golden_acc, drop=0.01):
    """The lowest swept BER whose mean token accuracy is below golden by more than drop."""
    for g_ in doc.get("by_rate", []):
        acc = g_.get("metrics", {}).get("token_accuracy", {}).get("mean")
        if acc is not None and acc < golden_acc - drop:
            return g_["rate"]
    return None


def bit_bad(r, bit):
    for b in r["per_bit"].get("by_bit", []):
        if b["bit"] == bit:
            return b["critical"]["rate"] + b["due"]["rate"]
    return 0.0


def summary(r):
    """The headline numbers, each from a table below."""
    g = r["golden"] or {}
    gacc = g.get("metrics", g).get("token_accuracy", 0.0)
    ons = {label: onset(doc, gacc) for label, doc in r["ber"].items()}
    otxt = ", ".join(f"{label} {'%.0e' % o if o else 'beyond the sweep'}" for label, o in ons.items())
    tens = r["per_tensor"].get("by_tensor", [])
    worst = max(tens, key=lambda t: t["critical"]["rate"] + t["due"]["rate"]) if tens else None
    norms = [t for t in tens if "norm" in t.get("torch_name", t["tensor"])]
    mats = [t for t in tens if "proj" in t.get("torch_name", t["tensor"])]

    def share(ts):
        n = sum(t["trials"] for t in ts)
        return (sum(t["outcomes"].get("critical", 0) + t["outcomes"].get("due", 0) for t in ts) / n) if n else None
    recs = {}
    for mm in r["mit"].get("mitigations", []):
        vals = [g_["recovery"]["value"] for g_ in mm.get("by_rate", [])
                if isinstance(g_.get("recovery"), dict) and g_["recovery"].get("value") is not None]
        dues = [g_["due"]["rate"] for g_ in mm.get("by_rate", [])]
        recs[mm.get("name")] = (min(vals) if vals else None, max(dues) if dues else None)
    ws, ks = r["weights_bf16"]["summary"], r["kv"]["summary"]
    L = [f"- **Formats.** Token accuracy first drops by more than 0.01 at BER {otxt}. The float formats fail "
         "through their exponents (a flipped top exponent bit makes a weight ~2^128 or Inf), so bf16 and fp16 "
         "break at about the same bit error rate as fp32; int8 and int4 have no exponent, a flipped bit "
         "moves a weight by at most its quantization range, and they keep their perplexity at rates where every "
         "float format has collapsed (their *critical* share still rises, since one changed arg-max among "
         f"{r['n_eval'] * SEQ} positions counts).",
         f"- **Bits.** In bf16, bit 14 (the exponent's top bit) is critical or DUE in {pct(bit_bad(r, 14))} of "
         f"single flips, the other exponent bits (7-13) in {pct(sum(bit_bad(r, b) for b in range(7, 14)) / 7)} on "
         f"average, the mantissa bits (0-6) in {pct(sum(bit_bad(r, b) for b in range(7)) / 7)}, the sign in "
         f"{pct(bit_bad(r, 15))} (table below).",
         f"- **Tensors.** The most vulnerable tensor is `{worst.get('torch_name', worst['tensor']) if worst else '–'}`; "
         f"a flipped bit in an RMSNorm gain (which scales one channel of every token) is critical or DUE in "
         f"{pct(share(norms))} of trials, in a projection matrix in {pct(share(mats))}. The layers differ little.",
         f"- **KV cache against weights.** One flipped bf16 bit in the cached keys/values is critical in "
         f"{pct(ks['rates']['critical']['rate'])} of trials, in the weights {pct(ws['rates']['critical']['rate'])}: "
         "a cache entry is a larger share of what the scored tokens read than one weight of 156k, but a weight flip "
         f"that matters costs more perplexity (mean {fmt(m(ws, 'perplexity'))} against {fmt(m(ks, 'perplexity'))}).",
         f"- **Protections** (bf16 sweep). `sbp` recovers at least {fmt(recs.get('sbp', (None,))[0], 2)} at every rate "
         f"(DUE at most {pct(recs.get('sbp', (None, None))[1])}); `clip` at least {fmt(recs.get('clip', (None,))[0], 2)}; `abft` recovers "
         f"{fmt(recs.get('abft', (None,))[0], 2)} but by flagging up to {pct(recs.get('abft', (None, None))[1])} "
         "of the trials DUE (a re-execution each): at tens of flips per trial some checked matmul is always hit."]
    return L


def findings(r):
    """The comparison with the published findings the issue quotes, from the measured numbers."""
    pb = {b["bit"]: b for b in r["per_bit"].get("by_bit", [])}

    def bad(b):
        return b["critical"]["rate"] + b["due"]["rate"] if b else 0.0
    exp_bits = [bad(pb.get(b)) for b in range(7, 15)]
    man_bits = [bad(pb.get(b)) for b in range(0, 7)]
    sign = bad(pb.get(15))
    kv_bits = sum(1 for row in r["gen_bits"]["KV cache"] if row["changed"] > 0)
    w_bits = sum(1 for row in r["gen_bits"]["weights"] if row["changed"] > 0)
    top_exp = max(range(7, 15), key=lambda b: bad(pb.get(b)))
    ws, ks = r["weights_bf16"]["summary"], r["kv"]["summary"]
    L = []
    L.append(f"- **\"The exponent bits of BF16 weights are the critical ones\"** (NewComputeBench). *Agrees.* A single "
             f"flip in a bf16 exponent bit is critical or DUE in {pct(sum(exp_bits) / len(exp_bits))} of trials on "
             f"average (bits 7-14; the worst, bit {top_exp}, {pct(bad(pb.get(top_exp)))}), a mantissa bit in "
             f"{pct(sum(man_bits) / len(man_bits))} (bits 0-6). The effect is concentrated in the top exponent bit(s), "
             "which turn a weight of magnitude below 2 into one near 2^128 or Inf; the lower exponent bits of a "
             "weight below 2 in magnitude are mostly ones, and flipping one of those divides the weight by 2 to 2^64, "
             "towards zero, which the model mostly tolerates as it would a pruned weight. That is the arithmetic of the format, "
             "so a synthetic-language model can confirm it; what it cannot tell is how often such a change moves a "
             "large model's answers on real tasks.")
    L.append(f"- **\"13 of 16 BF16 bit positions of a KV block give coherent but altered output\"** (arXiv 2604.17249). "
             f"*{'Agrees' if kv_bits >= 11 else 'Fewer here'}.* A single flip in one cached key or value changed some "
             f"prompt's generation at {kv_bits} of 16 bit "
             f"positions ({r['gen_per_bit']} flips per position), against {w_bits} of 16 for a flip in a weight. "
             f"Over whole eval sets a KV-cache flip is critical in {pct(ks['rates']['critical']['rate'])} of trials, "
             f"a weight flip in {pct(ws['rates']['critical']['rate'])}. The published block is reused by every request "
             "that shares the prefix, and each of its entries is read by thousands of later tokens; here one entry is "
             "read by the 16-32 tokens after it in one sequence, so the count of positions that matter is the "
             "comparable part, not its value; and our model's predictions are sharp (a grammar with few choices), "
             "so a low-bit change of one entry rarely moves a greedy arg-max. Whether the altered output stays *coherent* needs a language with "
             "meaning: our grammar only says whether tokens changed.")
    L.append(f"- **\"Two sign-bit flips take an MoE model from 78% to 0%\"** (arXiv 2502.07408). *Cannot tell.* The study "
             "model is dense (the MoE fixtures of tests/fixtures/lm are too small to train to sharp predictions in "
             f"minutes), and the published flips were chosen by a search, not drawn at random. A random sign flip in "
             f"bf16 here is critical or DUE in {pct(sign)} of trials: a sign flip keeps the magnitude, so it takes a "
             "large weight in the right place, which random sampling rarely hits.")
    wd, wc = ws["rates"]["due"]["rate"], ws["rates"]["critical"]["rate"]
    verdict = ("*The same order of magnitude*" if 0.003 <= wd + wc <= 0.3 else "*Not comparable in size*")
    L.append(f"- **\"Random bit flips collapse Qwen2.5-7B in about 3% of trials\"** (arXiv 2603.16382). {verdict}: one "
             f"random bf16 weight flip here gives NaN/Inf (DUE) in {pct(wd)} of trials and changes some prediction "
             f"(critical) in {pct(wc)}. A 7B model has 50,000 times more weights for one flip to land in, "
             "but also 50,000 times more bits to flip at the same rate, and its collapse criterion (task accuracy) "
             "is not ours; what carries over is that the damage comes from the few flips that hit a high exponent bit.")
    L += ["", "**What a synthetic-language model cannot tell.** The study model is trained for minutes on a grammar "
          "with 64 tokens; its perplexity and token accuracy are measured against that grammar, not a benchmark. "
          "It tells which bits, formats and tensors matter and how the onset moves between formats, which follow "
          "from the number formats and the architecture; it cannot give absolute task-accuracy losses, the "
          "coherence of altered text, or effects of scale (outlier features, long contexts, many experts)."]
    return L


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bitflip", default=os.path.join(REPO, "build", "bitflip"))
    ap.add_argument("--work", default=os.path.join(REPO, "build", "study", "llm"))
    ap.add_argument("--doc")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="a short training and few trials (the test suite's)")
    ap.add_argument("--retrain", action="store_true")
    a = ap.parse_args()
    t0 = time.time()
    model = build_models(a)
    r = study(a)
    r["params"] = sum(p.numel() for p in model.parameters())
    r["steps"] = 150 if a.quick else 600
    r["n_eval"] = 16 if a.quick else 32
    text = render(a, r, time.time() - t0)
    if a.doc:
        os.makedirs(os.path.dirname(os.path.abspath(a.doc)), exist_ok=True)
        with open(a.doc, "w") as fh:
            fh.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
