#!/usr/bin/env python3
"""A model cut into sections, each timed alone by bitflip and ONNX Runtime: where ORT's lead is.

  /usr/bin/python3 bench/sections.py [--model resnet18] [--bitflip B [B ...]] [--threads 1]
      [--batches 4,32] [--rounds 5] [--cuts TENSOR,TENSOR,...] [--out DIR]

Why: node_table.py scales ONNX Runtime's profiler (wall time per node) by its run's CPU, and
on short nodes that estimate runs past the core's peak (docs/perf/conv/h27.md), so a per-node
table can rank where the time goes but not say by how much ORT leads on a part of the net.
Here every number is a whole process's best pass, as in `make bench-real`: the model is cut
at the given tensors (presets for resnet18 and mobilenet_v2 cut between stages), each
section extracted with onnx.utils.extract_model, its input renamed `x`; a section whose
output is 4-D gets a GlobalAveragePool and a Flatten, so that `bitflip eval` and
bench/ort_eval.js compute an accuracy over it and must produce all of its output. The first
section reads the model's own eval set (bench/models/real/NAME.eval.safetensors), the
others post-ReLU normal floats of the cut's shape (64 samples; the values only have to be
ordinary floats); labels are random classes. A model of the GlobalAveragePool alone on
each cut's shape is timed too (rows `gap@SECTION`), so what the appended pool costs each
peer can be taken off. Rounds alternate the peers (each bitflip binary given, then ORT),
section by section, so a host disturbance meets them alike; the whole model is timed in
the same rounds.

Prints, per batch, the median seconds of a pass over 64 samples for each peer and
ORT / peer (above 1: the peer is faster); writes every run to DIR/sections.json
(default bench/out/sections/MODEL). Needs bench/models/real/MODEL.* (bench/real_bench.py
makes them) and bench/node_modules (npm ci --ignore-scripts in bench/).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, shape_inference, utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = 64

# cut tensors between stages, in graph order; the last section ends at the model's output
PRESETS = {
    "resnet18": [
        "/maxpool/MaxPool_output_0",                 # stem: conv1, relu, maxpool
        "/layer1/layer1.1/relu_1/Relu_output_0",
        "/layer2/layer2.1/relu_1/Relu_output_0",
        "/layer3/layer3.1/relu_1/Relu_output_0",     # then layer4, avgpool, fc
    ],
    "mobilenet_v2": [
        "/features/features.1/conv/conv.1/Conv_output_0",   # stem and the first block (112x112)
        "/features/features.3/Add_output_0",                # 56x56
        "/features/features.6/Add_output_0",                # 28x28
        "/features/features.10/Add_output_0",               # 14x14, 64 channels
        "/features/features.13/Add_output_0",               # 14x14, 96 channels
        "/features/features.16/Add_output_0",               # 7x7; then 17, 18 and the classifier
    ],
}


def shapes_of(model):
    """tensor name -> dims after the batch, from ONNX shape inference (static spatial dims)"""
    inf = shape_inference.infer_shapes(model)
    out = {}
    for vi in list(inf.graph.value_info) + list(inf.graph.input) + list(inf.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if len(dims) >= 2 and all(d.HasField("dim_value") for d in dims[1:]):
            out[vi.name] = tuple(d.dim_value for d in dims[1:])
    return out


def finish_section(path, src_in, n_out_classes, out_rank):
    """rename the input to x; a 4-D output gets GlobalAveragePool + Flatten as 'logits'"""
    m = onnx.load(path)
    g = m.graph
    for nd in g.node:
        for k, v in enumerate(nd.input):
            if v == src_in:
                nd.input[k] = "x"
    g.input[0].name = "x"
    g.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    if out_rank == 4:
        o = g.output[0].name
        g.node.append(helper.make_node("GlobalAveragePool", [o], ["sections_gap"]))
        g.node.append(helper.make_node("Flatten", ["sections_gap"], ["logits"], axis=1))
        del g.output[:]
        g.output.append(helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["batch", n_out_classes]))
    else:
        g.output[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    del g.value_info[:]
    onnx.checker.check_model(m)
    onnx.save(m, path)


def gap_model(path, shape):
    g = helper.make_graph([helper.make_node("GlobalAveragePool", ["x"], ["g"]),
                           helper.make_node("Flatten", ["g"], ["logits"], axis=1)], "gap",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch"] + list(shape))],
                          [helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["batch", shape[0]])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def build(model_name, cuts, out_dir):
    """the section models and eval sets; returns [(name, onnx, safetensors)] in graph order"""
    stem = os.path.join(ROOT, "bench", "models", "real", model_name)
    src = stem + ".onnx"
    if not os.path.exists(src):
        sys.exit(f"sections: {src} missing: run /usr/bin/python3 bench/real_bench.py once to make it")
    full = onnx.load(src)
    shapes = shapes_of(full)
    gin, gout = full.graph.input[0].name, full.graph.output[0].name
    for c in cuts:
        if c not in shapes:
            sys.exit(f"sections: no tensor '{c}' of static shape in {src} (cuts are tensor names, in graph order)")
    data = benchlib.read_safetensors(stem + ".eval.safetensors")
    x0 = np.asarray(data[gin])[:SAMPLES]
    rng = np.random.default_rng(1)
    bounds = [gin] + list(cuts) + [gout]
    out = []
    os.makedirs(out_dir, exist_ok=True)
    for i in range(len(bounds) - 1):
        a, b = bounds[i], bounds[i + 1]
        name = f"s{i}" if i else "s0"
        path = os.path.join(out_dir, name + ".onnx")
        utils.extract_model(src, path, [a], [b])
        oshape = shapes[b]
        classes = oshape[0]
        finish_section(path, a, classes, 1 + len(oshape))
        x = x0 if i == 0 else np.maximum(rng.standard_normal((SAMPLES,) + shapes[a]).astype(np.float32), 0)
        ds = os.path.join(out_dir, name + ".eval.safetensors")
        benchlib.write_safetensors(ds, {"x": x, "labels": rng.integers(0, classes, SAMPLES).astype(np.int64)})
        parts = b.split("/")   # '/layer1/layer1.1/relu_1/...': the stage, or its block where it names one
        end = parts[2] if len(parts) > 2 and parts[2].startswith(parts[1] + ".") else parts[1] if len(parts) > 1 else b
        out.append((f"{name} to {end}", path, ds))
        if len(oshape) == 3:
            gp = os.path.join(out_dir, name + ".gap.onnx")
            gap_model(gp, oshape)
            gd = os.path.join(out_dir, name + ".gap.eval.safetensors")
            benchlib.write_safetensors(gd, {"x": np.maximum(rng.standard_normal((SAMPLES,) + oshape).astype(np.float32), 0),
                                            "labels": rng.integers(0, classes, SAMPLES).astype(np.int64)})
            out.append((f"gap@{name}", gp, gd))
    out.append(("whole", src, stem + ".eval.safetensors"))
    return out


def seconds(cmd, env):
    r = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.stderr.write(f"sections: {' '.join(cmd[:3])} ... exited {r.returncode}: {r.stderr.strip()[-300:]}\n")
        return None
    return json.loads(r.stdout)["seconds"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet18", help="a model of bench/models/real (default resnet18)")
    ap.add_argument("--bitflip", nargs="+", default=[os.path.join(ROOT, "build", "bitflip")],
                    help="one or more bitflip binaries (an A/B: the old build first)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batches", default="4,32")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cuts", help="comma-separated tensor names (default: the model's preset)")
    ap.add_argument("--out", help="directory for the section models and sections.json")
    a = ap.parse_args()
    cuts = a.cuts.split(",") if a.cuts else PRESETS.get(a.model)
    if not cuts:
        sys.exit(f"sections: no preset for '{a.model}': give --cuts")
    out_dir = a.out or os.path.join(ROOT, "bench", "out", "sections", a.model)
    secs = build(a.model, cuts, out_dir)
    env = benchlib.thread_env(a.threads, dict(os.environ))
    peers = [(f"bitflip{k}" if len(a.bitflip) > 1 else "bitflip", b) for k, b in enumerate(a.bitflip)] + [("ort", None)]
    batches = [int(b) for b in a.batches.split(",")]
    runs = []
    for r in range(a.rounds):
        for b in batches:
            for name, model, ds in secs:
                for peer, binary in peers:
                    if binary:
                        cmd = [binary, "eval", model, ds, "--threads", str(a.threads), "--batch", str(b),
                               "--repeat", "3", "--json", "--progress", "none"]
                    else:
                        cmd = ["node", "bench/ort_eval.js", model, ds, "--threads", str(a.threads), "--batch", str(b),
                               "--repeat", "3", "--no-check"]
                    runs.append({"round": r, "batch": b, "section": name, "peer": peer, "seconds": seconds(cmd, env)})
            print(f"sections: round {r + 1} of {a.rounds}, batch {b} done", file=sys.stderr)
    with open(os.path.join(out_dir, "sections.json"), "w") as f:
        json.dump({"model": a.model, "threads": a.threads, "cuts": cuts, "bitflip": a.bitflip,
                   "machine": benchlib.machine_info(), "runs": runs}, f, indent=1)
    names = [p for p, _ in peers]
    for b in batches:
        meds = {}
        for name, _, _ in secs:
            meds[name] = {}
            for p in names:
                v = [x["seconds"] for x in runs if x["batch"] == b and x["section"] == name and x["peer"] == p
                     and x["seconds"] is not None]
                meds[name][p] = statistics.median(v) if v else None
        print(f"\n{a.model}, {a.threads} thread(s), batch {b}: median seconds a pass of {SAMPLES} samples "
              f"over {a.rounds} rounds; ORT / peer (above 1: the peer faster), and the same with each "
              "peer's gap@ row taken off its section (the appended GlobalAveragePool's own cost)")
        print("| section | " + " | ".join(names) + " | " + " | ".join(f"ORT / {p}" for p in names[:-1]) +
              " | " + " | ".join(f"without the pool, ORT / {p}" for p in names[:-1]) + " |")
        print("|---" * (1 + len(names) + 2 * (len(names) - 1)) + "|")
        for name, _, _ in secs:
            med, gap = meds[name], meds.get("gap@" + name.split(" ")[0])
            cells = ["%.4f" % med[p] if med[p] else "-" for p in names]
            ratio = ["%.3f" % (med["ort"] / med[p]) if med[p] and med["ort"] else "-" for p in names[:-1]]
            net = ["%.3f" % ((med["ort"] - gap["ort"]) / (med[p] - gap[p]))
                   if gap and med[p] and med["ort"] and gap[p] and gap["ort"] else "" for p in names[:-1]]
            print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ratio) + " | " + " | ".join(net) + " |")

if __name__ == "__main__":
    main()
