#!/usr/bin/python3
"""Held-out detectors and segmenters, made the way a user outside the project makes them, in
the shared conformance format (/work/shared/conformance/README.md and tests/fixtures/README.md,
"The format for detection and segmentation"), golden and under single-bit weight faults, and
WITHOUT the optional "ties" field: the check of issue 31's "we will run our own held-out
detectors and segmenters" (docs/OPS.md, "Held-out detectors and segmenters").

  /usr/bin/python3 bench/heldout_det.py [--out bench/out/heldout] [--only NAME,...] [--list]
        [--images 2] [--fault-images 2] [--faults 4] [--size 128]
  /usr/bin/python3 bench/heldout_det.py --out tests/fixtures/heldout --only yolo_af_o11,yolo_af_o17,unet_o13dyn \
        --size 32 --fault-images 1       # the committed subset (ctest conformance_heldout)
  build/tests/bitflip-conformance bench/out/heldout        # = make conformance CONFORMANCE_DIR=...

Nothing here comes from the project's generators: torchvision 0.14 constructors with
weights=None and weights_backbone=None at small sizes; a YOLO-style anchor-free detector, a
YOLOv8-style one and U-Nets (ConvTranspose, bilinear Upsample both ways) written here in plain PyTorch (torchvision.ops.batched_nms); the wrapper a user writes
(a detector's list input from a tensor [1, 3, H, W], its dict as a tuple; a segmenter's 'out');
plain torch.onnx.export at opsets 11, 13, 16, 17, with dynamic batch (and detection) axes where
the model allows, dynamic height and width, without constant folding, with initializers as
inputs, or re-saved with external data (CASES says which), or bitflip.export; eval sets by bitflip.save_detection_eval_set /
save_segmentation_eval_set of drawn images and boxes. References are PyTorch's outputs of the
exported module: golden for every image, and per fault (a bit of an fp32 initializer whose
name is a parameter of the module and whose values equal it bit for bit) PyTorch's outputs with
that bit flipped in the parameter. Segmenters' golden_miou and golden_pixel_accuracy come from
a confusion matrix written here from the VOC definition. Each case is NAME = MODEL_VARIANT;
its files are written as soon as it is done. A case that cannot be exported is printed and
left out (the exporter's failure, not bitflip's)."""
import argparse
import json
import os
import sys
import time
import traceback
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

IMG = 128          # drawn images, pixels a side
SEG_CLASSES = 4

# (model, variant): variant = oNN[flags] | bf13. oNN: torch.onnx.export at opset NN; "o17" alone
# keeps the exporter's names (no input_names / output_names). Flags: dyn (dynamic batch, and
# detection counts), hw (dynamic batch, height and width), nf (do_constant_folding=False), ki
# (keep_initializers_as_inputs=True), ext (re-saved with every tensor over 1 KiB in a .data file
# beside it: onnx.save_model(save_as_external_data=True)).
CASES = [
    ("fasterrcnn_mobilenet_v3_large_320_fpn", "o11"), ("fasterrcnn_mobilenet_v3_large_320_fpn", "o13dyn"),
    ("fasterrcnn_mobilenet_v3_large_320_fpn", "o17"), ("fasterrcnn_mobilenet_v3_large_320_fpn", "bf13"),
    ("yolo_af", "o11"), ("yolo_af", "o17"), ("yolo_af", "bf13"),
    ("unet", "o13dyn"), ("unet", "bf13"),
    ("lraspp_mobilenet_v3_large", "o17"), ("deeplabv3_mobilenet_v3_large", "o16"),
    ("fasterrcnn_mobilenet_v3_large_fpn", "o16"),
    ("fcn_resnet50", "o11"), ("deeplabv3_resnet50", "o13dyn"),
    ("retinanet_resnet50_fpn", "o13dyn"), ("retinanet_resnet50_fpn_v2", "o17"),
    ("fcos_resnet50_fpn", "o11"), ("maskrcnn_resnet50_fpn", "o11"), ("keypointrcnn_resnet50_fpn", "o16"),
    ("ssd300_vgg16", "o13dyn"), ("ssdlite320_mobilenet_v3_large", "o11"),
    # the eighteenth session's widening: export options and models users bring
    ("yolo_v8", "o11"), ("yolo_v8", "o17hw"), ("yolo_v8", "bf13"),
    ("unet_bl", "o13hw"), ("unet_blac", "o11nf"), ("unet_blac", "o16ext"),
    ("lraspp_mobilenet_v3_large", "o13ki"), ("fasterrcnn_mobilenet_v3_large_320_fpn", "o16nf"),
    ("ssdlite320_mobilenet_v3_large", "o13ext"), ("retinanet_resnet50_fpn", "o11"), ("fcos_resnet50_fpn", "o16hw"),
    ("deeplabv3_resnet50", "o17ki"), ("fcn_resnet50", "o13nf"), ("keypointrcnn_resnet50_fpn", "o11"),
]
SEG = {"unet", "unet_bl", "unet_blac", "lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "fcn_resnet50",
       "deeplabv3_resnet50"}
