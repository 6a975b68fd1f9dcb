#!/usr/bin/python3
"""ctest conformance_fault_groups_torch: a two-group campaign (docs/CAMPAIGNS.md,
"Fault groups") on a real PyTorch export, replayed in PyTorch.

A small plain-PyTorch CNN (two Conv2d + ReLU, average pooling, a Linear head;
seeded, no pretrained weights) is exported with torch.onnx.export at opset
13, with an eval set of a few random images whose labels are the model's own
predictions. `bitflip run --local` runs a campaign whose faults are two
groups: a weight BER (group 0) and transient single-bit flips in the
activations (group 1: the convolutions' and ReLUs' outputs). For each trial
whose every fault its record keeps, PyTorch replays the record on its own:

- every group-0 fault: the parameter named by the record's `tensor` (its
  PyTorch name) at the flat `index` must hold the record's `old` value bit for
  bit, and is set to that value with the record's `bits` flipped, which must
  be the record's `new`;
- every group-1 fault: a forward hook on the module the ONNX value came from
  (`/conv1/Conv_output_0` is module conv1's output) flips the record's `bits`
  of element `index` of sample `sample` in the value PyTorch computed there
  (with the weight faults in place); that value must be the record's `old` to
  1e-4 relative (PyTorch and bitflip sum convolutions in different orders);
- the outputs with every fault in place must give the record's outcome:
  `due` iff an output is NaN or Inf; otherwise the samples whose arg-max
  differs from the golden pass's are the record's `changed_predictions`, so
  `critical` iff there is one; `masked` only where PyTorch's outputs moved
  by at most 1e-5 of their scale (bitflip's were bit-identical).

Records must include both groups' faults, and at least a few trials must be
replayed (each one checks both groups).

usage: fault_groups_torch.py BITFLIP WORKDIR
"""
import json
import os
import subprocess
import sys

import numpy as np

try:
    import torch
    import torch.nn as nn
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
from bitflip.safetensors import save_eval_set  # noqa: E402

SAMPLES = 24
TRIALS = 40
failures = []


def check(ok, msg):
    if not ok:
        failures.append(msg)
        print("FAIL:", msg)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 3, padding=1)
        self.act1 = nn.ReLU()
        self.conv2 = nn.Conv2d(6, 8, 3, stride=2, padding=1)
        self.act2 = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.act1(self.conv1(x))
        x = self.act2(self.conv2(x))
        return self.fc(torch.flatten(self.pool(x), 1))


def f32_bits(x):
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


def bits_f32(u):
    return float(np.array([u], dtype=np.uint32).view(np.float32)[0])


def flip(x, bits):
    u = f32_bits(x)
    for b in bits:
        u ^= 1 << b
    return bits_f32(u)


def same_f32(a, b):
    return f32_bits(a) == f32_bits(b) or (np.isnan(a) and np.isnan(b))


def replay(model, x, golden, rec, params, modules):
    """Applies rec's faults in PyTorch; returns the outputs (weights restored after)."""
    saved = []
    hooks = []
    by_module = {}
    for f in rec["faults"]:
        if f["group"] == 0:
            p = params[f["tensor"]]
            flat = p.data.view(-1)
            old = float(flat[f["index"]])
            check(same_f32(old, f["old"]), f"trial {rec['trial']}: {f['tensor']}[{f['index']}] holds {old!r}, "
                  f"the record says {f['old']!r}")
            new = flip(old, f["bits"])
            check(same_f32(new, f["new"]), f"trial {rec['trial']}: {f['tensor']}[{f['index']}] flipped is {new!r}, "
                  f"the record says {f['new']!r}")
            saved.append((flat, f["index"], flat[f["index"]].clone()))
            flat[f["index"]] = new
        else:
            name = f["tensor"].split("/")[1]   # "/conv1/Conv_output_0" -> conv1
            by_module.setdefault(name, []).append(f)

    def hook_for(faults):
        def hook(_mod, _inp, out):
            out = out.clone()
            for f in faults:
                v = out[f["sample"]].reshape(-1)
                old = float(v[f["index"]])
                tol = 1e-4 * max(abs(old), abs(f["old"])) + 1e-6
                check(abs(old - f["old"]) <= tol, f"trial {rec['trial']}: {f['tensor']} sample {f['sample']} "
                      f"[{f['index']}] is {old!r} in PyTorch, the record says {f['old']!r}")
                v[f["index"]] = flip(old, f["bits"])
            return out
        return hook

    for name, faults in by_module.items():
        hooks.append(modules[name].register_forward_hook(hook_for(faults)))
    try:
        with torch.no_grad():
            out = model(x)
    finally:
        for h in hooks:
            h.remove()
        for flat, i, v in saved:
            flat[i] = v
    return out


