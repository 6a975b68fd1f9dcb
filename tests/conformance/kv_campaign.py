#!/usr/bin/python3
"""ctest conformance_kv_campaign: campaigns with "target": "kv_cache" on the
GPT-2 and Llama fixtures of tests/fixtures/lm (no-cache exports and
past_key_values exports) and a Mixtral-style MoE (Llama attention) against
PyTorch.

Each fixture's PyTorch model (tests/fixtures/lm_models.py, built as
make_lm_models.py's FIXTURES say) gets the ONNX file's weights (an
initializer is its parameter by name, or a constant-folded `onnx::MatMul_*`
is the transposed weight of the Linear its MatMul node is named after). A
seeded uniform campaign and a listed one run with `bitflip run --local`; for
every trial record the same fault is injected in PyTorch, in the KV cache as
the model holds it (GPT-2: the k or v that `attend` receives, after the
past is concatenated; Llama: the k or v `repeat_kv` receives, after RoPE and
before the grouped-query repetition), at the record's layer, kind, sample,
head, position and dim, and:

- the record's `old` value is PyTorch's value of that entry (so the entry
  named is the entry faulted: a wrong head, position or dim reads another);
- the record's perplexity and token accuracy are PyTorch's with the flip
  (perplexity to 1e-4 relative, both non-finite alike; token accuracy equal
  but for at most one labelled position, a near tie another SIMD path could
  round the other way);
- a listed fault's element index is the one hand arithmetic gives from the
  value's shape ([N, T, heads*D] for GPT-2's projection, [N, H_kv, P+T, D]
  for a present), and its record names that entry back.

usage: kv_campaign.py BITFLIP FIXTURES_DIR
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
import lm_models  # noqa: E402
import make_lm_models  # noqa: E402
from bitflip.safetensors import read_safetensors  # noqa: E402

FIXTURES = ["lm_gpt2_op14", "lm_gpt2_kv_op15", "lm_llama_half_ri_triu_op15", "lm_llama_il_expand_buf_op16",
            "lm_llama_kv_op17", "lm_moe_scatter_op14"]
TRIALS = 12
BITS = [22, 25, 27, 29, 30, 31]
failures = []


def check(ok, msg):
    if not ok:
        failures.append(msg)
        print("FAIL:", msg)


def load_model(name, fix):
    cls, kw, _opset, _key, kv, _what = make_lm_models.FIXTURES[name]
    model = cls(kv_cache=kv, **kw).eval()
    om = onnx.load(os.path.join(fix, name + ".onnx"))
    readers = {}
    for n in om.graph.node:
        for i in n.input:
            readers.setdefault(i, n)
    params = dict(model.named_parameters())
    done = set()
    with torch.no_grad():
        for init in om.graph.initializer:
            a = numpy_helper.to_array(init)
            if init.name in params:
                pname, val = init.name, a
            elif init.name.startswith("onnx::MatMul") and init.name in readers:
                path = readers[init.name].name.strip("/").rsplit("/", 1)[0]
                pname, val = path.replace("/", ".") + ".weight", a.T
            else:
                continue
            if pname in params and tuple(params[pname].shape) == val.shape:
                params[pname].copy_(torch.from_numpy(np.ascontiguousarray(val)))
                done.add(pname)
    missing = set(params) - done
    if missing:
        sys.exit(f"{name}: no initializer for {sorted(missing)}")
    return model, kv


def flip(x, bit):
    (u,) = struct.unpack("<I", struct.pack("<f", float(x)))
    return struct.unpack("<f", struct.pack("<I", u ^ (1 << bit)))[0]


class Fault:
    """Flips `bit` of cache entry [sample, head, pos, dim] of (layer, kind) as
    the attention reads it, and keeps the value found there."""

    def __init__(self, layer, kind, sample, head, pos, dim, bit):
        self.at = (layer, kind)
        self.idx = (sample, head, pos, dim)
        self.bit = bit
        self.old = None

    def apply(self, layer, kind, t):
        if (layer, kind) != self.at:
            return t
        t = t.clone()
        self.old = float(t[self.idx])
        if self.bit is not None:
            t[self.idx] = flip(self.old, self.bit)
        return t


def run_torch(model, inputs, fault):
    """Logits with the fault patched into lm_models' attend (GPT-2) or
    repeat_kv (Llama), whichever receives the cache."""
    calls = {"attend": 0, "repeat": 0}
    attend, repeat_kv = lm_models.attend, lm_models.repeat_kv
    gpt2 = isinstance(model, lm_models.GPT2LM)

    def my_attend(q, k, v, masked, how):
        if gpt2:
            layer = calls["attend"]
            calls["attend"] += 1
            k, v = fault.apply(layer, "k", k), fault.apply(layer, "v", v)
        return attend(q, k, v, masked, how)

    def my_repeat(x, n_rep, form):
        c = calls["repeat"]
        calls["repeat"] += 1
        return repeat_kv(fault.apply(c // 2, "kv"[c % 2], x), n_rep, form)

    lm_models.attend, lm_models.repeat_kv = my_attend, my_repeat
    try:
        with torch.no_grad():
            out = model(*inputs)
    finally:
        lm_models.attend, lm_models.repeat_kv = attend, repeat_kv
    return out[0] if isinstance(out, tuple) else out


def close(a, b, rtol):
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return (a is None or not math.isfinite(a)) == (b is None or not math.isfinite(b))
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1e-6)


def num(v):
    return float("nan") if isinstance(v, str) else v


def campaign(bitflip, fix, name, faults, sampling, trials, tmp, tag):
    spec = {"model": os.path.join(fix, name + ".onnx"), "dataset": os.path.join(fix, name + ".eval.safetensors"),
            "seed": 11, "faults": faults, "metrics": ["perplexity", "token_accuracy"]}
    if sampling is not None:
        spec["sampling"] = sampling
    else:
        spec["trials"] = trials
    path = os.path.join(tmp, name + tag + ".json")
    recs = os.path.join(tmp, name + tag + ".trials")
    json.dump(spec, open(path, "w"))
    p = subprocess.run([bitflip, "run", "--local", "--threads", "1", "--format", "json", "--trials-out", recs, path],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{name}: bitflip run failed ({p.returncode}): {p.stderr}")
    return [json.loads(line) for line in open(recs)]


def compare(name, model, inputs, labels, rec):
    f = rec["faults"][0]
    fault = Fault(f["layer"], f["kind"], f["sample"], f["head"], f["position"], f["dim"], f["bits"][0])
    logits = run_torch(model, inputs, fault)
    ppl, acc = make_lm_models.lm_metrics(logits, labels)
    where = (f"{name} trial {rec['trial']}: {f['site']} sample {f['sample']} head {f['head']} pos {f['position']} "
             f"dim {f['dim']} bit {f['bits'][0]}")
    check(fault.old is not None and close(fault.old, f["old"], 1e-4),
          f"{where}: old value {f['old']} in bitflip, {fault.old} in PyTorch")
    m = rec["metrics"]
    check(close(num(m.get("perplexity")), ppl, 1e-4), f"{where}: perplexity {m.get('perplexity')} vs PyTorch {ppl}")
    if acc is not None and "token_accuracy" in m:
        # equal, but for one position whose top two logits tie to rounding (another SIMD path)
        n_labels = int((labels != -100).sum())
        check(abs(num(m["token_accuracy"]) - acc) <= 1.0 / n_labels + 1e-9,
              f"{where}: token accuracy {m['token_accuracy']} vs PyTorch {acc}")


def main():
    bitflip, fix = sys.argv[1], os.path.join(sys.argv[2], "lm")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        for name in FIXTURES:
            model, kv = load_model(name, fix)
            ev = read_safetensors(os.path.join(fix, name + ".eval.safetensors"))
            ids = torch.from_numpy(np.asarray(ev["input_ids"]))
            labels = torch.from_numpy(np.asarray(ev["labels"]))
            past = []
            for i in range(len(model.h) if hasattr(model, "h") else len(model.layers)):
                if kv:
                    past += [torch.from_numpy(np.asarray(ev[f"past_key_values.{i}.{w}"])) for w in ("key", "value")]
            inputs = [ids] + past
            t = ids.shape[1]
            p_len = past[0].shape[2] if kv else 0
            # seeded: a few heads and positions (past ones too), every layer and kind
            positions = [0, 2, p_len + 1, p_len + t - 1] if kv else [0, 3, t // 2, t - 1]
            recs = campaign(bitflip, fix, name, {"target": "kv_cache", "positions": BITS,
                                                  "kv": {"heads": [1], "positions": sorted(set(positions))}},
                            None, TRIALS, tmp, "")
            check(len(recs) == TRIALS, f"{name}: {len(recs)} records")
            for rec in recs:
                f = rec["faults"][0]
                check(f["head"] == 1 and f["position"] in positions, f"{name}: record outside the filters: {f}")
                compare(name, model, inputs, labels, rec)
            # listed: the element index by hand from the value's shape
            n_head = model.n_kv_head
            d = model.head_dim()
            entries = [(0, "k", 3, 1, 2, 5, 30), (1, "v", 7, 0, t - 1, d - 1, 27)]
            lst = []
            for layer, kind, sample, head, pos, dim, bit in entries:
                if kv:                                                  # present: [N, H_kv, P+T, D]
                    index = (head * (p_len + t) + pos) * d + dim
                elif kind == "v" or isinstance(model, lm_models.GPT2LM):
                    index = pos * (n_head * d) + head * d + dim          # a projection: [N, T, H_kv*D]
                else:
                    index = (head * t + pos) * d + dim                   # RoPE's output: [N, H_kv, T, D]
                lst.append({"tensor": f"{kind}_cache.{layer}", "index": index, "bit": bit, "sample": sample})
            if lst:
                recs = campaign(bitflip, fix, name, {"target": "kv_cache"}, {"list": lst}, None, tmp, ".list")
                check(len(recs) == len(lst), f"{name}: {len(recs)} list records")
                for rec, (layer, kind, sample, head, pos, dim, bit) in zip(recs, entries):
                    f = rec["faults"][0]
                    got = (f["layer"], f["kind"], f["sample"], f["head"], f["position"], f["dim"], f["bits"][0])
                    check(got == (layer, kind, sample, head, pos, dim, bit), f"{name}: list entry {got}, wanted "
                          f"{(layer, kind, sample, head, pos, dim, bit)}")
                    compare(name, model, inputs, labels, rec)
            print(f"{name}: {TRIALS} seeded and {len(lst)} listed kv_cache faults checked against PyTorch")
    if failures:
        sys.exit(f"{len(failures)} failures")
    print("ok")


if __name__ == "__main__":
    main()
