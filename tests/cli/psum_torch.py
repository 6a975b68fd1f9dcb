#!/usr/bin/python3
"""ctest cli_psum_torch: the partial-sum resume on PyTorch's own export,
every trial record against --exact's.

test_diff_psum (tests/unit) checks the resume on a graph our generator
writes; this one runs it on torch.onnx.export's (opset 13) of the same
shape: Conv A (16 -> 384 channels, 3x3), a BatchNormalization (kept), Relu, Conv B (384
-> 32, 3x3: three chunks of 128 input channels where the lanes kernel of
linalg_conv_bcast.c runs it, AVX-512), Relu, an average pool and a Linear
head. A weight fault in A moves one channel of B's input, so B's re-run
starts at the last checkpoint at or before that channel
(core/src/diff/diffpsum.c). 28 samples at batch 12: two full batches and a
partial one, a plan of 4 images whose checkpoints lie closer together.

Checked: a 16-trial uniform single-bit campaign over A's weight gives the
same records as --exact on 1 and 2 threads; the draw puts a checkpoint
inside a chunk (the lowest drawn channel of some chunk past the first is
not at the chunk's start: the case h37-psum added), computed here from the
exact records; and where the CPU has AVX-512, `--stats` reports re-runs
resumed from checkpoints (elsewhere B takes another path, and the test
says so).

Then the positions' lists (core/src/diff/diffpos.c) on the same export: a
16-trial campaign of permanent single-bit faults in B's input (one element
of one channel, in every image) moves B's input at one position, so B's
re-run computes the 3x3 window around it alone, over the golden output.
Its records must equal --exact's on 1 and 2 threads, and where the CPU has
AVX2 (B's kernel then takes the list) `--stats` must report re-runs on
lists.

Last the 1x1 Convs' lists on a second export, a mobilenet_v2 block on 7x7
maps: Conv A (3x3) -> Relu -> Conv E (1x1, 64 -> 96) -> ReLU6 (a Clip) ->
Conv F (1x1, 96 -> 64) -> + A's Relu -> Relu -> the head. Permanent faults
in E's input re-run E and F alone, each on the positions the fault
reaches: the 1x1 lanes' lists on AVX-512, the 1x1 product on gathered
columns on AVX2 (docs/engine/positions.md). The same checks.

usage: psum_torch.py BITFLIP WORKDIR
"""
import json
import os
import re
import subprocess
import sys

import numpy as np

N, BATCH, CIN, MID, COUT, HW, CLASSES = 28, 12, 16, 384, 32, 7, 4
CHUNK, BLOCK = 128, 16   # input channels a chunk of a 3x3 Conv's K, a block (linalg_conv_bcast.c)


def export(path):
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Conv2d(CIN, MID, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(MID)
            self.b = torch.nn.Conv2d(MID, COUT, 3, padding=1)
            self.fc = torch.nn.Linear(COUT, CLASSES)

        def forward(self, x):
            y = torch.relu(self.b(torch.relu(self.bn(self.a(x)))))
            return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))

    torch.manual_seed(0)
    net = Net()
    with torch.no_grad():   # running statistics other than the defaults, as a trained net has
        net.bn.running_mean.uniform_(-0.2, 0.2)
        net.bn.running_var.uniform_(0.5, 1.5)
    # the BatchNormalization kept (PRESERVE on a net in eval mode), as in the
    # unit test's graph: A's chain then has no cached value but its end, so
    # A's faults take the whole-batch path and B resumes (folded into A, the
    # chain mode takes them, test_diff's business)
    torch.onnx.export(net.eval(), torch.randn(2, CIN, HW, HW), path, opset_version=13, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "n"}, "y": {0: "n"}},
                      training=torch.onnx.TrainingMode.PRESERVE)


def export_pw(path):
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Conv2d(CIN, 64, 3, padding=1)
            self.e = torch.nn.Conv2d(64, 96, 1)
            self.f = torch.nn.Conv2d(96, 64, 1)
            self.fc = torch.nn.Linear(64, CLASSES)

        def forward(self, x):
            a = torch.relu(self.a(x))
            y = torch.relu(a + self.f(torch.nn.functional.relu6(self.e(a))))
            return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))

    torch.manual_seed(1)
    torch.onnx.export(Block().eval(), torch.randn(2, CIN, HW, HW), path, opset_version=13, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})


