"""Stutz et al.'s study on bitflip: random and profiled bit errors in fixed-point
weights at 8 down to 2 bits, with and without weight clipping.

    /usr/bin/python3 study/stutz/stutz.py --bitflip build/bitflip [--quick]
        [--work DIR] [--doc docs/study/stutz.md]

`make study-stutz` runs it in full and rewrites docs/study/stutz.md and its
figures (docs/study/stutz_*.png); --quick (the test suite's) trains briefly,
runs two widths and a few repeats, and writes nothing under docs/ unless --doc
is given.

1. Data: scikit-learn's digits (1,797 8x8 images, shipped with the Debian
   package), upscaled to 16x16; 1,297 to train, 500 to evaluate. No download.
2. A small ResNet (3 stages of one basic block, 16/32/64 channels, GroupNorm
   without affine parameters, about 78k parameters), trained in PyTorch twice: plainly, and with weight
   clipping (every parameter clamped to [-w_max, w_max] after each step,
   w_max = 0.1, Stutz et al.'s CLIPPING).
3. For every width m and scheme (symmetric int<m>, asymmetric uint<m>), each
   model is fine-tuned with m-bit quantization-aware training (fake-quantized
   weights, straight-through gradients; the clipped model quantizes in
   [-w_max, w_max]), exported to ONNX, and bitflip runs a random bit error
   sweep on it: every stored bit of every weight flips with probability p,
   `repeats` draws per rate, accuracy on the 500 held-out digits.
4. A profiled map (study/stutz/bfmap.py: weak columns, flip and stuck-at
   cells, 1% of the cells) is replayed over the 8- and 4-bit asymmetric
   models at a random offset per repeat, beside random errors at the same
   rate.

Every number in the doc comes from this run: tables and figures are written
by `write_doc` from the results (DIR/results.json).
"""
import argparse
import json
import os
import subprocess
import sys
import time

try:
    import numpy as np
    import sklearn  # noqa: F401  (the data)
    import torch
    import torch.nn as nn
    import torch.nn.functional as tF
except ImportError as e:
    print("%s is not installed (scripts/install-deps.sh --test installs it): skipped" % e.name)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bfmap  # noqa: E402
import quant_ref as qr  # noqa: E402
# the eval-set writer of the project's Python package (clients/python), not installed here
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
from bitflip.safetensors import write_safetensors  # noqa: E402

W_MAX = 0.1
SITES = ["*.weight", "*.bias"]   # every trained parameter (not the export's InstanceNorm constants)


# ---------------------------------------------------------------- data, model

def digits():
    from sklearn.datasets import load_digits
    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    x = tF.interpolate(x, size=(16, 16), mode="bilinear", align_corners=False)
    x = (x - x.mean()) / x.std()
    y = torch.tensor(d.target, dtype=torch.int64)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    te, tr = perm[:500], perm[500:]
    return x[tr], y[tr], x[te], y[te]


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1)
        self.gn1 = nn.GroupNorm(4, cout, affine=False)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1)
        self.gn2 = nn.GroupNorm(4, cout, affine=False)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride), nn.GroupNorm(4, cout, affine=False))

    def forward(self, x):
        out = torch.relu(self.gn1(self.conv1(x)))
        out = self.gn2(self.conv2(out))
        return torch.relu(out + (x if self.short is None else self.short(x)))


