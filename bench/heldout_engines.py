#!/usr/bin/python3
"""Where a held-out reference fails, who is off: PyTorch's float32 outputs (the reference),
PyTorch in float64, ONNX Runtime (bench/ort_vision.js, onnxruntime-node, 1 thread) and bitflip
(`bitflip eval --outputs`), golden or under one of the reference's faults, compared output by
output in units of bitflip-conformance's tolerance (a value's own: max(1e-5, 1e-4 |v|); a row of
several values, a box or a mask, its row's largest magnitude: tests/fixtures/README.md,
"Matching for detection"). docs/OPS.md, "Held-out detectors and segmenters", has the findings.

  /usr/bin/python3 bench/heldout_engines.py bench/out/heldout/maskrcnn_resnet50_fpn_o11 [--fault K]
        [--bitflip build/bitflip] [--no-f64] [--rows]

The fault is applied to a copy of the .onnx (the initializer's element, bit flipped) for ONNX
Runtime and bitflip, and to the module's parameter for PyTorch float64 (the model rebuilt by
bench/heldout_det.py's build(), which is seeded). --rows prints, per image, the rows of a
detector whose values differ past the tolerance in any engine.

  /usr/bin/python3 bench/heldout_engines.py STEM --ort-ref DIR

writes DIR/NAME.{onnx,eval.safetensors,ref.json}: the same case with ONNX Runtime's outputs as
the reference, golden and under every fault (the metric fields dropped), for
`bitflip-conformance DIR`: ONNX Runtime as a witness of the rule on NMS near-ties (docs/OPS.md,
"NMS near-ties"), the rows before bitflip's cut must match its rows too."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def units(got, want):
    """|got - want| in tolerance units per row (rows of one value: the value's own scale)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return None
    if want.ndim <= 1:
        tol = np.maximum(1e-5, 1e-4 * np.abs(want))
    else:
        flat = want.reshape(len(want), -1)
        scale = np.abs(np.where(np.isfinite(flat), flat, 0)).max(1) if flat.size else np.zeros(len(want))
        tol = np.maximum(1e-5, 1e-4 * scale).reshape((-1,) + (1,) * (want.ndim - 1))
    d = np.abs(got - want)
    d[(got == want) | (np.isnan(got) & np.isnan(want))] = 0
    return d / tol


def load_ref(stem, fault):
    with open(stem + ".ref.json") as f:
        ref = json.load(f)
    outs = ref["golden"] if fault is None else ref["faults"][fault]["outputs"]
    return ref, outs


def flipped_onnx(stem, rec, path):
    import onnx
    from onnx import numpy_helper
    m = onnx.load(stem + ".onnx")
    for t in m.graph.initializer:
        if t.name == rec["param"]:
            a = numpy_helper.to_array(t).copy()
            v = a.reshape(-1).view(np.uint32)
            v[rec["index"]] ^= np.uint32(1 << rec["bit"])
            t.CopyFrom(numpy_helper.from_array(a, t.name))
            break
    else:
        raise SystemExit(f"no initializer {rec['param']}")
    onnx.save(m, path)


def run_ort(model, data, n, out):
    subprocess.run(["node", os.path.join(HERE, "ort_vision.js"), model, data, "--threads", "1", "--batch", "1",
                    "--repeat", "0", "--warmup", "1", "--samples", str(n), "--dump", out], check=True,
                   stdout=subprocess.DEVNULL)
    with open(out) as f:
        return [{k: np.array(v["data"], np.float64).reshape(v["dims"]) for k, v in o.items()} for o in json.load(f)]


def run_bitflip(exe, model, data, out):
    subprocess.run([exe, "eval", model, data, "--threads", "1", "--outputs", out], check=True,
                   stdout=subprocess.DEVNULL)
    with open(out) as f:
        got = json.load(f)
    if isinstance(got, dict):
        got = got.get("outputs", got.get("samples", got))
    return [{k: np.array(v, np.float64) for k, v in o.items() if isinstance(v, list)} for o in got]


def read_images(path):
    """The eval set's one float32 tensor of rank 4 (the images), read from the safetensors layout."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        head = json.loads(f.read(n))
        body = f.read()
    for k, v in head.items():
        if k != "__metadata__" and v["dtype"] == "F32" and len(v["shape"]) == 4:
            a, b = v["data_offsets"]
            return np.frombuffer(body[a:b], np.float32).reshape(v["shape"]).copy()
    raise SystemExit(f"{path}: no float32 images")


def run_f64(name, stem, rec, n, names):
    import torch
    import heldout_det as H
    model, task = H.build(name)
    w, _ = H.wrapper(model, name, task)
    w = w.double()
    if rec is not None:
        params = dict(model.named_parameters())
        params.update({"m." + k: v for k, v in params.items()})
        flat = params[rec["param"]].data.view(-1)
        flat[rec["index"]] = float(rec["new"]) if not isinstance(rec["new"], str) else float(rec["new"].replace(
            "Infinity", "inf"))
    x = read_images(stem + ".eval.safetensors")
    outs = []
    with torch.no_grad():
        for i in range(n):
            o = w(torch.from_numpy(x[i:i + 1]).double())
            if task == "segmentation":
                outs.append({names[0]: o[0].numpy()})
            else:
                outs.append({k: v.numpy() for k, v in zip(names, o)})
    return outs


def ort_ref(stem, out_dir):
    """The case with ONNX Runtime's outputs as its reference (the module docstring)."""
    import shutil
    ref, want = load_ref(stem, None)
    names, n = ref["outputs"], len(want)
    case = os.path.basename(stem)
    os.makedirs(out_dir, exist_ok=True)
    data = stem + ".eval.safetensors"

    def rows(outs):
        return [{k: o[k].reshape(len(o[k]), -1).tolist() if o[k].ndim > 1 else o[k].tolist() for k in names}
                for o in outs]
    with tempfile.TemporaryDirectory() as tmp:
        new = {k: v for k, v in ref.items() if not k.startswith("golden") and k not in ("faults", "ties")}
        new["golden"] = rows(run_ort(stem + ".onnx", data, n, os.path.join(tmp, "ort.json")))
        new["faults"] = []
        for f in ref.get("faults", []):
            m = os.path.join(tmp, "f.onnx")
            flipped_onnx(stem, f, m)
            k = len(f["outputs"])
            g = {x: f[x] for x in ("param", "index", "bit", "old", "new")}
            g["outputs"] = rows(run_ort(m, data, k, os.path.join(tmp, "ort.json")))
            new["faults"].append(g)
    for ext in ("onnx", "eval.safetensors") + (("onnx.data",) if os.path.exists(stem + ".onnx.data") else ()):
        shutil.copy(f"{stem}.{ext}", os.path.join(out_dir, f"{case}.{ext}"))
    with open(os.path.join(out_dir, case + ".ref.json"), "w") as f:
        json.dump(new, f)
    print(f"wrote {out_dir}/{case}.ref.json: ONNX Runtime's outputs, golden and {len(new['faults'])} faults")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stem")
    ap.add_argument("--fault", type=int, default=None)
    ap.add_argument("--bitflip", default=os.path.join(ROOT, "build", "bitflip"))
    ap.add_argument("--no-f64", action="store_true")
    ap.add_argument("--rows", action="store_true")
    ap.add_argument("--ort-ref", metavar="DIR")
    a = ap.parse_args()
    if a.ort_ref:
        return ort_ref(a.stem, a.ort_ref)
    ref, want = load_ref(a.stem, a.fault)
    names = ref["outputs"]
    n = len(want)
    rec = None if a.fault is None else ref["faults"][a.fault]
    case = os.path.basename(a.stem)
    name = case.rsplit("_", 1)[0]
    data = a.stem + ".eval.safetensors"
    with tempfile.TemporaryDirectory() as tmp:
        model = a.stem + ".onnx"
        if rec is not None:
            model = os.path.join(tmp, "f.onnx")
            flipped_onnx(a.stem, rec, model)
            print(f"fault {a.fault}: {rec['param']}[{rec['index']}] bit {rec['bit']}: {rec['old']} -> {rec['new']}")
        engines = {"ort": run_ort(model, data, n, os.path.join(tmp, "ort.json")),
                   "bitflip": run_bitflip(a.bitflip, model, data, os.path.join(tmp, "bf.json"))[:n]}
        if not a.no_f64:
            engines["torch_f64"] = run_f64(name, a.stem, rec, n, names)
    pt = [{k: np.array(v, np.float64) for k, v in o.items()} if isinstance(o, dict) else
          {names[0]: np.array(o, np.float64)} for o in want]
    for i in range(n):
        for k in names:
            w = pt[i][k]
            line = [f"image {i} {k:>16} rows {len(w) if w.ndim else 1}:"]
            for e, outs in engines.items():
                g = outs[i].get(k)
                if g is None:
                    line.append(f"{e} missing")
                    continue
                if g.size == w.size and g.shape != w.shape:
                    g = g.reshape(w.shape)
                u = units(g, w)
                if u is None:
                    line.append(f"{e} shape {g.shape} vs {w.shape}")
                else:
                    ad = np.nanmax(np.abs(g - w)) if g.size else 0.0
                    line.append(f"{e} max|d| {ad:.3g} = {np.nanmax(u) if u.size else 0:.3g} tol, {int((u > 1).sum())} over")
            print(" ".join(line))
        if a.rows and "scores" in names:
            for e, outs in engines.items():
                g = outs[i]
                if any(g[k].shape != pt[i][k].shape for k in names):
                    continue
                bad = set()
                for k in names:
                    u = units(g[k], pt[i][k])
                    bad |= set(np.where(u.reshape(len(u), -1).max(1) > 1)[0].tolist()) if u.size else set()
                for r in sorted(bad)[:6]:
                    print(f"  {e} row {r}: score {g['scores'][r]:.9g} vs {pt[i]['scores'][r]:.9g}, "
                          f"box {np.round(g['boxes'][r], 4).tolist()} vs {np.round(pt[i]['boxes'][r], 4).tolist()}")


if __name__ == "__main__":
    main()
