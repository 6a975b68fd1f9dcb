#!/usr/bin/python3
"""Detectors and segmenters exported as users export them, run through bitflip: the matrix of
docs/OPS.md, "Detectors and segmenters as users export them" (issue 31's held-out check).

  /usr/bin/python3 bench/det_exports.py [--bin build] [--only MODEL,...] [--variants bf13,o11,...]
        [--out bench/out/det_exports] [--trials 8] [--images 2] [--write-doc docs/OPS.md]
  /usr/bin/python3 bench/det_exports.py --render bench/out/det_exports/rows.json [--write-doc docs/OPS.md]

Every model is built small (weights=None; R-CNNs, RetinaNet and
FCOS with min_size = max_size = --det-size; drawn images of --image-size pixels; segmenters with
3 classes at --seg-size; the YOLO-style detector and the U-Net are tests/fixtures/det_models.py's,
with the weights their fixtures in tests/fixtures/det/ were trained to), and exported
  bf13     with bitflip.export (opset 13: one image [3, H, W] per call, or [B, 3, H, W] logits);
  o11      plain torch.onnx.export at opset 11 of the wrapper users write (a detector's list input
           from a tensor [1, 3, H, W], its list of dicts as a tuple boxes, labels, scores; a
           segmenter's dict as its 'out'), static shapes, named inputs and outputs;
  o13dyn   the same at opset 13 with dynamic_axes on batch, height and width (and on the detections);
  o17      the same at opset 17 with the exporter's own names (no input_names / output_names), a
           dynamic batch (the R-CNNs' RoiAlign: docs/OPS.md, RoiAlign);
  direct   (detectors) torch.onnx.export of the model itself, as torchvision's docs do, with a list
           of one image as its input and the dict's keys as output names.
The resnet50 and VGG models run the variants HEAVY lists (their bitflip.export at opset 13 is
bench/zoo_check.py's), the others all five; --variants all runs every one everywhere.
Per export, into --out/NAME_VARIANT.*: the eval set as a user writes it (bitflip.save_detection_eval_set
/ save_segmentation_eval_set, the input named like the graph's), then
  info       bitflip info;
  eval       bitflip eval --outputs --json: outputs against PyTorch's, image by image
             (bench/visionlib.compare_det / compare_seg; ties in untrained scores said as such),
             and the metrics (map, map50, recall or miou, pixel_accuracy);
  ort        (bf13) ONNX Runtime's outputs against PyTorch's (bench/ort_vision.js, where node and
             onnxruntime-node are installed);
  campaign   bitflip run --local of --trials single-bit weight faults: outcomes and IVMOD;
  conformance  NAME_VARIANT.ref.json written as the conformance README says (golden outputs per
             image, golden metrics from tests/fixtures/make_det_models.py's COCO / VOC code, and
             `ties` where PyTorch's detections-per-image cut fell among equal scores), then
             bitflip-conformance on the directory (what `make conformance CONFORMANCE_DIR=DIR` runs).
Prints a markdown table; --write-doc replaces the section between <!-- det-exports:start --> and
<!-- det-exports:end -->. Exit status 1 when a step failed.
"""
import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import traceback
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIX = os.path.join(ROOT, "tests", "fixtures")
sys.path.insert(0, FIX)
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
sys.path.insert(0, HERE)

START, END = "<!-- det-exports:start -->", "<!-- det-exports:end -->"
DET = ["fasterrcnn_mobilenet_v3_large_320_fpn", "fasterrcnn_resnet50_fpn", "retinanet_resnet50_fpn",
       "fcos_resnet50_fpn", "maskrcnn_resnet50_fpn", "keypointrcnn_resnet50_fpn", "ssd300_vgg16",
       "ssdlite320_mobilenet_v3_large", "yolo"]
