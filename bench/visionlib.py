"""Shared by bench/det_bench.py and bench/zoo_check.py: torchvision's detectors and
segmenters at full size (weights=None, seeded), their export through bitflip.export,
drawn eval sets, and the per-image comparison of detections.

Images and ground truth come from tests/fixtures/det_models.draw (a noisy background with
up to three red rectangles, class 1, and blue ellipses, class 2)."""
import json
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

MEAN, STD = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)


def he_init(model, seed, head_scale=1.0):
    """Every Conv2d's weight drawn He-normal (std sqrt(2 / fan_in)), seeded; the SSDlite
    class head's last convolutions (91 classes per anchor) at head_scale times that.
    torchvision's weights=None SSDlite draws every conv at std 0.03, under which the
    features shrink to 1e-14 by the last level: every class score is then exactly 1/91."""
    import torch
    g = torch.Generator().manual_seed(seed)
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Conv2d):
            fan_in = mod.weight[0].numel()
            s = (2.0 / fan_in) ** 0.5
            if "classification_head" in name and mod.out_channels % 91 == 0:
                s *= head_scale
            with torch.no_grad():
                mod.weight.copy_(torch.randn(mod.weight.shape, generator=g) * s)


def build(name, size):
    """(model in eval mode, task). `size`: the detectors' transform min_size = max_size
    (the image's side after resizing); ignored by SSD (its transform is fixed)."""
    import torch
    from torchvision.models import detection as det, segmentation as seg
    torch.manual_seed(0)
    kw = dict(weights=None, weights_backbone=None)
    rs = dict(min_size=size, max_size=size)
    if name == "ssdlite320":
        m = det.ssdlite320_mobilenet_v3_large(score_thresh=0.3, **kw)
        he_init(m, 0, head_scale=0.3)
        return m.eval(), "detection"
    builders = {
        "fasterrcnn_mobilenet_v3_large_320_fpn": lambda: det.fasterrcnn_mobilenet_v3_large_320_fpn(**kw, **rs),
        "fasterrcnn_resnet50_fpn": lambda: det.fasterrcnn_resnet50_fpn(**kw, **rs),
        "retinanet_resnet50_fpn": lambda: det.retinanet_resnet50_fpn(**kw, **rs),
        "fcos_resnet50_fpn": lambda: det.fcos_resnet50_fpn(**kw, **rs),
        "maskrcnn_resnet50_fpn": lambda: det.maskrcnn_resnet50_fpn(**kw, **rs),
        "ssd300_vgg16": lambda: det.ssd300_vgg16(**kw),
        "ssdlite320_mobilenet_v3_large": lambda: det.ssdlite320_mobilenet_v3_large(**kw),
        "fcn_resnet50": lambda: seg.fcn_resnet50(num_classes=21, aux_loss=False, **kw),
        "deeplabv3_mobilenet_v3_large": lambda: seg.deeplabv3_mobilenet_v3_large(num_classes=21, aux_loss=False, **kw),
        "lraspp_mobilenet_v3_large": lambda: seg.lraspp_mobilenet_v3_large(num_classes=21, **kw),
    }
    m = builders[name]()
    return m.eval(), ("segmentation" if name.startswith(("fcn", "deeplab", "lraspp")) else "detection")


def draw_set(n, size, seed, task):
    """n drawn images [n, 3, size, size] (segmentation: normalized as torchvision's
    reference scripts do) and their targets (boxes/labels dicts, or masks [n, H, W])."""
    import det_models as D
    rng = np.random.default_rng(seed)
    imgs, tg = [], []
    for _ in range(n):
        im, b, lab, mk = D.draw(rng, size)
        if task == "segmentation":
            im = ((im.transpose(1, 2, 0) - MEAN) / STD).transpose(2, 0, 1).astype(np.float32)
            tg.append(mk.astype(np.int64))
        else:
            tg.append({"boxes": np.asarray(b, np.float32).reshape(-1, 4), "labels": np.asarray(lab, np.int64)})
        imgs.append(im.astype(np.float32))
    return np.stack(imgs), tg


def export(model, task, x, targets, stem, bitflip=None):
    """stem.onnx and stem.eval.safetensors through bitflip.export (opset 13)."""
    import torch
    import bitflip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if task == "detection":
            bitflip.export(model, torch.from_numpy(x[0]), stem + ".onnx", eval_inputs=x, labels=targets,
                           verbose=False)
        else:
            bitflip.export(model, torch.from_numpy(x[:2]), stem + ".onnx", eval_inputs=x, labels=np.stack(targets),
                           verbose=False, check=False)


