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