SEG = ["fcn_resnet50", "deeplabv3_mobilenet_v3_large", "deeplabv3_resnet50", "lraspp_mobilenet_v3_large", "unet"]
VARIANTS = ["bf13", "o11", "o13dyn", "o17", "direct"]
# what each model runs by default (--variants all: every one): the resnet50 / VGG models'
# bitflip.export at opset 13 is bench/zoo_check.py's (docs/OPS.md, "The full-size zoo")
HEAVY = {"fasterrcnn_resnet50_fpn": ["o11", "o13dyn", "o17"], "retinanet_resnet50_fpn": ["o11", "o13dyn", "o17"],
         "fcos_resnet50_fpn": ["o11", "o13dyn", "o17"], "maskrcnn_resnet50_fpn": ["o11", "o17", "direct"],
         "keypointrcnn_resnet50_fpn": ["o11"], "ssd300_vgg16": ["o11", "o13dyn", "o17"],
         "fcn_resnet50": ["o11", "o13dyn", "o17"], "deeplabv3_resnet50": ["o11", "o13dyn", "o17"],
         # its 90 per-class selections take the exporter minutes per export under load
         "ssdlite320_mobilenet_v3_large": ["bf13", "o11", "o13dyn"]}
RCNN = ("fasterrcnn", "maskrcnn", "keypointrcnn")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------

def trained_tiny(name):
    """det_models' YOLO-style detector or U-Net with the weights of tests/fixtures/det/NAME.onnx
    (its initializers are the BatchNorm-folded module's state_dict)."""
    import onnx
    import torch
    from onnx import numpy_helper
    import det_models as D
    m = {"yolo": D.b_yolo, "unet": D.b_unet}[name](40)
    D.fold_batchnorms(m)
    g = onnx.load(os.path.join(FIX, "det", name + ".onnx"))
    inits = {i.name: numpy_helper.to_array(i) for i in g.graph.initializer}
    sd = m.state_dict()
    missing = [k for k, v in sd.items() if v.dtype.is_floating_point and k not in inits]
    if missing:
        raise RuntimeError(f"det/{name}.onnx lacks {missing[:3]}")
    m.load_state_dict({k: torch.from_numpy(np.array(inits[k])) if k in inits else v for k, v in sd.items()})
    return m.eval()


def build(name, a):
    """(model in eval mode, task, image size)"""
    import torch
    from torchvision.models import detection as det, segmentation as seg
    torch.manual_seed(0)
    if name in ("yolo", "unet"):
        return trained_tiny(name), ("detection" if name == "yolo" else "segmentation"), 40
    kw = dict(weights=None, weights_backbone=None)
    rs = dict(min_size=a.det_size, max_size=a.det_size)
    if name in SEG:
        c = dict(num_classes=3)
        if not name.startswith("lraspp"):
            c["aux_loss"] = False
        return getattr(seg, name)(**kw, **c).eval(), "segmentation", a.seg_size
    if name == "ssdlite320_mobilenet_v3_large":
        import visionlib as V
        m = det.ssdlite320_mobilenet_v3_large(score_thresh=0.3, **kw)
        V.he_init(m, 0, head_scale=0.3)     # torchvision's init scores every box 1/91 (bench/visionlib.py)
        return m.eval(), "detection", a.image_size
    if name == "ssd300_vgg16":
        return det.ssd300_vgg16(**kw).eval(), "detection", a.image_size
    extra = {}
    if name.startswith(RCNN):
        extra = dict(box_score_thresh=0.0, rpn_pre_nms_top_n_test=200, rpn_post_nms_top_n_test=100,
                     box_detections_per_img=30)
    elif name.startswith(("retinanet", "fcos")):
        extra = dict(score_thresh=0.0 if name.startswith("retinanet") else 0.2, detections_per_img=30)
    if name.startswith("keypointrcnn"):
        extra["num_classes"] = 2
    return getattr(det, name)(**kw, **rs, **extra).eval(), "detection", a.image_size


def draw(n, size, task, seed=21):
    """n drawn images [n, 3, size, size] and targets (det: dicts; seg: masks [n, H, W])."""
    import det_models as D
    rng = np.random.default_rng(seed)
    x, tg = [], []
    for _ in range(n):
        im, b, lab, mk = D.draw(rng, size)
        x.append((im if task == "detection" else (im - 0.5) / 0.25).astype(np.float32))   # det_models.py's
        tg.append(mk.astype(np.int64) if task == "segmentation" else {"boxes": b.reshape(-1, 4), "labels": lab})
    return np.stack(x), tg


def user_wrapper(model, name, task, style):
    """The wrapper a user writes around a torchvision model for torch.onnx.export."""
    from torch import nn

    class DetList(nn.Module):
        """[1, 3, H, W] -> the list torchvision wants; its one dict -> a tuple."""
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            out = self.m(list(x))[0] if style == "list" else self.m([x[0]])[0]
            return out["boxes"], out["labels"], out["scores"]

    # the same wrappers as the user_det fixtures' (conformance_user_det)
    from make_user_det_exports import SegUser, YoloUser

    if task == "segmentation":
        return SegUser(model)
    return YoloUser(model) if name == "yolo" else DetList(model)


