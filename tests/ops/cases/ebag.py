"""nn.EmbeddingBag, as torch.onnx.export writes it: a Loop over the bags
whose body slices each bag's indices out of the flat indices, gathers their
rows from the table and reduces them (sum, mean, max). bitflip runs that
Loop as one bf.EmbeddingBag op (core/src/exec/fuse_loop.c); these cases
check it against the module's own outputs:

- a 2-D input [batch, bag size] (fixed-size bags; the offsets come from the
  input's shape, folded when the plan is built), dynamic batch, every mode,
  at opsets 11 (Unsqueeze's and ReduceSum's axes as attributes), 13 and 17;
- a 1-D input with constant offsets (an empty bag among them), with
  include_last_offset False (the exporter appends the index count) and True
  (the offsets as given, one fewer bag);
- 1-D offsets fed as a graph input (bag bounds known only at run time);
- tables holding NaN and +-Inf, where PyTorch's kernel decides: a sum or
  mean propagates them, max keeps a bag's first row and then takes only
  greater elements (a NaN sticks only when it comes first), empty bags are 0.
"""
import io
import warnings

import numpy as np
import onnx
import torch

from opcase import Case, rng

NUM, DIM = 12, 5


class Bag2D(torch.nn.Module):
    def __init__(self, mode, weight=None):
        super().__init__()
        self.e = torch.nn.EmbeddingBag(NUM, DIM, mode=mode)
        if weight is not None:
            with torch.no_grad():
                self.e.weight.copy_(torch.from_numpy(weight))

    def forward(self, x):
        return self.e(x)


class Bag1D(torch.nn.Module):
    """1-D indices; offsets a constant of the module (None: fed as input)."""

    def __init__(self, mode, offsets=None, last=False, weight=None):
        super().__init__()
        self.e = torch.nn.EmbeddingBag(NUM, DIM, mode=mode, include_last_offset=last)
        self.offsets = offsets
        if weight is not None:
            with torch.no_grad():
                self.e.weight.copy_(torch.from_numpy(weight))

    def forward(self, x, offsets=None):
        if offsets is None:
            offsets = torch.tensor(self.offsets, dtype=torch.int64)
        return self.e(x, offsets)


def export(mod, args, in_names, opset, dynamic=None):
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(mod, tuple(torch.from_numpy(a) for a in args), f, opset_version=opset,
                          input_names=in_names, output_names=["y"], dynamic_axes=dynamic, do_constant_folding=True)
    model = onnx.load_from_string(f.getvalue())
    assert any(n.op_type == "Loop" for n in model.graph.node), "the export has no Loop: nothing to fuse"
    return model


def run(mod, *args):
    with torch.no_grad():
        return mod(*[torch.from_numpy(a) for a in args]).numpy()


def case(name, mod, args, in_names, opset, dynamic=None):
    torch.manual_seed(0)
    model = export(mod.eval(), args, in_names, opset, dynamic)
    return Case(name, "EmbeddingBag", dict(zip(in_names, args)), {"y": run(mod, *args)}, model=model)


def special_table():
    w = rng(7).uniform(-2, 2, size=(NUM, DIM)).astype(np.float32)
    w[1, 0] = np.nan          # rows 1 and 2 meet in bags below: NaN first, then later
    w[2, 1] = np.inf
    w[3, 1] = -np.inf         # inf + -inf = NaN in a sum
    w[4, 2] = np.nan
    w[5, 3] = -0.0            # max copies a first row's -0; a sum starts from +0
    return w


def cases():
    x2 = rng(1).integers(0, NUM, size=(6, 4)).astype(np.int64)
    for mode in ("sum", "mean", "max"):
        for opset in (11, 13, 17):
            torch.manual_seed(3)
            yield case(f"ebag_2d_{mode}_op{opset}", Bag2D(mode), [x2], ["x"], opset, {"x": {0: "batch"}})

    x1 = rng(2).integers(0, NUM, size=(9,)).astype(np.int64)
    offsets = [0, 3, 3, 7]                      # bag 1 empty; the last bag runs to the end
    for mode in ("sum", "mean", "max"):
        for opset in (13, 17):
            torch.manual_seed(4)
            yield case(f"ebag_1d_offsets_{mode}_op{opset}", Bag1D(mode, offsets), [x1], ["x"], opset)
            torch.manual_seed(4)
            yield case(f"ebag_1d_last_offset_{mode}_op{opset}", Bag1D(mode, offsets + [9], last=True), [x1], ["x"],
                       opset)

    # offsets as a graph input (as many as indices, so opcase keeps both fed)
    x4 = np.array([5, 0, 11, 7, 7, 2], np.int64)
    o4 = np.array([0, 2, 2, 3, 5, 6], np.int64)   # bags 1 and 5 empty
    for mode in ("sum", "mean", "max"):
        torch.manual_seed(5)
        yield case(f"ebag_1d_offsets_input_{mode}_op13", Bag1D(mode), [x4, o4], ["x", "offsets"], 13)

    # NaN / Inf in the table; bags: [1, 2] NaN first, [2, 1] NaN later, [3, 2] -inf + inf, [4], [5], empty, [0, 5]
    w = special_table()
    xs = np.array([1, 2, 2, 1, 3, 2, 4, 5, 0, 5], np.int64)
    os_ = [0, 2, 4, 6, 7, 8, 8]
    for mode in ("sum", "mean", "max"):
        yield case(f"ebag_nan_inf_{mode}_op13", Bag1D(mode, os_, weight=w), [xs], ["x"], 13)
