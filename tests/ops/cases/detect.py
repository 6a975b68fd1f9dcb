"""The detection family (core/src/exec/ops/detect*.c): NonMaxSuppression and
RoiAlign, the two ops torchvision's detectors export that are theirs alone.

References: torchvision.ops.nms (per batch and class; the spec's cut by
max_output_boxes_per_class and its score_threshold applied around it, corners
put in order first as the spec does) and torchvision.ops.roi_align (aligned
False is output_half_pixel, opset 10's only form; aligned True is half_pixel,
opset 16's default), compared bit for bit (rtol = atol = 0) since bitflip
computes RoiAlign as torchvision's CPU kernel does; numpy from the spec for
RoiAlign's max mode, which torchvision has not. ONNX Runtime (onnxruntime-node 1.x,
checked by hand) gives the same outputs, bit for bit, for every case but
detect_nms_ties_nan_* (its heap leaves ties and NaN scores in no defined order)
and the max-mode ones (within 2e-6).

`cases()` run through the plan now: NMS of constants is folded when the plan
is built, RoiAlign's output shape is static. `dyn_cases()` NEED the run-time
preparation of data-shaped steps (branch h4-dyn, issue 31): NMS of fed boxes
and scores, and the exported batched_nms; make_cases.py writes them into
tests/fixtures/ops_dyn/, which ctest runs once that support is merged."""
import io

import numpy as np
import onnx
import torch
import torchvision
from onnx import helper, numpy_helper

from opcase import Case, randf, rng

T = torch.from_numpy


# ---- NonMaxSuppression ----

def ordered(boxes):
    """Corners in order, as the spec reads a box (torchvision does not)."""
    b = boxes.copy()
    b[..., [0, 2]] = np.sort(boxes[..., [0, 2]], axis=-1)
    b[..., [1, 3]] = np.sort(boxes[..., [1, 3]], axis=-1)
    return b


def nms_ref(boxes, scores, max_out, iou, score_thr=None, center=False):
    """selected_indices [k, 3] from torchvision.ops.nms per batch and class."""
    rows = []
    for b in range(boxes.shape[0]):
        bx = T(boxes[b])
        if center:
            bx = torchvision.ops.box_convert(bx, "cxcywh", "xyxy")
        else:
            bx = T(ordered(boxes[b]))
        for c in range(scores.shape[1]):
            s = T(scores[b, c])
            cand = torch.arange(s.shape[0]) if score_thr is None else torch.nonzero(s > score_thr).flatten()
            keep = cand[torchvision.ops.nms(bx[cand], s[cand], iou)] if len(cand) else cand
            for k in keep[:max(max_out, 0)].tolist():
                rows.append([b, c, k])
    return np.array(rows, np.int64).reshape(-1, 3)


def random_boxes(seed, n, size=60.0, flip=False):
    r = rng(seed)
    xy = r.uniform(0, size, (n, 2))
    wh = r.uniform(1, size / 3, (n, 2))
    b = np.concatenate([xy, xy + wh], 1).astype(np.float32)
    if flip:
        b[::3, [0, 2]] = b[::3, [2, 0]]
    return b


def nms_case(name, boxes, scores, max_out, iou, score_thr=None, center=0, fed=False):
    inputs = {"boxes": boxes, "scores": scores, "max_out": np.array([max_out], np.int64),
              "iou": np.array([iou], np.float32)}
    if score_thr is not None:
        inputs["score"] = np.array([score_thr], np.float32)
    want = nms_ref(boxes, scores, max_out, iou, score_thr, center=bool(center))
    case = Case(name, "NonMaxSuppression", inputs, {"selected": want},
                attrs={"center_point_box": center} if center else {}, opset=11)
    consts = [k for k in inputs if k not in ("boxes", "scores")] if fed else list(inputs)
    return with_constants(case, consts)


def with_constants(case, names):
    """The case with inputs `names` as Constant nodes (known at plan time,
    as the exporter writes NMS's thresholds)."""
    order = list(case.inputs)
    nodes = [helper.make_node("Constant", [], [n], name="const_" + n,
                              value=numpy_helper.from_array(case.inputs[n], n)) for n in names]
    nodes.append(helper.make_node(case.op, order, list(case.outputs), name=case.name, **case.attrs))
    case.inputs = {k: v for k, v in case.inputs.items() if k not in names}
    case.nodes = nodes
    return case


