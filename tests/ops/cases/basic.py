"""Ops the engine had before the op-coverage work, as templates for the
families: a broadcast binary op, Where on a runtime bool, Softmax on a
negative axis, Gather with negative indices. References: PyTorch."""
import numpy as np
import torch

from opcase import Case, randf


def cases():
    a, b = randf(1, 2, 3, 4), randf(2, 3, 1)
    yield Case("basic_add_broadcast", "Add", {"a": a, "b": b},
               {"y": (torch.from_numpy(a) + torch.from_numpy(b)).numpy()})
    c = randf(3, 2, 3, 4) > 0
    x, y = randf(4, 2, 3, 4), randf(5, 4)
    yield Case("basic_where_broadcast", "Where", {"c": c, "x": x, "y": y},
               {"out": torch.where(torch.from_numpy(c), torch.from_numpy(x), torch.from_numpy(y)).numpy()})
    s = randf(6, 3, 5, 7, lo=-4, hi=4)
    yield Case("basic_softmax_axis_neg2", "Softmax", {"x": s},
               {"y": torch.softmax(torch.from_numpy(s), dim=-2).numpy()}, attrs={"axis": -2})
    t = randf(7, 5, 4)
    idx = np.array([[0, -1], [4, -5]], np.int64)
    yield Case("basic_gather_negative", "Gather", {"t": t, "i": idx},
               {"y": t[np.where(idx < 0, idx + 5, idx)]}, attrs={"axis": 0}, ref="numpy", consts={"i"})
