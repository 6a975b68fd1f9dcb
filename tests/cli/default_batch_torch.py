#!/usr/bin/python3
"""ctest cli_default_batch_torch: the campaign's default batch on the model labs
bring, torchvision's mobilenet_v2 exported by torch.onnx.export.

test_campaign_batch (tests/unit) checks the rule (core/src/campaign/
campaign_batch.c, docs/CAMPAIGNS.md "batch") on graphs it builds; every real
export in tests/fixtures/real is small enough to keep 64. This one exports
mobilenet_v2 (weights=None, 10 classes; 9 MB at 224x224, so made here, never
committed) at 224, 80 and 48 pixels and checks:

* the rule as documented: `bitflip info --json`'s plan memory at batches 1 and
  64 gives a sample's bytes, and the default (`campaign_batch`) is 64 halved
  while a batch of them passes 64 MiB, down to 4;
* that those bytes measure the activations PyTorch computes: at least the
  largest Conv's input and output of one sample (both live while it runs),
  at most every module's output of one sample (PyTorch's hooks), so the
  default follows the model's size and not a constant;
* that the three sizes give three batches, all below 64 and smaller the
  larger the image;
* at 224 with 64 images: the campaign at "batch": 64 is refused at one
  thread by the 4 GiB job memory, as every campaign on it was before the
  rule (exit 3, the limit named), while the same spec without "batch" runs,
  `--stats` says the batch info said, and its records equal --exact's and
  those at "batch": 8, bit for bit.

The sizes are picked so that each sample's plan bytes (50, 6.4 and 2.4 MiB)
sit well inside their batch's band (over 8, 4-8 and 2-4 MiB): the plan's
scratch differs a little with the CPU's kernels (under 1 MB at batch 64
between AVX-512 and AVX2 here), which must not move a batch.

usage: default_batch_torch.py BITFLIP WORKDIR
"""
import json
import os
import subprocess
import sys

import numpy as np

MIB = 1 << 20
LIMIT, FULL, FLOOR = 64 * MIB, 64, 4   # docs/CAMPAIGNS.md, "batch"
N, TRIALS, CLASSES = 64, 6, 10


def export(path, hw):
    """The exported mobilenet_v2 at hw x hw, and PyTorch's bounds on a sample's
    activation bytes: (largest Conv input + output, sum of every leaf module's
    output)."""
    import torch
    import torchvision

    torch.manual_seed(0)
    net = torchvision.models.mobilenet_v2(weights=None, num_classes=CLASSES).eval()
    low, high = [0], [0]

    def hook(mod, inp, out):
        if isinstance(mod, torch.nn.Conv2d):
            low[0] = max(low[0], 4 * (inp[0].numel() + out.numel()))
        high[0] += 4 * out.numel()

    hooks = [m.register_forward_hook(hook) for m in net.modules() if not list(m.children())]
    with torch.no_grad():
        net(torch.randn(1, 3, hw, hw))
    for h in hooks:
        h.remove()
    torch.onnx.export(net, torch.randn(2, 3, hw, hw), path, opset_version=13, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
    return low[0], high[0]


def rule(per):
    b = FULL
    while b > FLOOR and b * per > LIMIT:
        b //= 2
    return b


def run(bitflip, spec, out, extra):
    p = subprocess.run([bitflip, "run", "--local", "--threads", "1", *extra, "--trials-out", out, spec],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    recs = []
    if os.path.exists(out):
        with open(out) as f:
            recs = [line for line in f if line.startswith('{"trial"')]
    return p.returncode, recs, p.stderr


def main():
    bitflip, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
    from bitflip.safetensors import save_eval_set

    bad = 0
    batches = {}
    for hw in (224, 80, 48):
        mp = os.path.join(work, "mobilenet_v2_%d.onnx" % hw)
        low, high = export(mp, hw)
        p = subprocess.run([bitflip, "info", "--json", mp], capture_output=True, text=True)
        if p.returncode:
            print("FAIL: bitflip info on %s exited %d: %s" % (mp, p.returncode, p.stderr.strip()))
            return 1
        info = json.loads(p.stdout)
        plan = {e["batch"]: e["total_bytes"] for e in info["plan_memory"]}
        per = (plan[FULL] - plan[1]) // (FULL - 1)   # whole bytes, as campaign_batch.c
        got = info["campaign_batch"]
        batches[hw] = got
        print("%dx%d: %.2f MiB a sample in the plan (PyTorch's bounds %.2f-%.2f), default batch %d"
              % (hw, hw, per / MIB, low / MIB, high / MIB, got))
        if got != rule(per):
            print("FAIL: %d: the default is %d, the documented rule on info's plan memory gives %d"
                  % (hw, got, rule(per)))
            bad += 1
        if not low <= per <= high:
            print("FAIL: %d: a sample's %.2f MiB of plan lies outside PyTorch's activations, %.2f-%.2f MiB"
                  % (hw, per / MIB, low / MIB, high / MIB))
            bad += 1
    if not batches[224] < batches[80] < batches[48] < FULL:
        print("FAIL: the defaults %s do not fall below 64 as the image grows" % batches)
        bad += 1

    mp = os.path.join(work, "mobilenet_v2_224.onnx")
    rng = np.random.default_rng(3)
    dp = os.path.join(work, "images.safetensors")
    save_eval_set(dp, {"x": rng.standard_normal([N, 3, 224, 224]).astype(np.float32)},
                  rng.integers(0, CLASSES, N).astype(np.int64))
    spec = {"model": mp, "dataset": dp, "seed": 11, "trials": TRIALS, "sampling": "uniform",
            "faults": {"target": "weights", "model": "bitflip", "bits": 1, "representation": "fp32"}}

    def write(name, **extra):
        path = os.path.join(work, name + ".json")
        with open(path, "w") as f:
            json.dump(dict(spec, **extra), f)
        return path

    rc, _, err = run(bitflip, write("b64", batch=FULL), os.path.join(work, "b64.jsonl"), [])
    if rc != 3 or "job memory limit (--job-memory)" not in err:
        print("FAIL: batch 64 on 224x224 mobilenet_v2 exited %d, not 3 with the job memory named: %s"
              % (rc, err.strip()[-300:]))
        bad += 1
    else:
        print("ok: batch 64 refused: %s" % [ln for ln in err.splitlines() if "job memory" in ln][0][:200])
    plain = write("default")
    rc, recs, err = run(bitflip, plain, os.path.join(work, "default.jsonl"), ["--stats"])
    if rc or len(recs) != TRIALS:
        print("FAIL: the default batch's run exited %d with %d records: %s" % (rc, len(recs), err.strip()[-300:]))
        return 1
    first = [ln for ln in err.splitlines() if " trials in " in ln]   # --stats' first line (docs/ENGINE.md)
    if not first or ", batch %d," % batches[224] not in first[0]:
        print("FAIL: --stats does not say batch %d: %s" % (batches[224], first[:1] or err.strip()[-300:]))
        bad += 1
    rc, exact, err = run(bitflip, plain, os.path.join(work, "exact.jsonl"), ["--exact"])
    rc8, b8, err8 = run(bitflip, write("b8", batch=8), os.path.join(work, "b8.jsonl"), [])
    for name, other, code, e in (("--exact", exact, rc, err), ("batch 8", b8, rc8, err8)):
        if code or other != recs:
            print("FAIL: %s: exit %d, %d of %d records equal the default batch's: %s"
                  % (name, code, sum(a == b for a, b in zip(other, recs)), TRIALS, e.strip()[-200:]))
            bad += 1
        else:
            print("ok: the default batch's %d records equal %s's" % (TRIALS, name))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