def nms_cases(fed):
    tag = "fed" if fed else "folded"
    b = random_boxes(300, 40)[None]
    s = rng(301).uniform(0, 1, (1, 1, 40)).astype(np.float32)
    yield nms_case(f"detect_nms_{tag}", b, s, 2 ** 63 - 1, 0.5, fed=fed)   # torchvision's export: max = sys.maxsize
    # classes and batches, the per-class cut, a score threshold
    b2 = np.stack([random_boxes(302, 30), random_boxes(303, 30)])
    s2 = rng(304).uniform(0, 1, (2, 3, 30)).astype(np.float32)
    yield nms_case(f"detect_nms_classes_cut_{tag}", b2, s2, 4, 0.3, score_thr=0.2, fed=fed)
    # ties (scores in quarters): lower index first; NaN scores count as the largest
    s3 = (np.floor(rng(305).uniform(0, 4, (1, 2, 40))) / 4).astype(np.float32)
    s3[0, 0, [5, 17]] = np.nan
    yield nms_case(f"detect_nms_ties_nan_{tag}", b, s3, 100, 0.45, fed=fed)
    # flipped corners (the spec orders them) and centre-size boxes
    yield nms_case(f"detect_nms_flipped_{tag}", random_boxes(306, 40, flip=True)[None], s, 100, 0.4, fed=fed)
    c = random_boxes(307, 40)
    cw = np.concatenate([(c[:, :2] + c[:, 2:]) / 2, c[:, 2:] - c[:, :2]], 1)[None].astype(np.float32)
    yield nms_case(f"detect_nms_center_{tag}", cw, s, 100, 0.5, center=1, fed=fed)
    # no box, and max_output_boxes_per_class 0 (the spec: none)
    yield nms_case(f"detect_nms_empty_{tag}", np.zeros((1, 0, 4), np.float32), np.zeros((1, 1, 0), np.float32),
                   10, 0.5, fed=fed)
    yield nms_case(f"detect_nms_max0_{tag}", b, s, 0, 0.5, fed=fed)


class _BatchedNms(torch.nn.Module):
    """What a torchvision detector's postprocess does: batched_nms, then the kept rows."""

    def forward(self, boxes, scores, labels):
        keep = torchvision.ops.batched_nms(boxes, scores, labels, 0.5)
        return boxes[keep], scores[keep], labels[keep]


def exported_batched_nms():
    g = torch.Generator().manual_seed(310)
    boxes = T(random_boxes(311, 50))
    scores = torch.rand(50, generator=g)
    labels = torch.randint(0, 3, (50,), generator=g)
    mod = _BatchedNms().eval()
    f = io.BytesIO()
    torch.onnx.export(mod, (boxes, scores, labels), f, opset_version=13, input_names=["boxes", "scores", "labels"],
                      output_names=["kept_boxes", "kept_scores", "kept_labels"])
    with torch.no_grad():
        kb, ks, kl = mod(boxes, scores, labels)
    return Case("detect_exported_batched_nms", None,
                {"boxes": boxes.numpy(), "scores": scores.numpy(), "labels": labels.numpy()},
                {"kept_boxes": kb.numpy(), "kept_scores": ks.numpy(), "kept_labels": kl.numpy()},
                model=onnx.load_from_string(f.getvalue()))


# ---- RoiAlign ----

def rois_for(seed, r, n, img, small=False, outside=False):
    rg = rng(seed)
    xy = rg.uniform(-10 if outside else 0, img, (r, 2))
    wh = rg.uniform(0.05, 0.9, (r, 2)) if small else rg.uniform(4, img / 2, (r, 2))
    rois = np.concatenate([xy, xy + wh], 1).astype(np.float32)
    bi = (np.arange(r) % n).astype(np.int64)
    return rois, bi


def tv_roi_align(x, rois, bi, oh, ow, scale, sr, aligned):
    boxes = torch.cat([T(bi).float()[:, None], T(rois)], 1)
    return torchvision.ops.roi_align(T(x), boxes, (oh, ow), spatial_scale=scale, sampling_ratio=sr,
                                     aligned=aligned).numpy()


