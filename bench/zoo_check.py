#!/usr/bin/python3
"""The full-size torchvision zoo in the engine: bitflip vs PyTorch eager vs ONNX Runtime, per image.

  /usr/bin/python3 bench/zoo_check.py [--bitflip build/bitflip] [--models a,b] [--images 2]
        [--size 320] [--seg-size 256] [--write-doc docs/OPS.md] [--out bench/out/zoo.json]
  /usr/bin/python3 bench/zoo_check.py --render bench/out/zoo.json [--write-doc docs/OPS.md]

Each model is built as a user builds it (torchvision 0.14 constructors, weights=None,
weights_backbone=None, torch.manual_seed(0)), detectors with min_size = max_size = --size
(320: resnet50 FPNs at 800 take minutes and gigabytes per image) and score thresholds at 0
where the default one leaves no detection of an untrained model (see THRESH), segmenters with
21 classes at --seg-size. Exported by bitflip.export at opset 13 (models into
bench/models/zoo/, never committed), --images drawn images (tests/fixtures/det_models.draw)
written as its eval set. Then, one image per call for detectors:
  torch   the module's outputs (1 thread, inference_mode);
  ort     bench/ort_vision.js --dump (onnxruntime-node, 1 thread);
  bitflip bitflip eval --outputs X.json --threads 1.
Per image, each pair is compared: detections by count, then row by row (labels equal, boxes
within 1e-3 relative to 1 + |box|, scores within 1e-4); rows that differ only in their order
(equal scores: ties) are reported as "same set". Segmenters: max |difference| of the logits
and the share of pixels whose arg-max agrees. Ties are counted in PyTorch's scores (an
untrained detector's scores are close to each other, often equal). Writes the section between
<!-- zoo-check:start --> and <!-- zoo-check:end --> of --write-doc.
"""
import argparse
import datetime
import gc
import json
import os
import re
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import visionlib as V  # noqa: E402

BENCH = benchlib.BENCH_DIR
ROOT = benchlib.REPO_ROOT
OUT_MODELS = os.path.join(BENCH, "models", "zoo")
START, END = "<!-- zoo-check:start -->", "<!-- zoo-check:end -->"
ZOO = ["fasterrcnn_mobilenet_v3_large_320_fpn", "fasterrcnn_resnet50_fpn", "retinanet_resnet50_fpn",
       "fcos_resnet50_fpn", "maskrcnn_resnet50_fpn", "ssd300_vgg16", "ssdlite320_mobilenet_v3_large",
       "fcn_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"]
# score thresholds set to 0 where an untrained model's scores (about 1/91 after softmax, or
# sigmoid of the prior bias, 0.01) sit under the default and no image would get a detection
THRESH = {"fasterrcnn_mobilenet_v3_large_320_fpn": ("box_score_thresh", 0.05),
          "fasterrcnn_resnet50_fpn": ("box_score_thresh", 0.05),
          "maskrcnn_resnet50_fpn": ("box_score_thresh", 0.05),
          "retinanet_resnet50_fpn": ("score_thresh", 0.05),
          "fcos_resnet50_fpn": ("score_thresh", 0.2)}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def names_of(task, model_path):
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    return [o.name for o in m.graph.output] if task == "detection" else ["out"]


def pair(task, a, b):
    if task == "detection":
        res = [V.compare_det(x[:3], y[:3]) for x, y in zip(a, b)]
        out = {"ok": all(r["ok"] for r in res), "same_set": all(r["same_set"] for r in res),
               "counts": [r["count"] for r in res],
               "max_box": max((r.get("max_box", 0) for r in res), default=0),
               "max_score": max((r.get("max_score", 0) for r in res), default=0),
               "why": next((r["why"] for r in res if r["why"]), "")}
        if len(a[0]) > 3:   # masks
            import numpy as np
            md = [float(np.abs(x[3].astype(np.float32) - y[3].astype(np.float32).reshape(x[3].shape)).max())
                  if x[3].size and x[3].size == y[3].size else (0.0 if x[3].size == y[3].size else float("inf"))
                  for x, y in zip(a, b)]
            out["max_mask"] = max(md, default=0)
        return out
    res = [V.compare_seg(x, y) for x, y in zip(a, b)]
    return {"ok": all(r["ok"] for r in res), "max_abs": max(r.get("max_abs", float("inf")) for r in res),
            "argmax_agree": min(r.get("argmax_agree", 0) for r in res), "why": next((r["why"] for r in res if r["why"]), "")}


