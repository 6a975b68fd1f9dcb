#!/usr/bin/python3
"""ctest cli_computed_operands: differential trials through layers whose
weights or biases are computed at run time, each against --exact.

torch exports shared parameters through Identity nodes (mobilenet_v2's
biases), weight normalisation as a Mul, a transposed weight as a Transpose:
the layer then reads a value, not a parameter, and a differential trial must
read it where the step that computes it wrote it. On bfbcc182 two Convs
whose biases came through Identities gave records differing from --exact in
72 of 120 trials (the bias read as zeros from a worker slot nothing wrote);
this test builds that graph and eight other shapes of the same question
(Gemm, MatMul, 3-D MatMul, a computed Gemm weight, a depthwise Conv,
BatchNormalization and LayerNormalization parameters, an embedding table),
runs a uniform weight-fault campaign of 1- and 2-bit flips on each, on 1 and
2 threads, and requires every trial record to equal the --exact run's.
The Gemm graphs also run a campaign of two faults a trial (fault groups):
one moving the computed operands' Gemm's input, one in the parameter a
computed B or C comes from, so that a Gemm's column and row paths and the
output Gemm meet a held computed operand the trial moved.
A tenth graph is PyTorch's own export (torch.onnx.export, opset 13) of two
Convs whose biases hold equal values: the exporter shares equal
initializers, writing the second Conv's bias as an Identity of the first's,
as it did in the graph that failed.

usage: computed_operands.py BITFLIP WORKDIR
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

C = 5  # classes
N = 64  # samples


def build(work):
    rng = np.random.default_rng(3)

    def init(name, *shape):
        return nh.from_array(rng.standard_normal(shape).astype(np.float32) * 0.5, name)

    def node(op, ins, outs, **kw):
        return h.make_node(op, ins, outs, **kw)

    def head(src):  # pool, flatten, a Gemm whose weight comes through an Identity
        return [node("GlobalAveragePool", [src], ["p"]), node("Flatten", ["p"], ["f"]),
                node("Identity", ["W2"], ["w2"]), node("Gemm", ["f", "w2", "b2"], ["y"], transB=1)]

    m = {}
    m["gemm_id"] = ([node("Identity", ["W1"], ["w1"]), node("Identity", ["b1"], ["bb1"]),
                     node("Gemm", ["x", "w1", "bb1"], ["h"], transB=1), node("Relu", ["h"], ["r"]),
                     node("Identity", ["W2"], ["w2"]), node("Gemm", ["r", "w2", "b2"], ["y"], transB=1)],
                    [init("W1", 24, 16), init("b1", 24), init("W2", C, 24), init("b2", C)], [16], 13, T.FLOAT)
    m["matmul_id"] = ([node("Identity", ["W1"], ["w1"]), node("MatMul", ["x", "w1"], ["m"]),
                       node("Identity", ["b1"], ["bb1"]), node("Add", ["m", "bb1"], ["h"]), node("Relu", ["h"], ["r"]),
                       node("Identity", ["W2"], ["w2"]), node("MatMul", ["r", "w2"], ["m2"]), node("Add", ["m2", "b2"], ["y"])],
                      [init("W1", 16, 24), init("b1", 24), init("W2", 24, C), init("b2", C)], [16], 13, T.FLOAT)
    m["gemm_computed"] = ([node("Mul", ["V1", "g1"], ["w1"]), node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
                           node("Relu", ["h"], ["r"]), node("Transpose", ["W2t"], ["w2"], perm=[1, 0]),
                           node("Gemm", ["r", "w2", "b2"], ["y"], transB=1)],
                          [init("V1", 24, 16), init("g1", 24, 1), init("b1", 24), init("W2t", 24, C), init("b2", C)],
                          [16], 13, T.FLOAT)
    m["conv_id"] = ([node("Identity", ["K"], ["k"]), node("Conv", ["x", "k", "kb"], ["c"], pads=[1, 1, 1, 1]),
                     node("Relu", ["c"], ["r"])] + head("r"),
                    [init("K", 8, 3, 3, 3), init("kb", 8), init("W2", C, 8), init("b2", C)], [3, 8, 8], 13, T.FLOAT)
    # the graph that failed: two Convs sharing one bias through two Identities,
    # the second depthwise with its weight through an Identity too
    m["conv2_id"] = ([node("Identity", ["kb"], ["kb1"]), node("Identity", ["kb"], ["kb2"]),
                      node("Conv", ["x", "K1", "kb1"], ["c1"], pads=[1, 1, 1, 1]), node("Relu", ["c1"], ["r1"]),
                      node("Identity", ["K2"], ["k2"]),
                      node("Conv", ["r1", "k2", "kb2"], ["c2"], pads=[1, 1, 1, 1], group=8),
                      node("Relu", ["c2"], ["r2"])] + head("r2"),
                     [init("K1", 8, 3, 3, 3), init("kb", 8), init("K2", 8, 1, 3, 3), init("W2", C, 8), init("b2", C)],
                     [3, 8, 8], 13, T.FLOAT)
    m["conv_bn_id"] = ([node("Conv", ["x", "K1", "kb"], ["c1"], pads=[1, 1, 1, 1]),
                        node("Identity", ["sc"], ["sc1"]), node("Identity", ["bi"], ["bi1"]),
                        node("BatchNormalization", ["c1", "sc1", "bi1", "mu", "va"], ["n1"]), node("Relu", ["n1"], ["r1"]),
                        node("Identity", ["K2"], ["k2"]), node("Conv", ["r1", "k2", "kb"], ["c2"], pads=[1, 1, 1, 1]),
                        node("Add", ["c2", "r1"], ["a"]), node("Relu", ["a"], ["r2"])] + head("r2"),
                       [init("K1", 8, 3, 3, 3), init("kb", 8), init("sc", 8), init("bi", 8), init("mu", 8),
                        nh.from_array(np.abs(rng.standard_normal(8)).astype(np.float32) + 0.5, "va"),
                        init("K2", 8, 8, 3, 3), init("W2", C, 8), init("b2", C)], [3, 8, 8], 13, T.FLOAT)
    m["matmul3d_id"] = ([node("MatMul", ["x", "W0"], ["m0"]), node("Relu", ["m0"], ["r0"]),
                         node("Identity", ["W1"], ["w1"]), node("MatMul", ["r0", "w1"], ["m1"]),
                         node("Identity", ["b1"], ["bb1"]), node("Add", ["m1", "bb1"], ["a1"]),
                         node("ReduceMean", ["a1"], ["rm"], axes=[1], keepdims=0),
                         node("Identity", ["W2"], ["w2"]), node("Gemm", ["rm", "w2", "b2"], ["y"], transB=1)],
                        [init("W0", 12, 16), init("W1", 16, 16), init("b1", 16), init("W2", C, 16), init("b2", C)],
                        [6, 12], 13, T.FLOAT)
    m["layernorm_id"] = ([node("Identity", ["s"], ["ss"]), node("LayerNormalization", ["x", "ss", "bb"], ["n"], axis=-1),
                          node("Identity", ["W1"], ["w1"]), node("MatMul", ["n", "w1"], ["mm"]), node("Relu", ["mm"], ["r"]),
                          node("Gemm", ["r", "W2", "b2"], ["y"], transB=1)],
                         [init("s", 16), init("bb", 16), init("W1", 16, 24), init("W2", C, 24), init("b2", C)],
                         [16], 17, T.FLOAT)
    m["embedding_id"] = ([node("Identity", ["E"], ["e"]), node("Gather", ["e", "x"], ["g"]),
                          node("ReduceMean", ["g"], ["rm"], axes=[1], keepdims=0), node("Relu", ["rm"], ["r"]),
                          node("Identity", ["W2"], ["w2"]), node("Gemm", ["r", "w2", "b2"], ["y"], transB=1)],
                         [init("E", 50, 16), init("W2", C, 16), init("b2", C)], [7], 13, T.INT64)

    # The campaign holds parameter-only values once (dxparam.c) while they
    # take at most twice the weights' bytes, each at least two pages: in the
    # small graphs above none is held (the workers fetch them batch by
    # batch), in the wide ones below every one is (the workers' plans point
    # at the campaign's copy). Chain mode starts at a Conv or Gemm whose
    # own parameters a fault hits and links the layers after it, which
    # read their computed operands in place.
    def conv_wn(ch):  # a plain Conv, then two whose weights are weight-normalised (Mul) and biases shared (Identity)
        return ([node("Conv", ["x", "K0", "kb0"], ["c0"], pads=[1, 1, 1, 1]), node("Relu", ["c0"], ["r0"]),
                 node("Mul", ["V1", "g1"], ["k1"]), node("Identity", ["kb"], ["kb1"]),
                 node("Conv", ["r0", "k1", "kb1"], ["c1"], pads=[1, 1, 1, 1]), node("Relu", ["c1"], ["r1"]),
                 node("Mul", ["V2", "g2"], ["k2"]), node("Identity", ["kb"], ["kb2"]),
                 node("Conv", ["r1", "k2", "kb2"], ["c2"], pads=[1, 1, 1, 1]), node("Relu", ["c2"], ["r2"]),
                 node("GlobalAveragePool", ["r2"], ["p"]), node("Flatten", ["p"], ["f"]),
                 node("Gemm", ["f", "W2", "b2"], ["y"], transB=1)],
                [init("K0", ch, 3, 3, 3), init("kb0", ch), init("V1", ch, ch, 3, 3), init("g1", ch, 1, 1, 1),
                 init("kb", ch), init("V2", ch, ch, 3, 3), init("g2", ch, 1, 1, 1), init("W2", C, ch), init("b2", C)],
                [3, 8, 8], 13, T.FLOAT)

    def gemm_tr(width):  # a plain Gemm, then one whose weight is a Transpose and bias an Identity, then one whose weight is a Mul
        return ([node("Gemm", ["x", "W0", "b0"], ["h0"], transB=1), node("Relu", ["h0"], ["r0"]),
                 node("Transpose", ["W1t"], ["w1"], perm=[1, 0]), node("Identity", ["b1"], ["bb1"]),
                 node("Gemm", ["r0", "w1", "bb1"], ["h1"], transB=1), node("Relu", ["h1"], ["r1"]),
                 node("Mul", ["V2", "g2"], ["w2"]), node("Gemm", ["r1", "w2", "b2"], ["y"], transB=1)],
                [init("W0", width, 16), init("b0", width), init("W1t", width, width), init("b1", width),
                 init("V2", C, width), init("g2", C, 1), init("b2", C)], [16], 13, T.FLOAT)

    m["conv_wn_small"] = conv_wn(8)
    m["conv_wn_wide"] = conv_wn(32)
    m["gemm_tr_small"] = gemm_tr(12)
    m["gemm_tr_wide"] = gemm_tr(96)

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
    from bitflip.safetensors import save_eval_set
    specs = []
    torch_export(os.path.join(work, "torch_shared_bias.onnx"))
    m["torch_shared_bias"] = (None, None, [3, 8, 8], 13, T.FLOAT)
    for name, (nodes, inits, shape, opset, dtype) in m.items():
        mp = os.path.join(work, name + ".onnx")
        if nodes is not None:
            g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", dtype, ["N"] + shape)],
                             [h.make_tensor_value_info("y", T.FLOAT, ["N", C])], inits)
            model = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
            onnx.checker.check_model(model)
            onnx.save(model, mp)
        if dtype == T.INT64:
            x = rng.integers(0, 50, [N] + shape).astype(np.int64)
        else:
            x = rng.standard_normal([N] + shape).astype(np.float32)
        dp = os.path.join(work, name + ".safetensors")
        save_eval_set(dp, {"x": x}, rng.integers(0, C, N).astype(np.int64))
        for bits in (1, 2):
            sp = os.path.join(work, "%s_b%d.json" % (name, bits))
            with open(sp, "w") as f:
                json.dump({"model": mp, "dataset": dp, "seed": 11, "trials": 120, "batch": 16,
                           "faults": {"target": "weights", "tensors": ["*"], "model": "bitflip", "bits": bits,
                                      "representation": "fp32"}, "sampling": "uniform"}, f)
            specs.append(sp)
        if "_wn_" in name or "_tr_" in name:
            # many faults a trial: a Conv's or Gemm's own parameter and the
            # one its computed weight comes from, hit in one trial
            sp = os.path.join(work, "%s_ber.json" % name)
            with open(sp, "w") as f:
                json.dump({"model": mp, "dataset": dp, "seed": 5, "batch": 16,
                           "faults": {"target": "weights", "tensors": ["*"], "model": "ber", "rates": [1e-4, 1e-3],
                                      "repeats": 60, "representation": "fp32"}}, f)
            specs.append(sp)
        if name in ("gemm_tr_wide", "gemm_tr_small"):
            # two faults a trial: one upstream (the first Gemm, so the
            # second's and third's input changes in some rows or every
            # one), one in a parameter a computed operand comes from (the
            # second Gemm's transposed weight or Identity bias, the output
            # Gemm's Mul weight): the column and row paths, and the output
            # Gemm over every batch, take a held computed B or C only where
            # no fault of the trial moved it (diffstep.c, diffout.c)
            sp = os.path.join(work, "%s_moved.json" % name)
            with open(sp, "w") as f:
                json.dump({"model": mp, "dataset": dp, "seed": 17, "trials": 120, "batch": 16, "sampling": "uniform",
                           "faults": [{"target": "weights", "tensors": ["W0", "b0"], "model": "bitflip", "bits": 1,
                                       "representation": "fp32"},
                                      {"target": "weights", "tensors": ["W1t", "b1", "V2", "g2", "b2"],
                                       "model": "bitflip", "bits": 1}]}, f)
            specs.append(sp)
    return specs


def torch_export(path):
    """Two Convs (the second depthwise) with biases of equal values and a
    Linear head, exported by PyTorch; fails unless the export shares the
    biases through an Identity, the case under test."""
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
            torch.nn.init.constant_(self.c1.bias, 0.1)
            torch.nn.init.constant_(self.c2.bias, 0.1)
            self.fc = torch.nn.Linear(8, C)

        def forward(self, x):
            y = torch.relu(self.c2(torch.relu(self.c1(x))))
            return self.fc(y.mean((2, 3)))

    torch.manual_seed(0)
    torch.onnx.export(Net().eval(), torch.randn(2, 3, 8, 8), path, opset_version=13, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    ops = [n.op_type for n in onnx.load(path).graph.node]
    if "Identity" not in ops:
        sys.exit("FAIL: PyTorch's export did not share the equal biases through an Identity (ops: %s): "
                 "the case this graph tests is gone" % ops)


def records(bitflip, spec, extra):
    out = spec + ".".join([""] + [a.strip("-") for a in extra]) + ".jsonl"
    subprocess.run([bitflip, "run", "--local", *extra, "--trials-out", out, spec], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    bitflip, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    bad = 0
    for spec in build(work):
        exact = records(bitflip, spec, ["--exact", "--threads", "1"])
        want = 120
        if len(exact) != want:
            print("FAIL: %s: --exact wrote %d records, not %d" % (spec, len(exact), want))
            bad += 1
            continue
        for threads in ("1", "2"):
            diff = records(bitflip, spec, ["--threads", threads])
            off = [i for i, (a, b) in enumerate(zip(diff, exact)) if a != b]
            if len(diff) != len(exact) or off:
                print("FAIL: %s, %s threads: %d of %d records differ from --exact (first: trial %s)"
                      % (os.path.basename(spec), threads, len(off), len(exact), off[0] if off else "count"))
                bad += 1
            else:
                print("ok: %s, %s threads: %d records equal --exact's" % (os.path.basename(spec), threads, len(exact)))
    sys.exit(1 if bad else 0)


main()