YOLO = {"yolo_af", "yolo_v8"}     # one image [3, H, W] per call (the wrapper passes x[0])


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# models a user writes
# --------------------------------------------------------------------------

def yolo_af():
    """An anchor-free one-stage detector (FCOS / YOLOX-style head): a stride-8 conv trunk, per
    cell class scores (sigmoid) and a box as distances to the cell centre, candidates over 0.05,
    torchvision.ops.batched_nms at IoU 0.5, the best 100 kept. One image [3, H, W] per call."""
    import torch
    from torch import nn
    from torchvision.ops import batched_nms

    class YoloAF(nn.Module):
        def __init__(self, classes=3):
            super().__init__()
            c = lambda i, o, s: nn.Sequential(nn.Conv2d(i, o, 3, s, 1), nn.BatchNorm2d(o), nn.SiLU())  # noqa: E731
            self.trunk = nn.Sequential(c(3, 16, 2), c(16, 32, 2), c(32, 32, 1), c(32, 48, 2))
            self.cls = nn.Conv2d(48, classes, 1)
            self.box = nn.Conv2d(48, 4, 1)

        def forward(self, image):
            f = self.trunk(image[None])
            h, w = f.shape[2], f.shape[3]
            cls = torch.sigmoid(self.cls(f))[0].flatten(1).t()           # [HW, C]
            dist = torch.exp(self.box(f)[0].flatten(1).t().clamp(max=4)) * 8
            ys = (torch.arange(h, dtype=torch.float32) + 0.5) * 8
            xs = (torch.arange(w, dtype=torch.float32) + 0.5) * 8
            cy, cx = torch.meshgrid(ys, xs, indexing="ij")
            cx, cy = cx.flatten(), cy.flatten()
            boxes = torch.stack([cx - dist[:, 0], cy - dist[:, 1], cx + dist[:, 2], cy + dist[:, 3]], 1)
            boxes = boxes.clamp(min=0, max=float(image.shape[-1]))
            scores, labels = cls.max(1)
            keep = torch.where(scores > 0.05)[0]
            boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
            keep = batched_nms(boxes, scores, labels, 0.5)[:100]
            return boxes[keep], labels[keep], scores[keep]

    torch.manual_seed(3)
    m = YoloAF()
    for mod in m.modules():     # BatchNorm statistics a trained model would have, not 0 / 1
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.5, 2.0)
    return m.eval()


