"""Sequence ops whose sequence is known in structure when the model loads
(core/src/exec/fuse_seqops.c rewrites their readers into tensor ops):
SplitToSequence (no split with keepdims 0 and 1, a scalar split whose last
piece is shorter, a list) read by SequenceAt (positive and negative
positions) and SequenceLength; SequenceConstruct, SequenceEmpty,
SequenceInsert (at a position and appended) and SequenceErase read by
SequenceAt, SequenceLength and ConcatFromSequence (new_axis 0 and 1, a
negative axis); and torch.tensor_split(x, sections) as torch.onnx.export
writes it (SplitToSequence + SequenceAt), fed another length than traced.
References: numpy from the ONNX spec, and PyTorch for the export."""
import io
import warnings

import numpy as np
import onnx
import torch
from onnx import helper

from opcase import Case, randf

I64 = np.int64


def seq_case(name, nodes, inputs, outputs, consts=(), opset=14):
    return Case(name, "Sequence", inputs, outputs, nodes=nodes, consts=consts, opset=opset, ref="numpy")


def split_cases():
    x = randf(1, 2, 5, 3)
    n = helper.make_node
    # no split, keepdims 0: x[:, i]
    for i in (1, -1):
        yield seq_case(f"seq_split_ones_at_{'m' if i < 0 else ''}{abs(i)}",
                       [n("SplitToSequence", ["x"], ["s"], axis=1, keepdims=0), n("SequenceAt", ["s", "i"], ["y"])],
                       {"x": x, "i": np.array(i, I64)}, {"y": x[:, i]}, consts=["i"])
    # no split, keepdims 1 (the default), axis -1
    yield seq_case("seq_split_keepdims_at",
                   [n("SplitToSequence", ["x"], ["s"], axis=-1), n("SequenceAt", ["s", "i"], ["y"])],
                   {"x": x, "i": np.array(2, I64)}, {"y": x[:, :, 2:3]}, consts=["i"])
    # a scalar split of 2 over 5: pieces 2, 2, 1; the last, and the count
    yield seq_case("seq_split_scalar_last",
                   [n("SplitToSequence", ["x", "sp"], ["s"], axis=1), n("SequenceAt", ["s", "i"], ["y"]),
                    n("SequenceLength", ["s"], ["len"])],
                   {"x": x, "sp": np.array(2, I64), "i": np.array(-1, I64)},
                   {"y": x[:, 4:5], "len": np.array(3, I64)}, consts=["sp", "i"])
    # a list split [1, 3, 1]: piece 1
    yield seq_case("seq_split_list_at",
                   [n("SplitToSequence", ["x", "sp"], ["s"], axis=1), n("SequenceAt", ["s", "i"], ["y"])],
                   {"x": x, "sp": np.array([1, 3, 1], I64), "i": np.array(1, I64)}, {"y": x[:, 1:4]},
                   consts=["sp", "i"])


def list_cases():
    a, b, c = randf(2, 2, 3), randf(3, 2, 3), randf(4, 2, 3)
    n = helper.make_node
    ins = {"a": a, "b": b, "c": c}
    construct = n("SequenceConstruct", ["a", "b", "c"], ["s"])
    yield seq_case("seq_construct_concat_axis1", [construct, n("ConcatFromSequence", ["s"], ["y"], axis=1)], ins,
                   {"y": np.concatenate([a, b, c], 1)})
    yield seq_case("seq_construct_stack_axis_m1", [construct, n("ConcatFromSequence", ["s"], ["y"], axis=-1, new_axis=1)],
                   ins, {"y": np.stack([a, b, c], -1)})
    yield seq_case("seq_construct_length_at", [construct, n("SequenceLength", ["s"], ["len"]),
                                               n("SequenceAt", ["s", "i"], ["y"])],
                   dict(ins, i=np.array(-2, I64)), {"len": np.array(3, I64), "y": b}, consts=["i"])
    # [] -> insert c -> insert a at 0 -> append b -> erase position 1 (c) -> [a, b]
    nodes = [n("SequenceEmpty", [], ["e"], dtype=1), n("SequenceInsert", ["e", "c"], ["s1"]),
             n("SequenceInsert", ["s1", "a", "zero"], ["s2"]), n("SequenceInsert", ["s2", "b"], ["s3"]),
             n("SequenceErase", ["s3", "one"], ["s4"]), n("ConcatFromSequence", ["s4"], ["y"], axis=0),
             n("SequenceLength", ["s4"], ["len"])]
    yield seq_case("seq_insert_erase_concat", nodes, dict(ins, zero=np.array(0, I64), one=np.array(1, I64)),
                   {"y": np.concatenate([a, b], 0), "len": np.array(2, I64)}, consts=["zero", "one"])


class TensorSplit(torch.nn.Module):
    def forward(self, x):
        parts = torch.tensor_split(x, 3, dim=1)
        return parts[0], parts[2]


def export_cases():
    g = torch.Generator().manual_seed(4)
    for opset in (14, 17):
        f = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(TensorSplit(), (torch.randn(2, 7, 3, generator=g),), f, opset_version=opset,
                              input_names=["x"], output_names=["y0", "y2"], dynamic_axes={"x": {0: "b", 1: "t"}})
        model = onnx.load_from_string(f.getvalue())
        assert any(nd.op_type == "SplitToSequence" for nd in model.graph.node)
        x = torch.randn(3, 8, 3, generator=g)        # 8 = 3 + 3 + 2, not the traced 7
        y0, y2 = TensorSplit()(x)
        yield Case(f"seq_tensor_split_op{opset}", "Sequence", {"x": x.numpy()}, {"y0": y0.numpy(), "y2": y2.numpy()},
                   model=model)


def cases():
    yield from split_cases()
    yield from list_cases()
    yield from export_cases()