def main():
    bitflip, work = sys.argv[1:3]
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    model = SmallCNN().eval()
    x = torch.randn(SAMPLES, 1, 12, 12)
    with torch.no_grad():
        golden = model(x)
    labels = golden.argmax(1)
    onnx_path = os.path.join(work, "small_cnn.onnx")
    torch.onnx.export(model, x[:1], onnx_path, opset_version=13, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "n"}, "logits": {0: "n"}})
    eval_path = save_eval_set(os.path.join(work, "small_cnn.eval.safetensors"), x.numpy(), labels.numpy(),
                              input_names=["x"])
    n_params = sum(p.numel() for p in model.parameters())
    spec = {"model": onnx_path, "dataset": eval_path, "seed": 3,
            "faults": [{"model": "ber", "rates": [3.0 / (32 * n_params)], "repeats": TRIALS},
                       {"target": "activations", "persistence": "transient",
                        "tensors": ["/conv1/Conv_output_0", "/act1/Relu_output_0", "/conv2/Conv_output_0",
                                    "/act2/Relu_output_0"], "positions": [22, 27, 29, 30]}]}
    spec_path = os.path.join(work, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    trials_path = os.path.join(work, "trials.jsonl")
    subprocess.run([bitflip, "run", "--local", "--threads", "2", "--format", "json", "--out", os.path.join(work, "result.json"),
                    "--trials-out", trials_path, spec_path], check=True, stdout=subprocess.DEVNULL)
    with open(trials_path) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    check(len(recs) == TRIALS, f"{len(recs)} records, {TRIALS} trials")

    params = dict(model.named_parameters())
    modules = dict(model.named_modules())
    scale = float(golden.abs().max())
    replayed = with_weights = 0
    outcomes = {}
    for rec in recs:
        groups = [f["group"] for f in rec["faults"]]
        check(1 in groups, f"trial {rec['trial']}: no group-1 fault in its record")
        if rec["n_faults"] != len(rec["faults"]):
            continue   # a fault the record does not keep: not replayable
        out = replay(model, x, golden, rec, params, modules)
        replayed += 1
        with_weights += 0 in groups
        finite = bool(torch.isfinite(out).all())
        outcome = rec["outcome"]
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        check((outcome == "due") == (not finite), f"trial {rec['trial']}: {outcome}, PyTorch's outputs finite: {finite}")
        if not finite:
            continue
        changed = int((out.argmax(1) != golden.argmax(1)).sum())
        check(changed == rec["changed_predictions"], f"trial {rec['trial']}: {changed} predictions changed in PyTorch, "
              f"the record says {rec['changed_predictions']}")
        check((outcome == "critical") == (changed > 0), f"trial {rec['trial']}: {outcome} with {changed} changed")
        moved = float((out - golden).abs().max())
        if outcome == "masked":
            check(moved <= 1e-5 * scale, f"trial {rec['trial']}: masked, but PyTorch's outputs moved {moved}")
    print(f"replayed {replayed} of {len(recs)} trials ({with_weights} with weight faults): {outcomes}")
    check(replayed >= 10 and with_weights >= 5, f"only {replayed} trials replayed, {with_weights} with weight faults")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("fault groups against PyTorch: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