def yolo_v8():
    """A YOLOv8-style detector as users write one in plain PyTorch: Conv-BN-SiLU blocks, C2f
    (chunk into two, bottlenecks, Concat), SPPF (three chained MaxPools), a PAN neck (nearest
    Upsample and Concat up, strided Conv and Concat down), a decoupled head per stride (8, 16)
    with DFL box regression (softmax over 16 bins, a fixed 1x1 Conv of 0..15), the anchor-grid
    decode (dist2bbox, times the stride), sigmoid class scores, candidates over 0.05 and
    torchvision.ops.batched_nms at IoU 0.45, the best 100 kept. One image [3, H, W] per call."""
    import torch
    from torch import nn
    from torchvision.ops import batched_nms

    class Conv(nn.Module):
        def __init__(self, i, o, k=1, s=1):
            super().__init__()
            self.conv = nn.Conv2d(i, o, k, s, k // 2, bias=False)
            self.bn = nn.BatchNorm2d(o)
            self.act = nn.SiLU()

        def forward(self, x):
            return self.act(self.bn(self.conv(x)))

    class Bottleneck(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.cv1, self.cv2 = Conv(c, c, 3), Conv(c, c, 3)

        def forward(self, x):
            return x + self.cv2(self.cv1(x))

    class C2f(nn.Module):
        def __init__(self, i, o, n=1):
            super().__init__()
            self.c = o // 2
            self.cv1 = Conv(i, 2 * self.c)
            self.cv2 = Conv((2 + n) * self.c, o)
            self.m = nn.ModuleList(Bottleneck(self.c) for _ in range(n))

        def forward(self, x):
            y = list(self.cv1(x).chunk(2, 1))
            y.extend(m(y[-1]) for m in self.m)
            return self.cv2(torch.cat(y, 1))

    class SPPF(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.cv1, self.cv2 = Conv(c, c // 2), Conv(c * 2, c)
            self.m = nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.m(x)
            y2 = self.m(y1)
            return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))

    class DFL(nn.Module):
        def __init__(self, c1=16):
            super().__init__()
            self.conv = nn.Conv2d(c1, 1, 1, bias=False).requires_grad_(False)
            self.conv.weight.data[:] = torch.arange(c1, dtype=torch.float32).view(1, c1, 1, 1)
            self.c1 = c1

        def forward(self, x):                      # [B, 4 * c1, A]
            b, _, a = x.shape
            return self.conv(x.view(b, 4, self.c1, a).transpose(2, 1).softmax(1)).view(b, 4, a)

    class YoloV8(nn.Module):
        def __init__(self, nc=3, reg=16):
            super().__init__()
            self.nc, self.reg, self.strides = nc, reg, (8, 16)
            self.stem = nn.Sequential(Conv(3, 16, 3, 2), Conv(16, 32, 3, 2), C2f(32, 32))
            self.p3 = nn.Sequential(Conv(32, 48, 3, 2), C2f(48, 48))                 # stride 8
            self.p4 = nn.Sequential(Conv(48, 64, 3, 2), C2f(64, 64), SPPF(64))      # stride 16
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.n3 = C2f(64 + 48, 48)
            self.down = Conv(48, 48, 3, 2)
            self.n4 = C2f(48 + 64, 64)
            self.box = nn.ModuleList(nn.Sequential(Conv(c, 32, 3), nn.Conv2d(32, 4 * reg, 1)) for c in (48, 64))
            self.cls = nn.ModuleList(nn.Sequential(Conv(c, 32, 3), nn.Conv2d(32, nc, 1)) for c in (48, 64))
            self.dfl = DFL(reg)

        def forward(self, image):
            x = self.stem(image[None])
            p3 = self.p3(x)
            p4 = self.p4(p3)
            n3 = self.n3(torch.cat([self.up(p4), p3], 1))
            n4 = self.n4(torch.cat([self.down(n3), p4], 1))
            feats, anchors, strides = [], [], []
            for i, (f, s) in enumerate(zip((n3, n4), self.strides)):
                feats.append(torch.cat([self.box[i](f), self.cls[i](f)], 1).flatten(2))
                h, w = f.shape[2], f.shape[3]
                sy, sx = torch.meshgrid(torch.arange(h, dtype=torch.float32) + 0.5,
                                        torch.arange(w, dtype=torch.float32) + 0.5, indexing="ij")
                anchors.append(torch.stack([sx.flatten(), sy.flatten()], 0))
                strides.append(torch.full((1, h * w), float(s)))
            y = torch.cat(feats, 2)                                  # [1, 4 * reg + nc, A]
            box, cls = y.split([4 * self.reg, self.nc], 1)
            lt, rb = self.dfl(box)[0].chunk(2, 0)                     # [2, A] each
            anc, st = torch.cat(anchors, 1), torch.cat(strides, 1)
            xyxy = torch.cat([anc - lt, anc + rb], 0) * st            # [4, A]
            boxes = xyxy.t()
            scores, labels = cls[0].sigmoid().max(0)
            keep = torch.where(scores > 0.05)[0]
            boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
            keep = batched_nms(boxes, scores, labels, 0.45)[:100]
            return boxes[keep], labels[keep], scores[keep]

    torch.manual_seed(5)
    m = YoloV8()
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.5, 2.0)
    # Heads' last convs at the spread a trained head has: at PyTorch's default init every cell
    # scores about 0.5437 and predicts the same box (DFL's bins about uniform), so neighbouring
    # cells' boxes overlap past the NMS threshold with scores 1e-5 apart, and which one NMS
    # keeps is decided by last bits: PyTorch in float64 kept other boxes than in float32
    # (docs/OPS.md, "Held-out detectors and segmenters").
    with torch.no_grad():
        for h in list(m.cls) + list(m.box):
            h[1].weight.mul_(30)
    return m.eval()


def unet(up="convt"):
    """A two-level U-Net: Conv-BN-ReLU pairs, MaxPool, skip Concat; up the lower level by
    ConvTranspose2d, the upper one by ConvTranspose2d (up "convt") or by bilinear Upsample and a
    1x1 Conv, align_corners=False ("bilinear") or True ("bilinear_ac"), as U-Net ports write it."""
    import torch
    from torch import nn

    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                             nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self, classes=SEG_CLASSES):
            super().__init__()
            self.e1, self.e2, self.mid = block(3, 8), block(8, 16), block(16, 32)
            self.u2, self.d2 = nn.ConvTranspose2d(32, 16, 2, 2), block(32, 16)
            self.u1 = nn.ConvTranspose2d(16, 8, 2, 2) if up == "convt" else nn.Sequential(
                nn.Upsample(scale_factor=2, mode="bilinear", align_corners=up == "bilinear_ac"), nn.Conv2d(16, 8, 1))
            self.d1 = block(16, 8)
            self.head = nn.Conv2d(8, classes, 1)

        def forward(self, x):
            a = self.e1(x)
            b = self.e2(nn.functional.max_pool2d(a, 2))
            c = self.mid(nn.functional.max_pool2d(b, 2))
            b = self.d2(torch.cat([self.u2(c), b], 1))
            return {"out": self.head(self.d1(torch.cat([self.u1(b), a], 1)))}

    torch.manual_seed(4)
    m = UNet()
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.5, 2.0)
    return m.eval()