def spec_roi_align_max(x, rois, bi, oh, ow, scale, sr, half):
    """The spec's max mode (onnx.reference's RoiAlign), NaN winning."""
    R, C, H, W = rois.shape[0], x.shape[1], x.shape[2], x.shape[3]
    out = np.zeros((R, C, oh, ow), np.float32)
    off = 0.5 if half else 0.0
    for r in range(R):
        sw, sh, ew, eh = [np.float32(v) * np.float32(scale) - np.float32(off) for v in rois[r]]
        rw, rh = ew - sw, eh - sh
        if not half:
            rw, rh = max(rw, np.float32(1)), max(rh, np.float32(1))
        bh, bw = rh / np.float32(oh), rw / np.float32(ow)
        gh = sr if sr > 0 else int(np.ceil(bh))
        gw = sr if sr > 0 else int(np.ceil(bw))
        img = x[bi[r]]
        for ph in range(oh):
            for pw in range(ow):
                best = None
                for iy in range(gh):
                    y = sh + ph * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        xx = sw + pw * bw + (ix + 0.5) * bw / gw
                        if not (-1.0 <= y <= H and -1.0 <= xx <= W):
                            v = 0.0 * img[:, 0, 0]
                        else:
                            yy, xc = max(y, 0.0), max(xx, 0.0)
                            y0, x0 = int(yy), int(xc)
                            if y0 >= H - 1:
                                y0 = y1 = H - 1
                                yy = float(y0)
                            else:
                                y1 = y0 + 1
                            if x0 >= W - 1:
                                x0 = x1 = W - 1
                                xc = float(x0)
                            else:
                                x1 = x0 + 1
                            ly, lx = yy - y0, xc - x0
                            hy, hx = 1 - ly, 1 - lx
                            v = np.fmax.reduce([hy * hx * img[:, y0, x0], hy * lx * img[:, y0, x1],
                                                ly * hx * img[:, y1, x0], ly * lx * img[:, y1, x1]])
                            v = np.where(np.isnan(img[:, [y0, y0, y1, y1], [x0, x1, x0, x1]]).any(1), np.nan, v)
                        best = v if best is None else np.where(np.isnan(best) | np.isnan(v), np.nan,
                                                              np.maximum(best, v))
                out[r, :, ph, pw] = 0 if best is None else best
    return out


def roi_case(name, x, rois, bi, oh, ow, scale, sr, aligned, opset, explicit=False, mode=None):
    attrs = {"output_height": oh, "output_width": ow, "sampling_ratio": sr, "spatial_scale": scale}
    if explicit:
        attrs["coordinate_transformation_mode"] = "half_pixel" if aligned else "output_half_pixel"
    if mode == "max":
        attrs["mode"] = "max"
        want = spec_roi_align_max(x, rois, bi, oh, ow, scale, sr, aligned)
        return Case(name, "RoiAlign", {"x": x, "rois": rois, "bi": bi}, {"y": want}, attrs=attrs, opset=opset,
                    ref="numpy", consts={"bi"})
    want = tv_roi_align(x, rois, bi, oh, ow, scale, sr, aligned)
    # rois, whose dim 0 is not the batch, become an initializer: a parameter, read at run time
    return Case(name, "RoiAlign", {"x": x, "rois": rois, "bi": bi}, {"y": want}, attrs=attrs, opset=opset,
                rtol=0.0, atol=0.0, consts={"bi"})


class _RoiAlign(torch.nn.Module):
    def forward(self, x, boxes):
        return torchvision.ops.roi_align(x, boxes, (7, 7), spatial_scale=0.25, sampling_ratio=2)