def torch_outputs(model, task, x):
    """PyTorch eager's outputs per image: detection [(boxes, labels, scores[, masks])],
    segmentation [out [C, H, W]] (one image per call for detectors, as the export runs)."""
    import torch
    outs = []
    with torch.inference_mode():
        for i in range(len(x)):
            xi = torch.from_numpy(x[i])
            if task == "detection":
                o = model([xi])[0]
                outs.append(tuple(o[k].numpy() for k in ("boxes", "labels", "scores", "masks") if k in o))
            else:
                outs.append(model(xi[None])["out"][0].numpy())
    return outs


def from_bitflip(rows, task, names):
    """`bitflip eval --outputs X.json` rows -> the torch_outputs layout."""
    out = []
    for r in rows:
        if task == "detection":
            t = []
            for k in names:
                v = np.array(r[k], dtype=np.int64 if k == "labels" else np.float32)
                t.append(v.reshape(-1, 4) if k == "boxes" else v)
            out.append(tuple(t))
        else:
            out.append(np.array(r if not isinstance(r, dict) else r["out"], np.float32))
    return out


def from_ort(rows, task, names):
    out = []
    for r in rows:
        if task == "detection":
            out.append(tuple(np.array(r[k]["data"], np.int64 if k == "labels" else np.float32).reshape(r[k]["dims"])
                             for k in names))
        else:
            d = r[names[0]]
            out.append(np.array(d["data"], np.float32).reshape(d["dims"])[0])
    return out


def box_iou(a, b):
    a, b = np.asarray(a, np.float64).reshape(-1, 4), np.asarray(b, np.float64).reshape(-1, 4)
    area = lambda z: np.clip(z[:, 2] - z[:, 0], 0, None) * np.clip(z[:, 3] - z[:, 1], 0, None)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(rb - lt, 0, None), axis=2)
    return inter / np.maximum(area(a)[:, None] + area(b)[None, :] - inter, 1e-12)


def compare_det(a, b, box_tol=1e-3, score_tol=1e-4):
    """Per image: same count, and row by row labels equal, boxes within box_tol (pixels,
    absolute + relative), scores within score_tol; on a mismatch, whether the rows agree
    as sets (the same detections in another order: equal scores, ties) and the first
    difference. Returns dict(ok, same_set, why, max_box, max_score, ties)."""
    ba, la, sa = a[0].reshape(-1, 4), a[1], a[2]
    bb, lb, sb = b[0].reshape(-1, 4), b[1], b[2]
    res = {"count": [len(sa), len(sb)], "ties": int(len(sa) - len(np.unique(sa)))}
    if len(sa) != len(sb):
        res.update(ok=False, same_set=False, why=f"{len(sa)} vs {len(sb)} detections")
        return res
    if len(sa) == 0:
        res.update(ok=True, same_set=True, why="", max_box=0.0, max_score=0.0)
        return res
    dbox = np.abs(ba - bb) / (1 + np.abs(bb))
    dsc = np.abs(sa - sb)
    res["max_box"], res["max_score"] = float(dbox.max()), float(dsc.max())
    bad = (la != lb) | (dbox.max(1) > box_tol) | (dsc > score_tol)
    if not bad.any():
        res.update(ok=True, same_set=True, why="")
        return res
    k = int(np.argmax(bad))
    res["why"] = (f"row {k}: label {la[k]} vs {lb[k]}, box {np.round(ba[k], 3).tolist()} vs "
                  f"{np.round(bb[k], 3).tolist()}, score {sa[k]:.6g} vs {sb[k]:.6g}")
    # the same detections in another order? match each row of a to an unused row of b
    used = np.zeros(len(sb), bool)
    same = True
    for i in range(len(sa)):
        cand = np.where(~used & (lb == la[i]) & (np.abs(sb - sa[i]) <= score_tol) &
                        (np.abs(bb - ba[i]) / (1 + np.abs(ba[i])) <= box_tol).all(1))[0]
        if len(cand) == 0:
            same = False
            break
        used[cand[0]] = True
    res.update(ok=False, same_set=same)
    return res


def compare_seg(a, b, atol=1e-4, rtol=1e-4):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if a.shape != b.shape:
        return {"ok": False, "why": f"shape {list(a.shape)} vs {list(b.shape)}"}
    d = np.abs(a - b)
    ok = bool(np.all(d <= atol + rtol * np.abs(b)))
    agree = float(np.mean(a.argmax(0) == b.argmax(0)))
    return {"ok": ok, "max_abs": float(d.max()), "argmax_agree": agree,
            "why": "" if ok else f"max |diff| {float(d.max()):.3g}"}


def save_ref(path, task, outs):
    def j(v):
        return v.tolist()
    with open(path, "w") as f:
        if task == "detection":
            json.dump([[j(v) for v in o] for o in outs], f)
        else:
            json.dump([], f)