def build(name):
    """(module in eval mode, task)"""
    import torch
    from torchvision.models import detection as det, segmentation as seg
    torch.manual_seed(0)
    if name == "yolo_af":
        return yolo_af(), "detection"
    if name == "yolo_v8":
        return yolo_v8(), "detection"
    if name in ("unet", "unet_bl", "unet_blac"):
        return unet({"unet": "convt", "unet_bl": "bilinear", "unet_blac": "bilinear_ac"}[name]), "segmentation"
    kw = dict(weights=None, weights_backbone=None)
    if name in SEG:
        extra = {} if name.startswith("lraspp") else dict(aux_loss=False)
        return getattr(seg, name)(num_classes=SEG_CLASSES, **kw, **extra).eval(), "segmentation"
    extra = {}
    small = dict(min_size=160, max_size=160)
    if name.startswith(("fasterrcnn", "maskrcnn", "keypointrcnn")):
        # an untrained head scores every class about 1/91: below the default threshold 0.05
        extra = dict(box_score_thresh=0.0)
        if name != "fasterrcnn_mobilenet_v3_large_320_fpn":      # its defaults are 320 and 150 proposals
            extra.update(small, rpn_pre_nms_top_n_test=150, rpn_post_nms_top_n_test=150)
        if name.startswith("keypointrcnn"):
            extra["num_classes"] = 2
    elif name.startswith("retinanet"):     # its untrained scores are about 0.01 (the prior)
        extra = dict(small, score_thresh=0.0, detections_per_img=100)
    elif name.startswith("fcos"):
        extra = dict(small, score_thresh=0.05)
    elif name.startswith("ssdlite"):
        extra = dict(score_thresh=0.0, detections_per_img=100)
    elif name.startswith("ssd300"):
        extra = dict(detections_per_img=100)
    return getattr(det, name)(**kw, **extra).eval(), "detection"