def check_one(a, name):
    import numpy as np
    import torch
    torch.set_num_threads(1)
    row = {"model": name}
    t0 = time.time()
    m, task = V.build(name, a.size)
    if name in THRESH:
        attr, val = THRESH[name]
        holder = m.roi_heads if attr == "box_score_thresh" else m
        setattr(holder, "score_thresh", 0.0 if not a.default_thresh else val)
        row["score_thresh"] = getattr(holder, "score_thresh")
    size = a.seg_size if task == "segmentation" else a.size
    row.update(task=task, size=size, params=sum(p.numel() for p in m.parameters()))
    x, tg = V.draw_set(a.images, size, 21, task)
    os.makedirs(OUT_MODELS, exist_ok=True)
    stem = os.path.join(OUT_MODELS, name)
    try:
        V.export(m, task, x, tg, stem)
    except Exception as e:  # noqa: BLE001
        row["error"] = f"export: {e}"
        return row
    row["export_s"] = time.time() - t0
    import onnx
    g = onnx.load(stem + ".onnx")
    ops = {}
    def walk(gr):
        for n in gr.node:
            ops[n.op_type] = ops.get(n.op_type, 0) + 1
            for at in n.attribute:
                if at.type == onnx.AttributeProto.GRAPH:
                    walk(at.g)
    walk(g.graph)
    row["ops"] = ops
    del g
    t1 = time.time()
    tout = V.torch_outputs(m, task, x)
    row["torch_s"] = time.time() - t1
    del m
    gc.collect()
    if task == "detection":
        row["ties"] = [int(len(o[2]) - len(np.unique(o[2]))) for o in tout]
        row["counts_torch"] = [int(len(o[2])) for o in tout]
    names = names_of(task, stem + ".onnx")
    env = benchlib.thread_env(1)
    # ONNX Runtime
    dump = stem + ".ort.json"
    r = benchlib.measure_process(["node", os.path.join(BENCH, "ort_vision.js"), stem + ".onnx",
                                  stem + ".eval.safetensors", "--threads", "1", "--repeat", "0", "--warmup", "1",
                                  "--dump", dump], env, a.timeout)
    row["ort_s"], row["ort_rss_mib"] = r.get("wall"), r.get("rss_mib")
    oout = None
    if r.get("ok"):
        oout = V.from_ort(json.load(open(dump)), task, names)
        os.remove(dump)
    else:
        row["ort_error"] = r.get("error")
    # bitflip
    outp = stem + ".bitflip.json"
    r = benchlib.measure_process([a.bitflip, "eval", stem + ".onnx", stem + ".eval.safetensors", "--threads", "1",
                                  "--outputs", outp], env, a.timeout)
    row["bitflip_s"], row["bitflip_rss_mib"] = r.get("wall"), r.get("rss_mib")
    bout = None
    if r.get("ok"):
        rows = json.load(open(outp))
        bout = V.from_bitflip(rows, task, names)
        if task == "segmentation":
            c = int(bout[0].size // (size * size))
            bout = [q.reshape(c, size, size) for q in bout]
        else:
            bout = [tuple(q.reshape(t.shape) if q.size == t.size else q for q, t in zip(b, tt))
                    for b, tt in zip(bout, tout)]
        os.remove(outp)
    else:
        row["bitflip_error"] = r.get("error")
    if task == "detection" and oout is not None:
        oout = [tuple(q.reshape(t.shape) if q.size == t.size else q for q, t in zip(o, tt)) for o, tt in zip(oout, tout)]
    if bout is not None:
        row["bitflip_vs_torch"] = pair(task, bout, tout)
    if oout is not None:
        row["ort_vs_torch"] = pair(task, oout, tout)
    if bout is not None and oout is not None:
        row["bitflip_vs_ort"] = pair(task, bout, oout)
    row["seconds"] = time.time() - t0
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bitflip", default=os.path.join(ROOT, "build", "bitflip"))
    ap.add_argument("--models", default=",".join(ZOO))
    ap.add_argument("--images", type=int, default=2)
    ap.add_argument("--size", type=int, default=320)
    ap.add_argument("--seg-size", type=int, default=256)
    ap.add_argument("--default-thresh", action="store_true", help="keep the constructors' score thresholds")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out", default=os.path.join(BENCH, "out", "zoo.json"))
    ap.add_argument("--keep", action="store_true", help="keep the rows of --out for models not run now")
    ap.add_argument("--write-doc")
    ap.add_argument("--render")
    a = ap.parse_args()
    if a.render:
        return write(json.load(open(a.render)), a.write_doc)
    a.bitflip = os.path.abspath(a.bitflip)
    # bitflip.export (visionlib.export) runs the binary measured, not the checkout's build/bitflip
    os.environ.setdefault("BITFLIP_BIN", os.path.abspath(a.bitflip))
    t0 = time.time()
    rows = []
    for name in a.models.split(","):
        log(f"zoo_check: {name}")
        try:
            row = check_one(a, name)
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            row = {"model": name, "error": str(e)}
        log("zoo_check: " + json.dumps({k: v for k, v in row.items() if k != "ops"}))
        rows.append(row)
        gc.collect()
    if a.keep and os.path.exists(a.out):
        done = {r["model"] for r in rows}
        old = json.load(open(a.out))["rows"]
        rows = [r for r in old if r["model"] not in done] + rows
        rows.sort(key=lambda r: ZOO.index(r["model"]) if r["model"] in ZOO else 99)
    commit = os.popen(f"git -C {shlex.quote(ROOT)} rev-parse --short HEAD").read().strip()
    doc = {"meta": {"date": datetime.datetime.fromtimestamp(t0, datetime.timezone.utc).isoformat(timespec="seconds"),
                    "seconds": time.time() - t0, "commit": commit, "machine": benchlib.machine_info(),
                    "command": "/usr/bin/python3 bench/zoo_check.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])},
           "rows": rows}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    return write(doc, a.write_doc)


def verdict(p, task):
    if not p:
        return "–"
    if task == "segmentation":
        return (("pass" if p["ok"] else "**differs**") +
                f" (max {p['max_abs']:.2g}, arg-max {100 * p['argmax_agree']:.2f}%)")
    # both engines sort by score: scores equal row by row but other boxes means tied scores
    # (an untrained head's) broken another way, at the top-k or detections-per-image cut
    tied = not p["ok"] and not p["same_set"] and p.get("max_score", 1) <= 1e-4 and \
        all(c[0] == c[1] for c in p.get("counts", []))
    s = ("pass" if p["ok"] else "same set, other order (equal or near-equal scores)" if p["same_set"] else
         "same scores, other tied boxes" if tied else "**differs**")
    extra = f"box {p['max_box']:.1g}, score {p['max_score']:.1g}"
    if "max_mask" in p:
        extra += f", mask {p['max_mask']:.1g}"
    why = re.sub(r"(\d+\.\d{4})\d+", r"\1", p.get("why", ""))      # 4 decimals
    return f"{s} ({extra})" + (f"; {why}" if s == "**differs**" and why else "")


def write(doc, path):
    meta, rows = doc["meta"], doc["rows"]
    lines = [START, "### The full-size zoo, checked (`bench/zoo_check.py`, `make zoo-check`)", "",
             f"- Date: {meta['date']}; took {meta['seconds']:.0f} s; bitflip at commit {meta['commit']}",
             f"- Command: `{meta['command']}`", "",
             "torchvision 0.14 constructors with `weights=None`, exported by `bitflip.export` at opset 13; "
             "detectors at min_size = max_size = 320 with their score threshold at 0 where an untrained model "
             "would output nothing (column *thresh*), segmenters at 256 × 256 with 21 classes; drawn images, one "
             "per call; 1 thread. Per image: detections compared by count, labels, boxes (1e-3 relative) and "
             "scores (1e-4); *ties*: equal scores among PyTorch's detections (untrained heads score alike); "
             "segmenters by the logits (1e-4) and arg-max.", "",
             "| model | thresh | detections (PyTorch, per image) | ties | bitflip vs PyTorch | ORT vs PyTorch | "
             "bitflip vs ORT | bitflip eval s | ORT s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['model']} | | | | **failed**: {r['error']} | | | | |")
            continue
        t = r["task"]
        bf = verdict(r.get("bitflip_vs_torch"), t) if "bitflip_vs_torch" in r else f"**fails**: {r.get('bitflip_error')}"
        ort = verdict(r.get("ort_vs_torch"), t) if "ort_vs_torch" in r else f"**fails**: {r.get('ort_error')}"
        bo = verdict(r.get("bitflip_vs_ort"), t) if "bitflip_vs_ort" in r else "–"
        fmt = lambda s: f"{s:.0f}" if isinstance(s, (int, float)) else "–"
        lines.append(f"| {r['model']} | {r.get('score_thresh', '')} | {r.get('counts_torch', '–') if t == 'detection' else 'seg'} | "
                     f"{r.get('ties', '–') if t == 'detection' else ''} | {bf} | {ort} | {bo} | "
                     f"{fmt(r.get('bitflip_s'))} | {fmt(r.get('ort_s'))} |")
    lines.append(END)
    text = "\n".join(lines) + "\n"
    print(text)
    if path:
        benchlib.write_section(path, START, END, text)
    bad = [r for r in rows if r.get("error") or "bitflip_vs_torch" not in r]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