def export(model, name, task, variant, x, path):
    """Writes path; returns (graph input name, output names, how)."""
    import torch
    import onnx
    import bitflip
    a = torch.from_numpy(x[:1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if variant == "bf13":
            ex = a[0] if task == "detection" else a
            bitflip.export(model, ex, path, verbose=False, check=False,
                           task=task if name in ("yolo", "unet") else None)
        elif variant == "direct":
            if name == "yolo":
                raise Skip("the YOLO takes one image, not a list: it is what o11 and bf13 export")
            torch.onnx.export(model, ([a[0]],), path, opset_version=11, input_names=["images"],
                              output_names=["boxes", "labels", "scores"] + (["masks"] if "mask" in name else []))
        else:
            opset = {"o11": 11, "o13dyn": 13, "o17": 17}[variant]
            w = user_wrapper(model, name, task, "list" if variant != "o13dyn" else "index").eval()
            outs = ["boxes", "labels", "scores"] if task == "detection" else ["out"]
            kw = dict(opset_version=opset)
            if variant != "o17":
                kw.update(input_names=["input"], output_names=outs)
            if variant == "o13dyn":
                dyn = {"input": {0: "batch", 2: "height", 3: "width"}}
                dyn.update({o: {0: "detections"} for o in outs} if task == "detection" else
                           {"out": {0: "batch", 2: "height", 3: "width"}})
                kw["dynamic_axes"] = dyn
            elif variant == "o17":
                g0 = None
                kw["dynamic_axes"] = None
                torch.onnx.export(w, (a,), path, **kw)
                g0 = onnx.load(path, load_external_data=False).graph
                # the exporter's names, then a dynamic batch by them, as a user would after looking
                inits = {i.name for i in g0.initializer}
                iname = [i.name for i in g0.input if i.name not in inits][0]
                dyn = {iname: {0: "batch"}}
                if task == "segmentation":
                    dyn[g0.output[0].name] = {0: "batch"}
                kw["dynamic_axes"] = dyn
            torch.onnx.export(w, (a,), path, **kw)
    g = onnx.load(path, load_external_data=False).graph
    inits = {i.name for i in g.initializer}
    return [i.name for i in g.input if i.name not in inits][0], [o.name for o in g.output]


class Skip(Exception):
    pass


def torch_outputs(model, name, task, x):
    import torch
    outs = []
    with torch.inference_mode():
        for i in range(len(x)):
            xi = torch.from_numpy(x[i])
            if task == "detection":
                o = model(xi) if name == "yolo" else model([xi])[0]
                if isinstance(o, dict):     # Mask R-CNN's masks too: the direct export outputs them
                    o = tuple(o[k] for k in ("boxes", "labels", "scores", "masks") if k in o)
                outs.append(tuple(v.numpy() for v in o))
            else:
                outs.append(model(xi[None])["out"][0].numpy())
    return outs


# --------------------------------------------------------------------------
# running bitflip
# --------------------------------------------------------------------------

def run(cmd, timeout=1200):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.time() - t0
    except subprocess.TimeoutExpired:
        return -1, "", "timeout", time.time() - t0


def tail(s, n=2):
    lines = [x for x in s.strip().splitlines() if x.strip()]
    return " / ".join(lines[-n:])[:400]


def det_rows(rows, outs):
    """bitflip eval --outputs rows (objects keyed by output name) -> [(boxes, labels, scores)], the
    outputs taken by name, else in the graph's order."""
    res = []
    for r in rows:
        vals = [r[k] for k in ("boxes", "labels", "scores")] if all(k in r for k in ("boxes", "labels", "scores")) \
            else [r[k] for k in outs[:3]]
        res.append((np.array(vals[0], np.float32).reshape(-1, 4), np.array(vals[1], np.float64).astype(np.int64),
                    np.array(vals[2], np.float32)))
    return res


def verdict_det(res):
    if all(r["ok"] for r in res):
        return "pass"
    if all(r["ok"] or r["same_set"] for r in res):
        return "pass (same set, tied scores in another order)"
    tied = all(r["ok"] or r["same_set"] or (r["count"][0] == r["count"][1] and r.get("max_score", 1) <= 1e-4)
               for r in res)
    if tied:
        return "pass (same scores, other tied boxes)"
    return "FAIL: " + next(r["why"] for r in res if not r["ok"])


def check(case, a, stem, task, in_name, outs, tout, x, tg):  # noqa: C901
    import visionlib as V
    import make_det_models as MD
    bf = os.path.join(a.bin, "bitflip")
    row = {}
    rc, so, se, _ = run([bf, "info", stem + ".onnx"])
    row["info"] = "ok" if rc == 0 else "FAIL: " + tail(so + se)
    rc, so, se, secs = run([bf, "eval", stem + ".onnx", stem + ".eval.safetensors", "--threads", "1", "--json",
                            "--outputs", stem + ".bitflip.json"])
    row["eval_s"] = round(secs, 1)
    if rc != 0:
        row["eval"] = "FAIL: " + tail(so + se)
        return row
    try:
        js = json.loads(so)
    except ValueError:
        js = {}
    rows = json.load(open(stem + ".bitflip.json"))
    if task == "detection":
        got = det_rows(rows, outs)
        res = [V.compare_det(t[:3], b) for t, b in zip(tout, got)]
        row["eval"] = verdict_det(res)
        row["detections"] = [len(t[2]) for t in tout]
        gts = [(t["boxes"], t["labels"]) for t in tg]
        want = MD.coco_map([(t[0], t[1], t[2]) for t in tout], gts)
        row["metrics"] = {k: js.get(k) for k in ("map", "map50", "recall")}
        row["metrics_ref"] = dict(zip(("map", "map50", "recall"), want))
    else:
        c = tout[0].shape[0]
        got = [np.array(r if not isinstance(r, dict) else r[outs[0]], np.float32).reshape(tout[0].shape) for r in rows]
        res = [V.compare_seg(t, b) for t, b in zip(tout, got)]
        row["eval"] = "pass (max %.2g)" % max(r["max_abs"] for r in res) if all(r["ok"] for r in res) else \
            "FAIL: " + next(r["why"] for r in res if not r["ok"])
        want = MD.seg_metrics(np.stack(tout), np.stack(tg), c)
        row["metrics"] = {k: js.get(k) for k in ("miou", "pixel_accuracy")}
        row["metrics_ref"] = dict(zip(("miou", "pixel_accuracy"), want))
    bad = [k for k, v in row["metrics_ref"].items()
           if not isinstance(row["metrics"].get(k), (int, float)) or abs(row["metrics"][k] - v) > 1e-4]
    if bad and not row["eval"].startswith("FAIL") and row["eval"] == "pass":
        row["eval"] = "FAIL: metric %s %s vs %.6f" % (bad[0], row["metrics"].get(bad[0]), row["metrics_ref"][bad[0]])
    # ONNX Runtime, for the one-image and the segmenters' exports
    ort = os.path.join(HERE, "ort_vision.js")
    if a.ort and (case["variant"] == "bf13" or task == "segmentation"):
        rc, so, se, _ = run(["node", ort, stem + ".onnx", stem + ".eval.safetensors", "--threads", "1", "--repeat", "0",
                             "--warmup", "1", "--batch", "1", "--dump", stem + ".ort.json"],
                            timeout=1200)
        if rc == 0:
            d = json.load(open(stem + ".ort.json"))
            if task == "detection":
                oo = [tuple(np.array(r[k]["data"], np.int64 if k == outs[1] else np.float32).reshape(r[k]["dims"])
                            for k in outs[:3]) for r in d]
                row["ort"] = verdict_det([V.compare_det(t[:3], o) for t, o in zip(tout, oo)])
            else:
                oo = [np.array(r[outs[0]]["data"], np.float32).reshape(r[outs[0]]["dims"])[0] for r in d]
                rr = [V.compare_seg(t, o) for t, o in zip(tout, oo)]
                row["ort"] = "pass (max %.2g)" % max(r["max_abs"] for r in rr) if all(r["ok"] for r in rr) else \
                    "differs: " + next(r["why"] for r in rr if not r["ok"])
        else:
            row["ort"] = "fails: " + tail(se or so, 1)
    # a short campaign
    spec = {"model": os.path.abspath(stem + ".onnx"), "dataset": os.path.abspath(stem + ".eval.safetensors"),
            "seed": 1, "trials": a.trials, "faults": {"model": "bitflip", "bits": 1}}
    with open(stem + ".spec.json", "w") as f:
        json.dump(spec, f)
    rc, so, se, secs = run([bf, "run", "--local", stem + ".spec.json", "--threads", "1", "--format", "json",
                            "--trials-out", stem + ".trials.jsonl"])
    row["campaign_s"] = round(secs, 1)
    if rc not in (0, 1):
        row["campaign"] = "FAIL: " + tail(so + se)
    else:
        try:
            oc = json.loads(so)["summary"]["outcomes"]
            row["campaign"] = "ok: " + ", ".join(f"{k} {v}" for k, v in oc.items() if v)
            if task == "detection":     # IVMOD: the share of images a trial's faults made critical
                tr = [json.loads(ln) for ln in open(stem + ".trials.jsonl") if ln.strip()]
                ch = [t.get("changed_predictions", 0) or 0 for t in tr]
                row["campaign"] += "; IVMOD %.2f" % (sum(ch) / max(1, len(tr) * a.images))
        except (ValueError, KeyError, OSError) as e:
            row["campaign"] = "ok (%s)" % e
    return row


def tied_past_cut(model, name, x, tout, outs):
    """The reference's "ties" (tests/fixtures/README.md, "Ties at the cut"): per image, the
    golden scores PyTorch had more detections of than it kept, found by running it again
    with its detections-per-image cap lifted; None when there are none."""
    import torch
    owner = getattr(model, "roi_heads", model)
    if not hasattr(owner, "detections_per_img") or name == "yolo":
        return None
    cap, owner.detections_per_img = owner.detections_per_img, 10 ** 6
    try:
        free = torch_outputs(model, name, "detection", x)
    finally:
        owner.detections_per_img = cap
    tied = []
    for kept, every in zip(tout, free):
        vals, counts = np.unique(kept[2].astype(np.float32), return_counts=True)
        allv, allc = np.unique(every[2].astype(np.float32), return_counts=True)
        n_all = dict(zip(allv.tolist(), allc.tolist()))
        tied.append([float(v) for v, c in zip(vals.tolist(), counts.tolist()) if n_all.get(v, 0) > c])
    if not any(tied):
        return None
    return {"score_output": outs[2], "free_outputs": [outs[0]] + ([outs[3]] if len(outs) > 3 else []),
            "tied_scores": tied}


def write_ref(stem, name, task, in_name, outs, tout, tg, ties=None):
    """NAME.ref.json in the conformance format (tests/fixtures/README.md, detection and segmentation):
    golden outputs only (untrained models: a fault's outputs sit on knife edges, see zoo_check)."""
    import make_det_models as MD
    base = os.path.basename(stem)
    ref = {"model": base + ".onnx", "task": task, "inputs": [in_name], "outputs": outs}
    if task == "detection":
        ref["golden"] = [{outs[0]: o[0].reshape(-1, 4).tolist(), outs[1]: o[1].tolist(), outs[2]: o[2].tolist()}
                         for o in tout]
        if len(outs) > 3:   # masks [K, 1, H, W]: a row of H*W values per detection
            for g, o in zip(ref["golden"], tout):
                g[outs[3]] = o[3].reshape(len(o[3]), -1).tolist()
        m = MD.coco_map([(o[0], o[1], o[2]) for o in tout], [(t["boxes"], t["labels"]) for t in tg])
        ref.update(golden_map=m[0], golden_map50=m[1], golden_recall=m[2])
    else:
        ref["golden"] = [o.reshape(-1).tolist() for o in tout]
        mi, pa = MD.seg_metrics(np.stack(tout), np.stack(tg), tout[0].shape[0])
        ref.update(golden_miou=mi, golden_pixel_accuracy=pa)
    ref["faults"] = []
    if task == "detection" and ties:
        ref["ties"] = ties
    with open(stem + ".ref.json", "w") as f:
        json.dump(ref, f)


def one(a, name, variant):
    import torch
    import bitflip
    from bitflip.vision import save_detection_eval_set, save_segmentation_eval_set
    torch.set_num_threads(1)
    case = {"name": name, "variant": variant}
    row = {"model": name, "variant": variant}
    t0 = time.time()
    model, task, size = build(name, a)
    x, tg = draw(a.images, size, task)
    stem = os.path.join(a.out, f"{name}_{variant}")
    try:
        in_name, outs = export(model, name, task, variant, x, stem + ".onnx")
    except Skip as e:
        row["export"] = "skip: " + str(e)
        return row
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        row["export"] = "FAIL: " + (str(e).strip().splitlines() or ["?"])[-1][:300]
        return row
    row["export"] = "ok"
    row["export_s"] = round(time.time() - t0, 1)
    row["opset"] = {"bf13": 13, "o11": 11, "o13dyn": 13, "o17": 17, "direct": 11}[variant]
    if task == "detection":
        save_detection_eval_set(stem + ".eval.safetensors", x, tg, input_name=in_name)
    else:
        save_segmentation_eval_set(stem + ".eval.safetensors", x, np.stack(tg), input_name=in_name)
    tout = torch_outputs(model, name, task, x)
    write_ref(stem, name, task, in_name, outs, tout, tg,
              tied_past_cut(model, name, x, tout, outs) if task == "detection" else None)
    row.update(check(case, a, stem, task, in_name, outs, tout, x, tg))
    bfc = os.path.join(a.bin, "tests", "bitflip-conformance")
    rc, so, se, secs = run([bfc, "--only", os.path.basename(stem), a.out])
    # the reference's ties (tests/fixtures/README.md, "Ties at the cut"): boxes PyTorch chose
    # among equal scores past its cut that are not among bitflip's are said, not passed silently
    unv = sum(int(m) for m in re.findall(r"(\d+) of their boxes unverifiable", so))
    tied = sum(int(m) for m in re.findall(r"ties: (\d+) rows", so))
    ok = "ok" + (f" ({tied} tied rows, {unv} boxes unverifiable)" if tied else "")
    row["conformance"] = ok if rc == 0 else ("ties: " if "tied" in row.get("eval", "") else "FAIL: ") + tail("\n".join(
        ln for ln in (so + se).splitlines() if "MISMATCH" in ln or "load" in ln or "prepare" in ln or "run:" in ln)
        or so + se)
    row["seconds"] = round(time.time() - t0, 1)
    _ = bitflip
    return row


# --------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------

def render(doc, path):
    meta, rows = doc["meta"], doc["rows"]
    cols = ["export", "info", "eval", "ort", "campaign", "conformance"]
    lines = [START, "### Results (`bench/det_exports.py`, `make det-exports`)", "",
             f"- Date: {meta['date']}; took {meta['seconds']:.0f} s; bitflip at commit {meta['commit']}; "
             f"load {meta.get('load', '?')}",
             f"- Command: `{meta['command']}`", "",
             "| model | export | opset | bitflip info | eval vs PyTorch | ORT vs PyTorch | campaign outcomes | "
             "conformance | metrics (bitflip; reference) |", "|---|---|---|---|---|---|---|---|---|"]
    shown = []
    for r in rows:
        # bitflip-conformance compares to 1e-4 relative (1e-5 absolute); a golden mismatch where
        # the image-by-image comparison (1e-3 on boxes, 1e-4 on scores and logits, absolute plus
        # relative) passes is rounding: a box corner near 0 (centre minus half size), or a deep
        # network's logit near 0 (docs/OPS.md says how large, and how large ONNX Runtime's is)
        if str(r.get("conformance", "")).startswith("FAIL") and str(r.get("eval", "")).startswith("pass"):
            r = dict(r, conformance="rounding: " + r["conformance"][len("FAIL: "):])
        shown.append(r)
        met = ""
        if r.get("metrics"):
            met = ", ".join(f"{k} {v:.3f}" if isinstance(v, (int, float)) else f"{k} {v}"
                            for k, v in r["metrics"].items())
            met += "; " + ", ".join(f"{v:.3f}" for v in r.get("metrics_ref", {}).values())
        cells = [str(r.get(c, "–")).replace("|", "/") for c in cols]
        cells = [c if len(c) <= 150 else c[:147] + "..." for c in cells]
        cells = [" ".join(c.split()) for c in cells]
        lines.append(f"| {r['model']} | {r['variant']} | {r.get('opset', '')} | {cells[1]} | {cells[2]} | "
                     f"{cells[3]} | {cells[4]} | {cells[5]} | {met} |" if cells[0] == "ok" else
                     f"| {r['model']} | {r['variant']} | {r.get('opset', '')} | {cells[0]} | | | | | |")
    lines.append(END)
    text = "\n".join(lines) + "\n"
    print(text)
    if path:
        import benchlib
        benchlib.write_section(path, START, END, text)
    return 1 if any(str(r.get(c, "")).startswith("FAIL") for r in shown for c in cols) else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only", default="")
    ap.add_argument("--variants", default="", help="comma-separated, or all (default: HEAVY's per model, else all)")
    ap.add_argument("--skip", default="", help="MODEL:VARIANT,... not to run (done by an earlier run: --keep)")
    ap.add_argument("--out", default=os.path.join(HERE, "out", "det_exports"))
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--images", type=int, default=2)
    ap.add_argument("--image-size", type=int, default=96)
    ap.add_argument("--det-size", type=int, default=128, help="R-CNN/RetinaNet/FCOS min_size = max_size")
    ap.add_argument("--seg-size", type=int, default=64)
    ap.add_argument("--no-ort", dest="ort", action="store_false")
    ap.add_argument("--load", help="with --collect: the load the runs saw, as said in the table")
    ap.add_argument("--command", help="with --collect: the commands that made the logs, as said in the table")
    ap.add_argument("--keep", action="store_true", help="keep --out/rows.json's rows of cases not run now")
    ap.add_argument("--write-doc")
    ap.add_argument("--render")
    ap.add_argument("--collect", help="LOG,LOG,...: the rows of earlier runs' stderr (one JSON line per case; a "
                    "later line replaces an earlier one of the same model and variant), rendered as one table")
    a = ap.parse_args()
    if a.render:
        return render(json.load(open(a.render)), a.write_doc)
    if a.collect:
        got = {}
        for log_path in a.collect.split(","):
            for ln in open(log_path):
                if ln.startswith("{"):
                    r = json.loads(ln)
                    got[(r["model"], r["variant"])] = r
        order = {m: i for i, m in enumerate(DET + SEG)}
        rows = sorted(got.values(), key=lambda r: (order.get(r["model"], 99), VARIANTS.index(r["variant"])))
        commit = os.popen(f"git -C {shlex.quote(ROOT)} rev-parse --short HEAD").read().strip()
        doc = {"meta": {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                        "seconds": sum(r.get("seconds", 0) for r in rows), "commit": commit,
                        "load": a.load or "?", "command": a.command or "/usr/bin/python3 bench/det_exports.py"},
                "rows": rows}
        return render(doc, a.write_doc)
    a.bin = os.path.abspath(a.bin)
    os.environ.setdefault("BITFLIP_BIN", os.path.join(a.bin, "bitflip"))
    if a.ort and not (shutil.which("node") and subprocess.run(["node", "-e", "require('onnxruntime-node')"], cwd=HERE,
                                                              capture_output=True).returncode == 0):
        log("det_exports: no node or onnxruntime-node (bench/node_modules, or NODE_PATH): ONNX Runtime not run")
        a.ort = False
    os.makedirs(a.out, exist_ok=True)
    only = [m for m in a.only.split(",") if m] or DET + SEG
    t0 = time.time()
    rows = []
    for name in only:
        vs = VARIANTS if a.variants == "all" else a.variants.split(",") if a.variants else HEAVY.get(name, VARIANTS)
        for v in vs:
            if f"{name}:{v}" in a.skip.split(","):
                continue
            if v == "direct" and name in SEG:
                continue
            log(f"== {name} {v}")
            try:
                row = one(a, name, v)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                row = {"model": name, "variant": v, "export": "FAIL: " + str(e)[:300]}
            log(json.dumps(row))
            rows.append(row)
    path = os.path.join(a.out, "rows.json")
    if a.keep and os.path.exists(path):
        done = {(r["model"], r["variant"]) for r in rows}
        rows = [r for r in json.load(open(path))["rows"] if (r["model"], r["variant"]) not in done] + rows
        order = {m: i for i, m in enumerate(DET + SEG)}
        rows.sort(key=lambda r: (order.get(r["model"], 99), VARIANTS.index(r["variant"])))
    commit = os.popen(f"git -C {shlex.quote(ROOT)} rev-parse --short HEAD").read().strip()
    doc = {"meta": {"date": datetime.datetime.fromtimestamp(t0, datetime.timezone.utc).isoformat(timespec="seconds"),
                    "seconds": time.time() - t0, "commit": commit, "load": os.getloadavg()[0],
                    "command": "/usr/bin/python3 bench/det_exports.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])},
           "rows": rows}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return render(doc, a.write_doc)


if __name__ == "__main__":
    sys.exit(main())
