"""Shapes that are data: graphs whose output shapes depend on the values fed
(docs/ENGINE.md, "Dynamic steps"). torch.onnx.export of small functions:
NonZero of a computed mask and the Gather, TopK, Range, Reshape, Expand,
Concat, Slice, Tile, Pad, ConstantOfShape and OneHot steps that read it;
torch.jit.script functions with `if` and `for` for If and Loop. References:
the same PyTorch functions run eagerly."""
import io
import warnings

import numpy as np
import onnx
import torch

from opcase import Case


def export(mod, args, in_names, out_names, opset=13):
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(mod, tuple(torch.from_numpy(a) for a in args), f, opset_version=opset,
                          input_names=in_names, output_names=out_names, do_constant_folding=True)
    return onnx.load_from_string(f.getvalue())


def case(name, mod, args, in_names, out_names, opset=13, ops=()):
    mod = mod.eval()
    model = export(mod, args, in_names, out_names, opset)
    have = {n.op_type for n in model.graph.node}
    for op in ops:
        assert op in have, f"{name}: the export has no {op}: {sorted(have)}"
    with torch.no_grad():
        want = mod(*[torch.from_numpy(a) for a in args])
    if not isinstance(want, (tuple, list)):
        want = (want,)
    return Case(name, None, dict(zip(in_names, args)), {k: v.numpy() for k, v in zip(out_names, want)},
                model=model)


class MaskedSelect(torch.nn.Module):
    """x[x > t]: NonZero, Transpose, GatherND; then a Reshape and arithmetic on the kept."""

    def forward(self, x):
        kept = x[x > 0.25]
        return kept * 2.0 + 1.0


class NonZeroGather(torch.nn.Module):
    """torchvision's score filter: indices of scores over a threshold, their boxes by Gather."""

    def forward(self, scores, boxes):
        keep = torch.where(scores > 0.5)[0]
        return boxes[keep], scores[keep], keep


class TopKDataK(torch.nn.Module):
    """TopK whose k is min(3, the count of a data-sized tensor) (torchvision's _topk_min)."""

    def forward(self, x):
        s = x[x > 0.0]
        num = torch.tensor([s.shape[0]], dtype=torch.int64) if not torch.jit.is_tracing() else \
            torch._shape_as_tensor(s)[0].unsqueeze(0)
        k = torch.min(torch.cat([torch.tensor([3], dtype=torch.int64), num]))
        v, i = torch.topk(s, k.item() if not torch.jit.is_tracing() else k)
        return v, i


class RangeReshape(torch.nn.Module):
    """Range, Reshape, Expand, Concat, ConstantOfShape, Tile and Pad sized by a data count."""

    def forward(self, x):
        idx = torch.nonzero(x > 0.0)          # [n, 2]
        n = idx.shape[0]
        r = torch.arange(n)                    # Range of a data limit
        cols = idx[:, 1].reshape(-1, 1)        # Reshape [n, 1]
        grid = cols.expand(n, 3)               # Expand to [n, 3]
        z = torch.zeros(n, dtype=torch.int64)  # ConstantOfShape
        both = torch.cat([r, z, idx[:, 0]])    # Concat of data-sized
        t = cols.repeat(1, 2)                  # Tile
        p = torch.nn.functional.pad(grid.float(), (1, 0))
        return both, t, p


def cases():
    rng = np.random.default_rng(31)
    x = rng.uniform(-1, 1, (3, 5)).astype(np.float32)
    yield case("dyn_masked_select", MaskedSelect(), [x], ["x"], ["y"], ops=["NonZero"])
    # nothing over the threshold: every data-sized value has 0 rows
    yield case("dyn_masked_select_empty", MaskedSelect(), [-np.abs(x)], ["x"], ["y"], ops=["NonZero"])
    scores = rng.uniform(0, 1, (8,)).astype(np.float32)
    boxes = rng.uniform(0, 100, (8, 4)).astype(np.float32)
    yield case("dyn_nonzero_gather", NonZeroGather(), [scores, boxes], ["scores", "boxes"],
               ["kept_boxes", "kept_scores", "keep"], ops=["NonZero", "Gather"])
    for name, v in (("dyn_topk_data_k", x), ("dyn_topk_data_k_short", np.array([[-1, 0.5, -2]], np.float32))):
        yield case(name, TopKDataK(), [v], ["x"], ["values", "indices"], ops=["NonZero", "TopK"])
    yield case("dyn_range_reshape", RangeReshape(), [x], ["x"], ["both", "tiled", "padded"],
               ops=["NonZero", "Range", "Expand", "Concat"])
    yield from control_cases()


# ---- If and Loop: torch.jit.script functions, exported with their control flow ----

class IfShapes(torch.nn.Module):
    """If whose branches give different shapes, reading values from around it."""

    def forward(self, x, w):
        h = x * w
        if bool(h.sum() > 0):
            y = h[h > 0] + w.sum()
        else:
            y = torch.cat([h.flatten(), w.flatten()]) * 2.0
        return y


class BatchedNmsLike(torch.nn.Module):
    """ssdlite's batched_nms structure without NMS: an empty Constant in one
    branch, ReduceMax/Add/Unsqueeze/TopK/Gather over outer values in the other."""

    def forward(self, boxes, scores, idxs):
        keep_mask = scores > 0.3
        b = boxes[keep_mask]
        s = scores[keep_mask]
        i = idxs[keep_mask]
        if b.numel() == 0:
            keep = torch.empty((0,), dtype=torch.int64)
        else:
            offsets = i.to(b) * (b.max() + 1)
            shifted = b + offsets[:, None]
            keep = torch.topk(s + shifted[:, 0] * 0.0, s.shape[0]).indices
        return b[keep], s[keep]