def run(bitflip, spec, out, extra):
    p = subprocess.run([bitflip, "run", "--local", *extra, "--trials-out", out, spec], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    with open(out) as f:
        recs = [line for line in f if line.startswith('{"trial"')]
    return recs, p.stderr


def main():
    bitflip, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    import onnx
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
    from bitflip.safetensors import save_eval_set

    mp = os.path.join(work, "psum.onnx")
    export(mp)
    model = onnx.load(mp)
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    if len(convs) != 2:
        print("FAIL: the export has %d Convs, not 2" % len(convs))
        return 1
    wa = convs[0].input[1]   # A's weight, whatever name the exporter gave it
    rng = np.random.default_rng(5)
    dp = os.path.join(work, "psum.safetensors")
    save_eval_set(dp, {"x": rng.standard_normal([N, CIN, HW, HW]).astype(np.float32)},
                  rng.integers(0, CLASSES, N).astype(np.int64))
    sp = os.path.join(work, "psum.json")
    with open(sp, "w") as f:
        json.dump({"model": mp, "dataset": dp, "seed": 5, "trials": 16, "batch": BATCH, "sampling": "uniform",
                   "faults": {"target": "weights", "tensors": [wa], "model": "bitflip", "bits": 1,
                              "representation": "fp32"}}, f)

    exact, _ = run(bitflip, sp, os.path.join(work, "exact.jsonl"), ["--exact", "--threads", "1"])
    if len(exact) != 16:
        print("FAIL: --exact wrote %d records, not 16" % len(exact))
        return 1
    # the checkpoints the draw asks for: one a chunk past the first, at its lowest drawn channel's block
    lowest = {}
    for r in exact:
        c = json.loads(r)["faults"][0]["index"] // (CIN * 9)
        if c >= CHUNK:
            q = c // CHUNK
            lowest[q] = min(lowest.get(q, c), c)
    inside = sorted(q for q, c in lowest.items() if c // BLOCK * BLOCK > q * CHUNK)
    print("drawn: lowest channel of each chunk past the first %s; checkpoints inside a chunk: %s"
          % (dict(sorted(lowest.items())), inside))
    if not inside:
        print("FAIL: the draw puts no checkpoint inside a chunk: the test no longer covers that case")
        return 1
    flags = open("/proc/cpuinfo").read().split()
    bad = against_exact(bitflip, sp, exact, work, "psum", r"(\d+) Conv re-runs whose input moved in one channel resumed",
                        "avx512f" in flags, "re-runs resumed", "no AVX-512")

    # the positions' lists: permanent faults in B's input
    bad += lists_on(bitflip, work, "pos", mp, dp, convs[1].input[0], "avx2" in flags, "re-runs on lists")
    # the 1x1 Convs' lists: permanent faults in E's input
    pp = os.path.join(work, "pw.onnx")
    export_pw(pp)
    pconvs = [n for n in onnx.load(pp).graph.node if n.op_type == "Conv"]
    bad += lists_on(bitflip, work, "pw", pp, dp, pconvs[1].input[0], "avx2" in flags, "1x1 re-runs on lists")
    return 1 if bad else 0


def lists_on(bitflip, work, tag, model, dataset, value, need, what):
    """16 permanent single-bit faults in `value` (a Conv's input): the
    records against --exact's, and re-runs on lists where `need`; failures"""
    spec = os.path.join(work, tag + ".json")
    with open(spec, "w") as f:
        json.dump({"model": model, "dataset": dataset, "seed": 5, "trials": 16, "batch": BATCH,
                   "sampling": "uniform",
                   "faults": {"target": "activations", "tensors": [value], "model": "bitflip", "bits": 1,
                              "representation": "fp32", "persistence": "permanent"}}, f)
    exact, _ = run(bitflip, spec, os.path.join(work, tag + "_exact.jsonl"), ["--exact", "--threads", "1"])
    return against_exact(bitflip, spec, exact, work, tag, r"positions: (\d+) Conv re-runs computed only",
                         need, what, "no AVX2")


def against_exact(bitflip, spec, exact, work, tag, count_re, need, what, why):
    """the differential engine's records against exact's on 1 and 2 threads,
    and the --stats count count_re reports above 0 where `need`; failures"""
    bad = 0
    for threads in ("1", "2"):
        diff, err = run(bitflip, spec, os.path.join(work, "%s_diff%s.jsonl" % (tag, threads)),
                        ["--threads", threads, "--stats"])
        off = [i for i, (a, b) in enumerate(zip(diff, exact)) if a != b]
        m = re.search(count_re, err)
        n = int(m.group(1)) if m else 0
        if len(diff) != len(exact) or off:
            print("FAIL: %s, %s threads: %d of %d records differ from --exact (first: trial %s)"
                  % (tag, threads, len(off), len(exact), off[0] if off else "count"))
            bad += 1
        elif need and not n:
            print("FAIL: %s, %s threads: no %s" % (tag, threads, what))
            bad += 1
        else:
            print("ok: %s, %s threads: %d records equal --exact's, %d %s%s"
                  % (tag, threads, len(exact), n, what, "" if need else " (%s: B takes another path)" % why))
    return bad


if __name__ == "__main__":
    sys.exit(main())