def roi_cases():
    x = randf(320, 2, 8, 20, 24)
    rois, bi = rois_for(321, 12, 2, 80)
    # Faster R-CNN's form (MultiScaleRoIAlign: 7x7, sampling_ratio 2, aligned False), opset 13
    yield roi_case("detect_roialign_frcnn_op13", x, rois, bi, 7, 7, 0.25, 2, False, 13)
    # Mask R-CNN's mask head: 14x14
    yield roi_case("detect_roialign_mask_op13", x, rois, bi, 14, 14, 0.25, 2, False, 13)
    # opset 16: half_pixel by default (aligned True), output_half_pixel when said
    yield roi_case("detect_roialign_half_pixel_op16", x, rois, bi, 7, 5, 0.25, 2, True, 16)
    yield roi_case("detect_roialign_output_half_pixel_op16", x, rois, bi, 7, 5, 0.25, 2, False, 16, explicit=True)
    # adaptive sampling (sampling_ratio 0: ceil(roi size / output size) per axis)
    yield roi_case("detect_roialign_adaptive_op13", x, rois, bi, 3, 4, 0.25, 0, False, 13)
    yield roi_case("detect_roialign_adaptive_half_pixel_op16", x, rois, bi, 3, 4, 0.25, 0, True, 16)
    # rois under a pixel (stretched to one when aligned False), rois partly outside the map
    small, sbi = rois_for(322, 10, 2, 20, small=True)
    yield roi_case("detect_roialign_small_op13", x, small, sbi, 2, 2, 1.0, 0, False, 13)
    yield roi_case("detect_roialign_small_half_pixel_op16", x, small, sbi, 2, 2, 1.0, 0, True, 16)
    out, obi = rois_for(323, 10, 2, 100, outside=True)
    yield roi_case("detect_roialign_outside_op13", x, out, obi, 4, 4, 0.25, 2, False, 13)
    # NaN in the feature map travels to the bins that sample it
    xn = x.copy()
    xn[1, 3, 5:7, 4:9] = np.nan
    yield roi_case("detect_roialign_nan_op13", xn, rois, bi, 7, 7, 0.25, 2, False, 13)
    # max mode: the spec's (torchvision has none)
    yield roi_case("detect_roialign_max_op16", x, rois[:6], bi[:6], 3, 3, 0.25, 2, True, 16, mode="max")
    yield roi_case("detect_roialign_max_adaptive_op11", x, rois[:6], bi[:6], 2, 3, 0.25, 0, False, 11, mode="max")
    # torchvision's own export of roi_align (Gather, Squeeze, Cast of the rois' batch column)
    g = torch.Generator().manual_seed(324)
    xt = torch.randn(2, 4, 16, 16, generator=g)
    boxes = torch.cat([torch.tensor([[0.], [1.], [1.], [0.], [1.]]), T(rois_for(325, 5, 2, 60)[0])], 1)
    f = io.BytesIO()
    torch.onnx.export(_RoiAlign(), (xt, boxes), f, opset_version=13, input_names=["x", "boxes"], output_names=["y"])
    yield Case("detect_exported_roi_align", None, {"x": xt.numpy(), "boxes": boxes.numpy()},
               {"y": _RoiAlign()(xt, boxes).numpy()}, rtol=0.0, atol=0.0, model=onnx.load_from_string(f.getvalue()))


# ---- the other ops' forms torchvision's detectors export ----