class ResNet(nn.Module):
    """A CIFAR-style ResNet shrunk for 16x16 digits. GroupNorm without affine
    parameters: no running statistics to go stale (Stutz et al. use GroupNorm
    for the same reason), and every parameter is a convolution's or the
    classifier's, so clipping them all to [-w_max, w_max] leaves the
    normalized activations at their scale (a clipped GroupNorm scale would
    shrink the logits to nothing)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 16, 3, 1, 1)
        self.gn = nn.GroupNorm(4, 16, affine=False)
        self.layer1 = Block(16, 16, 1)
        self.layer2 = Block(16, 32, 2)
        self.layer3 = Block(32, 64, 2)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.gn(self.stem(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(x.mean(dim=(2, 3)))


def fake_quantize(net, repr_name, w_max):
    """Replaces every parameter by its quantized value (quant_ref, the
    paper's formulas); returns the float values to restore after backward,
    which makes the gradient a straight-through one."""
    saved = []
    for p in net.parameters():
        saved.append(p.data.clone())
        if repr_name:
            q = qr.quantize(p.data.numpy(), repr_name, False, w_max)
            p.data.copy_(torch.from_numpy(np.ascontiguousarray(q)))
    return saved


def train(net, x, y, epochs, lr, w_max=0.0, repr_name=None, seed=0):
    torch.manual_seed(seed)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    n = len(y)
    for _ in range(epochs):
        net.train()
        perm = torch.randperm(n)
        for i in range(0, n, 64):
            idx = perm[i:i + 64]
            saved = fake_quantize(net, repr_name, w_max)
            loss = tF.cross_entropy(net(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            for p, s in zip(net.parameters(), saved):
                p.data.copy_(s)
            opt.step()
            if w_max > 0:
                for p in net.parameters():
                    p.data.clamp_(-w_max, w_max)
    return net


def accuracy(net, x, y, repr_name=None, w_max=0.0):
    net.eval()
    saved = fake_quantize(net, repr_name, w_max)
    with torch.no_grad():
        acc = float((net(x).argmax(1) == y).float().mean())
    for p, s in zip(net.parameters(), saved):
        p.data.copy_(s)
    return acc


# -------------------------------------------------------------------- bitflip

def export(net, path):
    net.eval()
    torch.onnx.export(net, torch.zeros(1, 1, 16, 16), path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, opset_version=13)


def run(bitflip, spec, path, threads):
    with open(path, "w") as fh:
        json.dump(spec, fh)
    out = path.replace(".json", ".out.json")
    r = subprocess.run([bitflip, "run", "--local", path, "--threads", str(threads), "--format", "json", "--out", out],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("bitflip run %s failed (%d): %s" % (path, r.returncode, r.stderr.strip()))
    with open(out) as fh:
        return json.load(fh)


def per_rate(doc):
    """[(rate, mean accuracy, ci lo, ci hi, trials)]"""
    rows = []
    for g in doc["by_rate"]:
        a = g["metrics"]["accuracy"]
        rows.append((g["rate"], a["mean"], a["ci"][0], a["ci"][1], g["trials"]))
    return rows


# ---------------------------------------------------------------------- study

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bitflip", required=True)
    ap.add_argument("--quick", action="store_true", help="the test suite's: short training, widths 8 and 4, few repeats")
    ap.add_argument("--work", default=None, help="where models, specs and results go (default build/study-stutz)")
    ap.add_argument("--doc", default=None, help="write the doc (and figures beside it) here")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--check", action="store_true",
                    help="fail unless every quantized golden accuracy is PyTorch's (the test suite's)")
    a = ap.parse_args()
    work = a.work or os.path.join("build", "study-stutz" + ("-quick" if a.quick else ""))
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    torch.set_num_threads(1)

    if a.quick:
        widths, schemes, epochs, qat_epochs, repeats = [8, 4], ["uint"], 3, 1, 3
        rates = [1e-4, 1e-2, 5e-2]
    else:
        widths, schemes, epochs, qat_epochs, repeats = [8, 6, 4, 3, 2], ["int", "uint"], 30, 4, 25
        rates = [1e-4, 1e-3, 5e-3, 1e-2, 1.5e-2, 2.5e-2, 5e-2]

    xtr, ytr, xte, yte = digits()
    data = os.path.join(work, "digits16.eval.safetensors")
    write_safetensors(data, {"x": xte.numpy(), "labels": yte.numpy()})

    results = {"quick": a.quick, "widths": widths, "schemes": schemes, "rates": rates, "repeats": repeats,
               "epochs": epochs, "qat_epochs": qat_epochs, "w_max": W_MAX, "train": len(ytr), "test": len(yte),
               "models": {}, "sweeps": [], "profiled": []}
    base = {}
    for clip in (False, True):
        torch.manual_seed(1)
        net = train(ResNet(), xtr, ytr, epochs, 2e-3, W_MAX if clip else 0.0, seed=1)
        base[clip] = net
        name = "clipped" if clip else "normal"
        results["models"][name] = {"params": sum(p.numel() for p in net.parameters()),
                                   "fp32_accuracy": accuracy(net, xte, yte),
                                   "max_abs_weight": float(max(p.data.abs().max() for p in net.parameters())),
                                   "at_bound": float(sum(int((p.data.abs() >= 0.999 * W_MAX).sum()) for p in net.parameters())
                                                     / sum(p.numel() for p in net.parameters()))}
        print("%s: fp32 accuracy %.3f (%d parameters)" % (name, results["models"][name]["fp32_accuracy"],
                                                          results["models"][name]["params"]), flush=True)

    # the map: a 512 x 512 array (262,144 cells; the 8-bit model's ~620k bits wrap it twice)
    mp = os.path.join(work, "chip.bfmap")
    map_rate = 0.01
    cells = bfmap.generate(512, 512, map_rate, "columns", seed=21)
    bfmap.write(mp, 512, 512, cells, voltage=None, chip="generated (bfmap.py --rate 0.01 --pattern columns --seed 21)")
    n_cells = {k: int(v.size) for k, v in cells.items()}
    results["map"] = {"rows": 512, "cols": 512, "cells": n_cells, "rate": sum(n_cells.values()) / 512 / 512,
                      "pattern": "columns"}

    for clip in (False, True):
        name = "clipped" if clip else "normal"
        w_max = W_MAX if clip else 0.0
        for scheme in schemes:
            for m in widths:
                r = "%s%d" % (scheme, m)
                net = ResNet()
                net.load_state_dict(base[clip].state_dict())
                train(net, xtr, ytr, qat_epochs, 5e-4, w_max, repr_name=r, seed=2)
                torch_acc = accuracy(net, xte, yte, r, w_max)
                onnx_path = os.path.join(work, "%s_%s.onnx" % (name, r))
                export(net, onnx_path)
                faults = {"model": "ber", "rates": rates, "repeats": repeats, "representation": r, "tensors": SITES}
                if clip:
                    faults["w_max"] = W_MAX
                doc = run(a.bitflip, {"model": onnx_path, "dataset": data, "seed": 2021, "faults": faults,
                                      "metrics": ["accuracy"]}, os.path.join(work, "%s_%s.ber.json" % (name, r)),
                          a.threads)
                sweep = {"model": name, "repr": r, "bits": m, "scheme": scheme, "torch_quantized_accuracy": torch_acc,
                         "golden_accuracy": doc["golden"]["accuracy"], "rates": per_rate(doc)}
                results["sweeps"].append(sweep)
                print("%s %s: golden %.3f (PyTorch %.3f); %s  [%.0f s]" % (
                    name, r, sweep["golden_accuracy"], torch_acc,
                    " ".join("p=%g:%.3f" % (x[0], x[1]) for x in sweep["rates"]), time.time() - t0), flush=True)
                if scheme == "uint" and m in (8, 4):
                    pf = {"model": "profiled", "error_map": mp, "repeats": repeats, "representation": r,
                          "tensors": SITES}
                    if clip:
                        pf["w_max"] = W_MAX
                    pd = run(a.bitflip, {"model": onnx_path, "dataset": data, "seed": 2021, "faults": pf,
                                         "metrics": ["accuracy"]}, os.path.join(work, "%s_%s.map.json" % (name, r)),
                             a.threads)
                    acc = pd["summary"]["metrics"]["accuracy"]
                    results["profiled"].append({"model": name, "repr": r, "golden_accuracy": pd["golden"]["accuracy"],
                                                "mean": acc["mean"], "ci": acc["ci"], "trials": acc["n"]})
    results["seconds"] = time.time() - t0
    with open(os.path.join(work, "results.json"), "w") as fh:
        json.dump(results, fh, indent=1)
    print("study: %.0f s; results in %s" % (results["seconds"], os.path.join(work, "results.json")), flush=True)
    if a.check:
        bad = [s for s in results["sweeps"]
               if abs(s["golden_accuracy"] - s["torch_quantized_accuracy"]) * len(yte) > 1.5]
        for s in bad:
            print("FAIL %s %s: bitflip's quantized accuracy %.4f, PyTorch's %.4f" % (
                s["model"], s["repr"], s["golden_accuracy"], s["torch_quantized_accuracy"]))
        if bad or len(results["profiled"]) != 2 * sum(1 for m in widths if m in (8, 4)) * ("uint" in schemes):
            sys.exit(1)
    if a.doc:
        import stutz_doc
        stutz_doc.write(results, a.doc)
        print("wrote", a.doc)


if __name__ == "__main__":
    main()