class WhileLoop(torch.nn.Module):
    """A while loop: carried values, an exit on cond (`and` in the condition
    would export an If inside the body, which bitflip does not run)."""

    def forward(self, x):
        s = x.sum()
        y = x
        while bool(s < 100.0):
            y = y * 2.0 + 1.0
            s = y.sum()
        return y, s


class WhileAnd(torch.nn.Module):
    """`while a and b:` exports an If inside the Loop's body."""

    def forward(self, x):
        i = 0
        s = x.sum()
        y = x
        while bool(s < 100.0) and i < 3:
            y = y * 2.0 + 1.0
            s = y.sum()
            i += 1
        return y, s


class ForLoop(torch.nn.Module):
    """A for loop over a data-sized count (the kept rows), carrying a sum."""

    def forward(self, x):
        kept = x[x > 0.0]
        acc = torch.zeros(1)
        for k in range(kept.shape[0]):
            acc = acc + kept[k] * float(k + 1)
        return acc


def scripted_case(name, mod, args, in_names, out_names, ops, opset=13):
    script = torch.jit.script(mod.eval())
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(script, tuple(torch.from_numpy(a) for a in args), f, opset_version=opset,
                          input_names=in_names, output_names=out_names)
    model = onnx.load_from_string(f.getvalue())
    have = {n.op_type for n in model.graph.node}
    for op in ops:
        assert op in have, f"{name}: the export has no {op}: {sorted(have)}"
    with torch.no_grad():
        want = mod(*[torch.from_numpy(a) for a in args])
    if not isinstance(want, (tuple, list)):
        want = (want,)
    return Case(name, None, dict(zip(in_names, args)), {k: v.numpy() for k, v in zip(out_names, want)},
                model=model)


def loop_scan_case():
    """A Loop written from the spec (torch writes no scan outputs): M = 6, cond
    exit after the carried sum passes 10, one carried value and two scans
    (the carried value and the iteration number). Reference: numpy."""
    from onnx import TensorProto, helper
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "x"], ["v_out"]),
         helper.make_node("ReduceSum", ["v_out"], ["tot"], keepdims=0),
         helper.make_node("Less", ["tot", "ten"], ["cond_out"]),
         helper.make_node("Identity", ["v_out"], ["scan_v"]),
         helper.make_node("Identity", ["it"], ["scan_it"])],
        "body",
        [helper.make_tensor_value_info("it", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1, 3]),
         helper.make_tensor_value_info("scan_v", TensorProto.FLOAT, [1, 3]),
         helper.make_tensor_value_info("scan_it", TensorProto.INT64, [])],
        [helper.make_tensor("ten", TensorProto.FLOAT, [], [10.0])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "v0"], ["v_final", "vs", "its"], body=body)],
        "loop_scan",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3]),
         helper.make_tensor_value_info("v0", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("v_final", TensorProto.FLOAT, [1, 3]),
         helper.make_tensor_value_info("vs", TensorProto.FLOAT, ["n", 1, 3]),
         helper.make_tensor_value_info("its", TensorProto.INT64, ["n"])],
        [helper.make_tensor("M", TensorProto.INT64, [], [6])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    x = np.array([[0.5, 1.0, 1.5]], np.float32)
    v0 = np.array([[0.0, 0.25, 0.5]], np.float32)
    v, vs, its, cond, it = v0, [], [], True, 0
    while it < 6 and cond:
        v = v + x
        cond = bool(v.sum(dtype=np.float32) < 10.0)
        vs.append(v)
        its.append(it)
        it += 1
    return Case("dyn_loop_scan_spec", None, {"x": x, "v0": v0},
                {"v_final": v, "vs": np.stack(vs), "its": np.array(its, np.int64)}, model=model, ref="numpy")


def control_cases():
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    w = rng.uniform(0.5, 1, (2, 3)).astype(np.float32)
    yield scripted_case("dyn_if_then", IfShapes(), [np.abs(x), w], ["x", "w"], ["y"], ["If"])
    yield scripted_case("dyn_if_else", IfShapes(), [-np.abs(x), w], ["x", "w"], ["y"], ["If"])
    boxes = rng.uniform(0, 50, (6, 4)).astype(np.float32)
    scores = np.array([0.9, 0.1, 0.5, 0.35, 0.2, 0.8], np.float32)
    idxs = np.array([1, 2, 1, 3, 2, 1], np.int64)
    yield scripted_case("dyn_if_batched_nms_like", BatchedNmsLike(), [boxes, scores, idxs],
                        ["boxes", "scores", "idxs"], ["b", "s"], ["If", "NonZero"])
    yield scripted_case("dyn_if_batched_nms_like_empty", BatchedNmsLike(), [boxes, scores * 0.1, idxs],
                        ["boxes", "scores", "idxs"], ["b", "s"], ["If", "NonZero"])
    yield scripted_case("dyn_loop_while", WhileLoop(), [np.abs(x)], ["x"], ["y", "s"], ["Loop"])
    yield scripted_case("dyn_loop_while_none", WhileLoop(), [np.abs(x) * 100], ["x"], ["y", "s"], ["Loop"])
    yield scripted_case("dyn_loop_for_data", ForLoop(), [x], ["x"], ["acc"], ["Loop", "NonZero"])
    yield scripted_case("dyn_loop_while_and", WhileAnd(), [np.abs(x)], ["x"], ["y", "s"], ["Loop"])
    yield loop_scan_case()