def zoo_forms():
    """The forms of other ops the detection zoo's exports use (docs/OPS.md,
    "Detectors"): shape arithmetic on int64 and int32 (reductions over all
    axes with keepdims 0, Div, Mod, Cast, Expand, Tile, Split), bool logic,
    Clip with only a max, GatherND, TopK, ScatterElements; numpy or torch."""
    r = np.random.default_rng(5)
    i64 = r.integers(-40, 40, (3, 4)).astype(np.int64)
    i64p = r.integers(1, 9, (3, 4)).astype(np.int64)
    i32 = r.integers(-40, 40, (3, 4)).astype(np.int32)
    f = r.uniform(-3, 3, (3, 4)).astype(np.float32)
    b1 = r.uniform(0, 1, (3, 4)) > 0.5
    b2 = r.uniform(0, 1, (3, 4)) > 0.5
    for op, fn in [("ReduceMin", np.min), ("ReduceMax", np.max), ("ReduceProd", np.prod)]:
        for nm, x in [("i64", i64), ("f32", f)]:
            yield Case(f"detect_form_{op}_{nm}_all_keep0", op, {"x": x}, {"y": np.array(fn(x), x.dtype)}, attrs={"keepdims": 0}, ref="numpy")
    yield Case("detect_form_div_i64", "Div", {"a": i64, "b": i64p}, {"y": (np.trunc(i64 / i64p)).astype(np.int64)}, ref="numpy")
    yield Case("detect_form_mul_i32", "Mul", {"a": i32, "b": i32}, {"y": i32 * i32}, ref="numpy")
    yield Case("detect_form_cast_i32_f32", "Cast", {"a": i32}, {"y": i32.astype(np.float32)}, attrs={"to": 1}, ref="numpy")
    yield Case("detect_form_cast_f32_i32", "Cast", {"a": f}, {"y": f.astype(np.int32)}, attrs={"to": 6}, ref="numpy")
    yield Case("detect_form_cast_i64_i32", "Cast", {"a": i64}, {"y": i64.astype(np.int32)}, attrs={"to": 6}, ref="numpy")
    yield Case("detect_form_cast_b_b", "Cast", {"a": b1}, {"y": b1}, attrs={"to": 9}, ref="numpy")
    yield Case("detect_form_cast_f_b", "Cast", {"a": f}, {"y": f != 0}, attrs={"to": 9}, ref="numpy")
    yield Case("detect_form_mod_i64", "Mod", {"a": i64, "b": i64p}, {"y": np.mod(i64, i64p)}, attrs={"fmod": 0}, ref="numpy")
    yield Case("detect_form_xor", "Xor", {"a": b1, "b": b2}, {"y": b1 ^ b2}, ref="numpy")
    yield Case("detect_form_not", "Not", {"a": b1}, {"y": ~b1}, ref="numpy")
    yield Case("detect_form_and", "And", {"a": b1, "b": b2}, {"y": b1 & b2}, ref="numpy")
    yield Case("detect_form_less_i64", "Less", {"a": i64, "b": np.array(3, np.int64)}, {"y": i64 < 3}, ref="numpy", consts={"b"})
    yield Case("detect_form_where_i64", "Where", {"c": b1, "a": i64, "b": i64p}, {"y": np.where(b1, i64, i64p)}, ref="numpy")
    yield Case("detect_form_expand_i32", "Expand", {"a": i32[:1], "s": np.array([3, 4], np.int64)}, {"y": np.broadcast_to(i32[:1], (3, 4)).copy()}, ref="numpy", consts={"s"})
    yield Case("detect_form_clip_nomin", "Clip", {"a": f, "mx": np.array(1.5, np.float32)}, {"y": np.minimum(f, 1.5).astype(np.float32)}, ref="numpy", node_inputs=["a", "", "mx"])
    x = r.uniform(-1, 1, (4, 5, 6)).astype(np.float32)
    ind = r.integers(0, 4, (7, 2)).astype(np.int64)
    yield Case("detect_form_gathernd", "GatherND", {"x": x, "i": ind}, {"y": x[ind[:, 0], ind[:, 1]]}, ref="numpy", consts={"i"})
    yield Case("detect_form_tile_i64", "Tile", {"a": i64, "rep": np.array([2, 1], np.int64)}, {"y": np.tile(i64, (2, 1))}, ref="numpy", consts={"rep"})
    yield Case("detect_form_split_i64", "Split", {"a": i64, "s": np.array([1, 3], np.int64)}, {"y0": i64[:, :1], "y1": i64[:, 1:]}, attrs={"axis": 1}, ref="numpy", consts={"s"})
    v = r.uniform(-1, 1, (2, 50)).astype(np.float32)
    tv, ti = torch.topk(torch.from_numpy(v), 7, dim=1, largest=True, sorted=True)
    yield Case("detect_form_topk", "TopK", {"x": v, "k": np.array([7], np.int64)}, {"v": tv.numpy(), "i": ti.numpy()}, attrs={"axis": 1, "largest": 1, "sorted": 1}, consts={"k"})
    d = np.zeros((6, 3), np.float32)
    idx = np.array([[4, 4, 4], [1, 1, 1], [0, 0, 0]], np.int64)
    u = r.uniform(-1, 1, (3, 3)).astype(np.float32)
    want = d.copy()
    want[[4, 1, 0]] = u
    yield Case("detect_form_scatter_elements", "ScatterElements", {"d": d, "i": idx, "u": u}, {"y": want}, attrs={"axis": 0}, ref="numpy")


def cases():
    yield from nms_cases(fed=False)
    yield from roi_cases()
    yield from zoo_forms()


def dyn_cases():
    """Cases that need h4-dyn's run-time preparation (see the module's doc)."""
    yield from nms_cases(fed=True)
    yield exported_batched_nms()
