"""torch.squeeze(x, d) as torch.onnx.export writes it where it cannot tell the size of dim d (a
dynamic axis, from opset 11 on): If(Shape(x)[d] == 1) then Squeeze(x, [d]) else Identity(x),
which bitflip runs as one bf.SqueezeIfOne (exec/fuse_if.c). Exported with dynamic_axes on dim d,
fed with that dim 1 (squeezed) and 3 (the identity), d positive and negative, at opsets 11
(axes an attribute), 13 and 17 (axes an input). References: the same PyTorch module run eagerly."""
import io
import warnings

import numpy as np
import onnx
import torch

from opcase import Case, randf


class Squeeze(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.squeeze(x * 2.0, self.dim) + 1.0


SHAPE = [4, 5, 6]


def export(dim, opset, rank):
    ax = dim % rank
    ex = [2] + SHAPE[1:]
    ex[ax] = 1
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Squeeze(dim).eval(), (torch.zeros(ex),), f, opset_version=opset,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch", ax: "d"}, "y": {0: "batch"}})
    m = onnx.load_from_string(f.getvalue())
    assert "If" in {n.op_type for n in m.graph.node}, "the export has no If: the exporter knew the dim"
    return m


def cases():
    for opset in (11, 13, 17):
        for dim, rank in ((1, 3), (-2, 3), (2, 3)):
            model = export(dim, opset, rank)
            for size in (1, 3):
                shape = list(SHAPE)
                shape[dim % rank] = size
                x = randf(opset * 10 + size, *shape)
                y = Squeeze(dim)(torch.from_numpy(x)).numpy()
                assert (y.ndim == rank - 1) == (size == 1)
                tag = f"m{-dim}" if dim < 0 else str(dim)
                yield Case(f"squeeze_if_d{tag}_size{size}_op{opset}", None, {"x": x}, {"y": y}, model=model)


def near_miss(name, cond_dim, squeeze_dim, one):
    """An If that is not torch.squeeze's (the condition reads another dim than the branch
    squeezes, or compares with another number than 1): left an If, run as one (ONNX's meaning)."""
    from onnx import TensorProto, helper
    x = randf(7, 4, 1, 3)   # squeeze_dim 1 is 1, cond_dim 2 is not: a rewrite would squeeze wrongly
    c = lambda n, v: helper.make_node("Constant", [], [n], value=helper.make_tensor(n, TensorProto.INT64, [1], [v]))
    then_g = helper.make_graph([helper.make_node("Squeeze", ["x"], ["t_out"], axes=[squeeze_dim])], "then", [],
                               [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e_out"])], "else", [],
                               [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), c("d", cond_dim), helper.make_node("Gather", ["s", "d"], ["g"], axis=0),
             c("one", one), helper.make_node("Equal", ["g", "one"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)]
    take = x.shape[cond_dim] == one
    y = np.squeeze(x, squeeze_dim) if take else x
    return Case(name, None, {"x": x}, {"y": y}, nodes=nodes, opset=11, ref="numpy")


def dyn_cases():
    # as If, a dynamic step: its output shape is the data's
    yield near_miss("squeeze_if_near_miss_dims", 2, 1, 1)
    yield near_miss("squeeze_if_near_miss_two", 1, 1, 2)