def draw(n, task, seed, size=None):
    """n images [n, 3, IMG, IMG] of rectangles on noise; their boxes and labels (1..3), or a
    mask of class ids per pixel (0 background)."""
    size = size or IMG
    rng = np.random.default_rng(seed)
    xs, tg = [], []
    for _ in range(n):
        im = rng.normal(0.45, 0.08, (3, size, size)).astype(np.float32)
        mask = np.zeros((size, size), np.int64)
        boxes, labels = [], []
        for _ in range(rng.integers(1, 4)):
            w, h = rng.integers(size // 8, size * 7 // 16, 2)
            x0, y0 = rng.integers(0, size - w), rng.integers(0, size - h)
            lab = int(rng.integers(1, 4))
            im[:, y0:y0 + h, x0:x0 + w] = rng.uniform(0, 1, (3, 1, 1))
            mask[y0:y0 + h, x0:x0 + w] = lab
            boxes.append([x0, y0, x0 + w, y0 + h])
            labels.append(lab)
        xs.append(np.clip(im, 0, 1))
        tg.append(mask if task == "segmentation" else {"boxes": np.array(boxes, np.float32),
                                                       "labels": np.array(labels, np.int64)})
    return np.stack(xs), tg


# --------------------------------------------------------------------------
# the wrapper and the export
# --------------------------------------------------------------------------

def wrapper(model, name, task):
    """What a user writes: a tensor in, plain tensors out."""
    from torch import nn
    keys = ["boxes", "labels", "scores"] + (["masks"] if name.startswith("maskrcnn") else []) + \
        (["keypoints", "keypoints_scores"] if name.startswith("keypointrcnn") else [])

    class Det(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):                     # [1, 3, H, W]
            if name in YOLO:
                return self.m(x[0])
            out = self.m(list(x))[0]
            return tuple(out[k] for k in keys)

    class Seg(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)["out"]

    return (Seg(model) if task == "segmentation" else Det(model)).eval(), keys


def export(model, name, task, variant, x, path):
    """Writes path; returns (the module whose outputs the reference holds, graph input name,
    output names, per-image call)."""
    import torch
    import onnx
    w, keys = wrapper(model, name, task)
    a = torch.from_numpy(x[:1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if variant == "bf13":
            import bitflip
            ex = a[0] if task == "detection" else a
            bitflip.export(model, ex, path, verbose=False, check=False,
                           task=task if name in YOLO or name.startswith("unet") else None)
        else:
            opset, flags = int(variant[1:3]), variant[3:]
            outs = keys if task == "detection" else ["out"]
            kw = dict(opset_version=opset, do_constant_folding="nf" not in flags,
                      keep_initializers_as_inputs="ki" in flags)
            if variant != "o17":
                kw.update(input_names=["input"], output_names=outs)
            if "dyn" in flags or "hw" in flags or task == "segmentation":
                iname = "input" if variant != "o17" else None
                if iname:
                    axes = {0: "batch", 2: "height", 3: "width"} if "hw" in flags else {0: "batch"}
                    dyn = {iname: axes}
                    if task == "segmentation":
                        dyn["out"] = axes
                    else:
                        dyn.update({o: {0: "detections"} for o in outs})
                    kw["dynamic_axes"] = dyn
            if variant == "o17" and task == "segmentation":
                torch.onnx.export(w, (a,), path, **kw)
                g0 = onnx.load(path).graph
                inits = {i.name for i in g0.initializer}
                iname = [i.name for i in g0.input if i.name not in inits][0]
                kw["dynamic_axes"] = {iname: {0: "batch"}, g0.output[0].name: {0: "batch"}}
            torch.onnx.export(w, (a,), path, **kw)
            if "ext" in flags:     # what a user does for a model near protobuf's 2 GiB
                mp = onnx.load(path)
                loc = os.path.basename(path) + ".data"
                if os.path.exists(path + ".data"):
                    os.remove(path + ".data")
                onnx.save_model(mp, path, save_as_external_data=True, all_tensors_to_one_file=True, location=loc,
                                size_threshold=1024)
    g = onnx.load(path).graph
    inits = {i.name for i in g.initializer}
    return [i.name for i in g.input if i.name not in inits][0], [o.name for o in g.output]


def torch_run(model, name, task, x):
    """PyTorch's outputs per image: a tuple of arrays (detector) or the logits [C, H, W]."""
    import torch
    w, _ = wrapper(model, name, task)
    outs = []
    with torch.no_grad():
        for i in range(len(x)):
            o = w(torch.from_numpy(x[i:i + 1]))
            outs.append(tuple(v.numpy() for v in o) if task == "detection" else o[0].numpy())
    return outs


def jnum(v):
    v = float(v)
    return "NaN" if v != v else ("Infinity" if v == np.inf else "-Infinity" if v == -np.inf else v)


def rows_of(a):
    a = np.asarray(a)
    if a.ndim == 1:
        return [jnum(v) if a.dtype.kind == "f" else int(v) for v in a]
    return [[jnum(v) for v in r] for r in a.reshape(len(a), -1 if len(a) else 0)]


def as_ref_outputs(outs, names, task):
    if task == "segmentation":
        return [[jnum(v) for v in o.reshape(-1)] for o in outs]
    return [{n: rows_of(v) for n, v in zip(names, o)} for o in outs]


def seg_metrics(logits, masks, c):
    """miou and pixel accuracy from the confusion matrix over every image (VOC's definition:
    classes whose union is empty left out; 255 ignored)."""
    conf = np.zeros((c, c), np.int64)
    for lo, m in zip(logits, masks):
        p, t = lo.argmax(0).reshape(-1), m.reshape(-1)
        ok = t != 255
        np.add.at(conf, (t[ok], p[ok]), 1)
    inter = np.diag(conf).astype(np.float64)
    union = conf.sum(0) + conf.sum(1) - inter
    return float(np.mean(inter[union > 0] / union[union > 0])), float(inter.sum() / conf.sum())


RTOL, ATOL = 1e-4, 1e-5     # bitflip-conformance's value tolerance: max(ATOL, RTOL |v|)
SCALED = ("boxes", "keypoints", "keypoints_scores", "masks")   # what the heads compute from a proposal's corners


def corner_moves():
    """each corner of a proposal alone, moved by +1 and by -1 (8 directions): per corner the
    larger of the two moves it causes, summed over the corners, is the largest move of any
    pattern of signs where the response is linear (|J s| <= sum |J_k|, with equality at the
    worst signs), and takes a clip's one-sided response at a bound from the side that moves"""
    out = []
    for k in range(4):
        for sgn in (1.0, -1.0):
            v = np.zeros(4, np.float32)
            v[k] = sgn
            out.append((k, v))
    return out


def corner_allowance(props):
    """each proposal's corners' tolerance as bitflip-conformance would give its row: RTOL of the
    row's largest magnitude, at least ATOL ([K, 1])"""
    import torch
    return torch.clamp(RTOL * props.abs().amax(1, keepdim=True), min=ATOL)


def same_rows(a, b, names):
    """whether two runs' detections of one image are the same rows: counts, labels, and each box
    at IoU >= 0.9 with its counterpart (a moved proposal changed no decision)"""
    d = dict(zip(names, a)), dict(zip(names, b))
    if any(d[0][k].shape != d[1][k].shape for k in names):
        return False
    if "labels" in names and not np.array_equal(d[0]["labels"], d[1]["labels"]):
        return False
    p, q = d[0]["boxes"].astype(np.float64), d[1]["boxes"].astype(np.float64)
    if not len(p):
        return True
    lo, hi = np.maximum(p[:, :2], q[:, :2]), np.minimum(p[:, 2:], q[:, 2:])
    inter = np.prod(np.clip(hi - lo, 0, None), 1)
    area = lambda r: np.prod(np.clip(r[:, 2:] - r[:, :2], 0, None), 1)  # noqa: E731
    union = area(p) + area(q) - inter
    return bool(np.all(np.where(union > 0, inter / np.where(union > 0, union, 1), 1) >= 0.9))


def row_pairs(a, b, names):
    """for each row of run a, its row in run b (the same label, and the best IoU with its box,
    at least 0.9: a class's kept boxes overlap less than its NMS threshold, so at most one
    qualifies), or -1: a row that a moved proposal pushed past the detections-per-image cut,
    or whose box it changed past IoU 0.9"""
    d = dict(zip(names, a)), dict(zip(names, b))
    p, q = d[0]["boxes"].astype(np.float64), d[1]["boxes"].astype(np.float64)
    out = np.full(len(p), -1)
    if not len(p) or not len(q):
        return out
    lo, hi = np.maximum(p[:, None, :2], q[None, :, :2]), np.minimum(p[:, None, 2:], q[None, :, 2:])
    inter = np.prod(np.clip(hi - lo, 0, None), 2)
    area = lambda r: np.prod(np.clip(r[:, 2:] - r[:, :2], 0, None), 1)  # noqa: E731
    union = area(p)[:, None] + area(q)[None, :] - inter
    iou = np.where(union > 0, inter / np.where(union > 0, union, 1), 1)
    if "labels" in names:
        iou = np.where(d[0]["labels"][:, None] == d[1]["labels"][None, :], iou, 0)
    best = iou.argmax(1)
    ok = iou[np.arange(len(p)), best] >= 0.9
    out[ok] = best[ok]
    return out


def decode_scales(model, name, task, x, outs, names, graph_names=None):
    """Per image, {output: rows of scales} for the outputs a two-stage detector's heads compute
    from its proposals' corners (SCALED; tests/fixtures/README.md, "Scales from the decode"): each
    proposal's four corners moved by their own tolerance (corner_allowance) in each of the 16
    directions of corner_moves, the model run again from there, and per value the sum over
    the corners of the larger move of the two directions, each row against its own row of
    the moved run (row_pairs: a row the move pushed past the cut, or changed past IoU 0.9,
    left out of that run and counted), over RTOL: the magnitude whose tolerance is that move. The decode's exp(dw) multiplies a sliver proposal's width error, which the
    box's own magnitude does not show (Keypoint R-CNN's fault 0: 62.5 times). None for a model
    without proposals. outs: the run's outputs per image (torch_run), which the scales describe;
    names: the wrapper's keys for them; graph_names: the graph's output names, which key the
    result (the keys themselves when None)."""
    import torch
    if task != "detection" or not hasattr(model, "rpn"):
        return None
    rpn, sign = model.rpn, {}

    class Moved(torch.nn.Module):      # the RPN, its proposals moved by sign["s"] x their allowance
        def __init__(self):
            super().__init__()
            self.inner = rpn

        def forward(self, *args, **kw):
            props, losses = self.inner(*args, **kw)
            s = sign.get("s")
            if s is not None:
                props = [p + corner_allowance(p) * torch.from_numpy(s) for p in props]
            return props, losses

    scales, skipped, rows = [], 0, 0
    model.rpn = Moved()
    try:
        for i in range(len(outs)):
            base = dict(zip(names, outs[i]))
            rows += 8 * len(base["boxes"])
            per = {k: np.zeros((4,) + base[k].shape, np.float64) for k in SCALED if k in base}
            for corner, s in corner_moves():
                sign["s"] = s
                o = torch_run(model, name, task, x[i:i + 1])[0]
                pair = row_pairs(outs[i], o, names)
                skipped += int((pair < 0).sum())
                have = pair >= 0
                for k in per:
                    d = np.abs(dict(zip(names, o))[k][pair[have]].astype(np.float64) - base[k][have])
                    per[k][corner][have] = np.maximum(per[k][corner][have], np.where(np.isfinite(d), d, 0))
            sign.pop("s", None)
            move = {k: p.sum(0) for k, p in per.items()}
            gname = dict(zip(names, graph_names or names))
            scales.append({gname[k]: [[float(f"{v / RTOL:.3g}") for v in r] for r in m.reshape(len(m), -1)]
                           if len(m) else [] for k, m in move.items()})
    finally:
        model.rpn = rpn
    if skipped:
        log(f"{name}: decode scales: {skipped} of {rows} rows of the moved runs without their row (past the cut, "
            f"or moved past IoU 0.9), left out")
    return scales


def pick_faults(model, onnx_path, n, seed):
    """n (param, index, bit) in fp32 initializers that are parameters of the module, bit-equal."""
    import onnx
    from onnx import numpy_helper
    params = dict(model.named_parameters())
    params.update({"m." + k: v for k, v in params.items()})     # the wrapper's names (plain export)
    inits = [(i.name, numpy_helper.to_array(i)) for i in onnx.load(onnx_path).graph.initializer]
    usable = [(k, v) for k, v in inits if k in params and v.dtype == np.float32 and
              v.shape == tuple(params[k].shape) and np.array_equal(v.view(np.uint32),
                                                                   params[k].detach().numpy().view(np.uint32))]
    # torch.onnx.export (1.13) stores parameters of equal shape and bytes once (an untrained
    # model's all-zero biases): such an initializer stands for several parameters, so a flip of
    # it is not a flip of the one parameter PyTorch flips; leave those out
    seen = {}
    for k, v in params.items():
        if not k.startswith("m."):
            key = (tuple(v.shape), v.detach().numpy().tobytes())
            seen[key] = seen.get(key, 0) + 1
    usable = [(k, v) for k, v in usable if seen.get((v.shape, v.tobytes()), 0) == 1]
    rng = np.random.default_rng(seed)
    out = []
    bits = [30, 26, 23, 22, 20, 12, 31]
    for j in range(min(n, len(usable) * 3)):
        k, v = usable[int(rng.integers(len(usable)))]
        out.append((k, int(rng.integers(v.size)), bits[j % len(bits)]))
    return out, len(usable), len(inits)


def one(a, name, variant):
    import torch
    from bitflip.vision import save_detection_eval_set, save_segmentation_eval_set
    torch.set_num_threads(1)
    t0 = time.time()
    model, task = build(name)
    stem = os.path.join(a.out, f"{name}_{variant}")
    x, tg = draw(a.images, task, seed=7, size=a.size)
    try:
        in_name, outs = export(model, name, task, variant, x, stem + ".onnx")
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        log(f"{name}_{variant}: export failed: {str(e).strip().splitlines()[-1][:200]}")
        for ext in (".onnx",):
            if os.path.exists(stem + ext):
                os.remove(stem + ext)
        return
    if task == "detection":
        save_detection_eval_set(stem + ".eval.safetensors", x, tg, input_name=in_name)
    else:
        save_segmentation_eval_set(stem + ".eval.safetensors", x, np.stack(tg), input_name=in_name)
    golden = torch_run(model, name, task, x)
    keys = wrapper(model, name, task)[1]
    ref = {"model": os.path.basename(stem) + ".onnx", "task": task, "inputs": [in_name], "outputs": outs,
           "golden": as_ref_outputs(golden, outs, task), "n_ref_samples": a.fault_images}
    if task == "segmentation":
        ref["golden_miou"], ref["golden_pixel_accuracy"] = seg_metrics(golden, tg, SEG_CLASSES)
    gs = decode_scales(model, name, task, x, golden, keys, outs)
    if gs is not None:
        ref["golden_scale"] = gs
    faults, n_usable, n_inits = pick_faults(model, stem + ".onnx", a.faults, seed=len(name) + len(variant))
    params = dict(model.named_parameters())
    params.update({"m." + k: v for k, v in params.items()})
    ref["faults"] = []
    for pname, index, bit in faults:
        flat = params[pname].data.view(-1)
        old = float(flat[index])
        new = float(np.array([old], np.float32).view(np.uint32).__xor__(np.uint32(1 << bit)).view(np.float32)[0])
        flat[index] = new
        try:
            fo = torch_run(model, name, task, x[:a.fault_images])
            fs = decode_scales(model, name, task, x, fo, keys, outs)
        finally:
            flat[index] = old
        ref["faults"].append({"param": pname, "index": index, "bit": bit, "old": jnum(old), "new": jnum(new),
                              "outputs": as_ref_outputs(fo, outs, task)})
        if fs is not None:
            ref["faults"][-1]["scale"] = fs
    with open(stem + ".ref.json", "w") as f:
        json.dump(ref, f)
    per = [len(o[0]) for o in golden] if task == "detection" else []
    log(f"{name}_{variant}: {task}, {len(faults)} faults (of {n_usable} named initializers, {n_inits} in all), "
        f"detections {per}, {time.time() - t0:.0f} s")


def add_scales(stem, lists=None, threads=1):
    """Adds "golden_scale" and each fault's "scale" (decode_scales) to an existing STEM.ref.json
    written by this script, after checking that the rebuilt module gives its outputs bit for
    bit (the model is seeded; the images are the eval set's), golden and under each fault.
    lists: "golden" and fault numbers to do (None: all; a Keypoint R-CNN's heads cost ~10 CPU-s
    a run, 8 runs an image), the others left as they are (without scales: the rows' own rule)."""
    import torch
    torch.set_num_threads(threads)
    case = os.path.basename(stem)
    name = case.rsplit("_", 1)[0]
    with open(stem + ".ref.json") as f:
        ref = json.load(f)
    model, task = build(name)
    sys.path.insert(0, HERE)
    from heldout_engines import read_images
    x = read_images(stem + ".eval.safetensors")
    keys, outs = wrapper(model, name, task)[1], ref["outputs"]

    def check(got, want, what):
        # at 1 thread (the reference's) bit for bit; at more, PyTorch sums in other blocks, so
        # the same rows (same_rows) suffice: the scales are moves between runs of one setting
        if threads == 1 and json.dumps(as_ref_outputs(got, outs, task)) != json.dumps(want):
            raise SystemExit(f"{case}: {what}: the rebuilt module's outputs are not the reference's")
        if threads != 1 and not all(same_rows(g, tuple(np.asarray(w[o]).reshape(np.shape(gv)) for o, gv in zip(outs, g)),
                                              keys) for g, w in zip(got, want)):
            raise SystemExit(f"{case}: {what}: the rebuilt module's detections are not the reference's")
    if lists is None or "golden" in lists:
        golden = torch_run(model, name, task, x[:len(ref["golden"])])
        check(golden, ref["golden"], "golden")
        ref["golden_scale"] = decode_scales(model, name, task, x, golden, keys, outs)
    params = dict(model.named_parameters())
    params.update({"m." + k: v for k, v in params.items()})
    for k, f in enumerate(ref.get("faults", [])):
        if lists is not None and str(k) not in lists:
            continue
        flat = params[f["param"]].data.view(-1)
        old = float(flat[f["index"]])
        flat[f["index"]] = float(np.array([old], np.float32).view(np.uint32).__xor__(
            np.uint32(1 << f["bit"])).view(np.float32)[0])
        try:
            fo = torch_run(model, name, task, x[:len(f["outputs"])])
            check(fo, f["outputs"], f"fault {k}")
            f["scale"] = decode_scales(model, name, task, x, fo, keys, outs)
        finally:
            flat[f["index"]] = old
    with open(stem + ".ref.json", "w") as fh:
        json.dump(ref, fh)
    log(f"{case}: scales added ({a_lists(lists, ref)})")


def a_lists(lists, ref):
    return "golden and every fault" if lists is None else ", ".join(lists) + f" of golden and {len(ref.get('faults', []))} faults"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "out", "heldout"))
    ap.add_argument("--only", default=None, help="NAME or NAME_VARIANT, comma-separated")
    ap.add_argument("--images", type=int, default=2)
    ap.add_argument("--fault-images", type=int, default=2)
    ap.add_argument("--faults", type=int, default=4)
    ap.add_argument("--size", type=int, default=IMG, help="drawn images' side in pixels")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--add-scales", metavar="STEM", help="add decode scales to STEM.ref.json (decode_scales) and stop")
    ap.add_argument("--scale-lists", default=None, help="with --add-scales: golden and fault numbers, comma-separated")
    ap.add_argument("--threads", type=int, default=1, help="with --add-scales: PyTorch's threads")
    a = ap.parse_args()
    if a.add_scales:
        return add_scales(a.add_scales, a.scale_lists.split(",") if a.scale_lists else None, a.threads)
    sel = [c for c in CASES if not a.only or c[0] in a.only.split(",") or f"{c[0]}_{c[1]}" in a.only.split(",")]
    if a.list:
        print("\n".join(f"{m}_{v}" for m, v in sel))
        return
    os.makedirs(a.out, exist_ok=True)
    for name, variant in sel:
        one(a, name, variant)


if __name__ == "__main__":
    main()
