"""Exported patterns that bitflip runs as one op (core/src/exec/fuse.c),
against the PyTorch modules that were exported.

torch.onnx.export spells LayerNorm (below opset 17), GELU (both forms) and
Hardswish (opset 13) out in several nodes; PyTorch computes each in one
kernel, which overflows differently from the nodes under huge values: a
LayerNorm row past ~1.8e19 is NaN in PyTorch, GELU of x past 1.7e38 is x in
PyTorch and Inf in the nodes, Hardswish of x past 5.7e37 is Inf in PyTorch
and finite in the nodes (docs/NUMERICS.md). Every case is a whole export,
fed inputs holding such values, Inf and NaN, and compared with the module's
own output: bitflip must fuse each pattern to match it. Opsets 13, 14, 16
(LayerNorm) and 13 (the activations), and the export at opset 17, where
LayerNorm is one node already, for comparison.
"""
import io

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper

from opcase import Case, randf

T = torch.from_numpy


def exported(name, module, x, opset, rtol=1e-5, atol=1e-6):
    """The graph torch.onnx.export writes for module(x), fed x; reference: the module."""
    module.eval()
    f = io.BytesIO()
    torch.onnx.export(module, (T(x),), f, opset_version=opset, input_names=["x"], output_names=["y"],
                      do_constant_folding=True)
    m = onnx.load_from_string(f.getvalue())
    inits = {i.name: numpy_helper.to_array(i).copy() for i in m.graph.initializer}
    with torch.no_grad():
        y = module(T(x)).numpy()
    return Case(name, None, {"x": x, **inits}, {"y": y}, opset=opset, consts=set(inits), nodes=list(m.graph.node),
                rtol=rtol, atol=atol)


def huge_rows(seed, rows, n):
    """Rows of n values in [-2, 2], most with one extreme element: past the
    ~1.8e19 where PyTorch's Welford moments overflow, near FLT_MAX, Inf, NaN."""
    x = randf(seed, rows, n, lo=-2, hi=2)
    vals = [1e19, 1e20, -1e20, 3e38, np.inf, -np.inf, np.nan, 5e18, 1e30, -3e38]
    for r, v in enumerate(vals[:rows - 1]):
        x[r + 1, (3 * r) % n] = v
    return x


def layernorm_cases():
    for opset in (13, 14, 16, 17):
        ln = torch.nn.LayerNorm(24)
        with torch.no_grad():
            ln.weight.copy_(T(randf(1, 24, lo=0.5, hi=1.5)))
            ln.bias.copy_(T(randf(2, 24)))
        x = huge_rows(3, 11, 24).reshape(1, 11, 24)
        yield exported(f"fuse_layernorm_op{opset}", ln, x, opset, rtol=1e-4, atol=1e-5)
    # without elementwise_affine: the pattern ends at the Div
    ln = torch.nn.LayerNorm(16, elementwise_affine=False, eps=1e-3)
    x = huge_rows(4, 9, 16).reshape(9, 1, 16)
    yield exported("fuse_layernorm_noaffine_op13", ln, x, 13, rtol=1e-4, atol=1e-5)
    yield exported("fuse_layernorm_noaffine_op16", ln, x, 16, rtol=1e-4, atol=1e-5)
    # over the last two dims: axes [-2, -1], scale and bias [3, 8]
    ln2 = torch.nn.LayerNorm([3, 8])
    with torch.no_grad():
        ln2.weight.copy_(T(randf(5, 3, 8, lo=0.5, hi=1.5)))
        ln2.bias.copy_(T(randf(6, 3, 8)))
    x = huge_rows(7, 8, 24).reshape(8, 3, 8)
    yield exported("fuse_layernorm_2d_op13", ln2, x, 13, rtol=1e-4, atol=1e-5)
    yield exported("fuse_layernorm_2d_op14", ln2, x, 14, rtol=1e-4, atol=1e-5)
    # a scale element of 1.8e38 (a flipped exponent bit): (x * rstd - mean * rstd) * scale overflows
    ln3 = torch.nn.LayerNorm(32)
    with torch.no_grad():
        w = randf(8, 32, lo=0.5, hi=1.5)
        w[5] = 1.8e38
        ln3.weight.copy_(T(w))
        ln3.bias.copy_(T(randf(9, 32)))
    yield exported("fuse_layernorm_scale_1e38_op13", ln3, randf(10, 16, 32, lo=-3, hi=3), 13)


class TwoLayerNorms(torch.nn.Module):
    """Two LayerNorms whose weights are equal and whose biases are equal (as
    every LayerNorm's are before training): torch.onnx.export stores each
    tensor once and writes each module's weight and bias as an Identity of it,
    so the pattern's Mul and Add read Identity outputs (a ViT's export)."""

    def __init__(self, n):
        super().__init__()
        self.a, self.b = torch.nn.LayerNorm(n), torch.nn.LayerNorm(n)
        with torch.no_grad():
            for ln in (self.a, self.b):
                ln.weight.copy_(T(randf(11, n, lo=0.5, hi=1.5)))
                ln.bias.copy_(T(randf(12, n)))

    def forward(self, x):
        return self.b(self.a(x) * 3.0)


def layernorm_identity_cases():
    x = huge_rows(13, 11, 24).reshape(1, 11, 24)
    c = exported("fuse_layernorm_identity_op13", TwoLayerNorms(24), x, 13, rtol=1e-4, atol=1e-5)
    ids = [n for n in c.nodes if n.op_type == "Identity"]
    assert len(ids) == 2, "the export no longer writes shared weights as Identity nodes: %d" % len(ids)
    yield c


def activation_cases():
    g = randf(20, 4, 16, lo=-4, hi=4)
    g[0, :10] = [np.inf, -np.inf, np.nan, 1e30, -1e30, 1e38, -3e38, 1.7e38, 2e38, 3e38]
    g[1, :8] = [1e13, -1e13, 1e20, -1e20, 3.4e38, -3.4e38, 1e-30, -0.0]
    g[2, :4] = [2.2e12, -2.2e12, 5e12, 1e4]
    for opset in (13, 17):
        yield exported(f"fuse_gelu_op{opset}", torch.nn.GELU(), g, opset, atol=2e-6)
        yield exported(f"fuse_gelu_tanh_op{opset}", torch.nn.GELU(approximate="tanh"), g, opset, atol=2e-6)
    h = randf(21, 4, 12, lo=-5, hi=5)
    h[0, :10] = [np.inf, -np.inf, np.nan, 5e37, 5.7e37, 6e37, 1e38, 3e38, -1e38, -3e38]
    h[1, :6] = [-3.0, 3.0, -0.0, 1e-30, 2.9999998, -2.9999998]
    yield exported("fuse_hardswish_op13", torch.nn.Hardswish(), h, 13)


class LinearGelu(torch.nn.Module):
    """A Linear before each activation, as in a transformer MLP: the pattern's
    input comes from a node, and the activation output feeds another."""

    def __init__(self, act):
        super().__init__()
        self.fc1, self.act, self.fc2 = torch.nn.Linear(8, 16), act, torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def chain_cases():
    torch.manual_seed(30)
    x = randf(31, 6, 8, lo=-2, hi=2)
    x[1, 2], x[2, 5], x[3, 0] = 1e37, -1e37, 3e38
    for act, name in ((torch.nn.GELU(), "gelu"), (torch.nn.Hardswish(), "hardswish"),
                      (torch.nn.LayerNorm(16), "layernorm")):
        mod = LinearGelu(act)
        yield exported(f"fuse_chain_{name}_op13", mod, x, 13, rtol=1e-4, atol=1e-5)


def _ln_export(eps=1e-5):
    ln = torch.nn.LayerNorm(8, eps=eps)
    with torch.no_grad():
        ln.weight.copy_(T(randf(40, 8, lo=0.5, hi=1.5)))
        ln.bias.copy_(T(randf(41, 8)))
    x = randf(42, 3, 4, 8, lo=-2, hi=2)
    return ln, x, exported("tmp", ln, x, 13)


def _by_op(nodes, op, k=0):
    return [n for n in nodes if n.op_type == op][k]


def _set_const(nodes, value_name, value):
    for n in nodes:
        if n.op_type == "Constant" and n.output[0] == value_name:
            del n.attribute[:]
            n.attribute.extend([helper.make_attribute("value", numpy_helper.from_array(np.array(value, np.float32)))])
            return
    raise KeyError(value_name)


def near_miss_cases():
    """Graphs one detail away from an exported pattern, which must stay
    unfused (tests/unit/test_fuse.c checks their bound graphs); the reference
    is the decomposed formula in torch, what the nodes compute."""
    ln, x, base = _ln_export()
    w, b = ln.weight.detach(), ln.bias.detach()
    xt = T(x)

    def decomposed(axes=(-1,), power=2.0, eps=1e-5):
        mean = xt.mean(dim=axes, keepdim=True)
        d = xt - mean
        var = d.pow(power).mean(dim=axes, keepdim=True)
        return d / torch.sqrt(var + eps) * w + b, d.pow(power)

    # an intermediate, (x - mean)^2, also a graph output: read twice
    c = Case("fuse_nearmiss_read_twice", None, base.inputs, {}, opset=13, consts=base.consts,
             nodes=[onnx.NodeProto.FromString(n.SerializeToString()) for n in base.nodes], rtol=1e-5, atol=1e-6)
    pw = _by_op(c.nodes, "Pow")
    y, sq = decomposed()
    c.outputs = {"y": y.numpy(), pw.output[0]: sq.numpy()}
    yield c
    # Pow 3 instead of 2
    c = Case("fuse_nearmiss_pow3", None, base.inputs, {}, opset=13, consts=base.consts,
             nodes=[onnx.NodeProto.FromString(n.SerializeToString()) for n in base.nodes], rtol=1e-4, atol=1e-5)
    _set_const(c.nodes, _by_op(c.nodes, "Pow").input[1], 3.0)
    c.outputs = {"y": decomposed(power=3.0)[0].numpy()}
    yield c
    # both means over axis -2: not LayerNorm's trailing axes
    c = Case("fuse_nearmiss_axes", None, base.inputs, {}, opset=13, consts=base.consts,
             nodes=[onnx.NodeProto.FromString(n.SerializeToString()) for n in base.nodes], rtol=1e-4, atol=1e-5)
    for k in range(2):
        r = _by_op(c.nodes, "ReduceMean", k)
        del r.attribute[:]
        r.attribute.extend([helper.make_attribute("axes", [-2])])
    c.outputs = {"y": decomposed(axes=(-2,))[0].numpy()}
    yield c
    # a different epsilon is still LayerNorm: fused, with that epsilon
    ln3, x3, c = _ln_export(eps=1e-2)
    c.name = "fuse_layernorm_eps_1e-2"
    yield c
    # opset 18 moves ReduceMean's axes to an input: the same pattern, fused
    c = Case("fuse_layernorm_op18_axes_input", None, base.inputs, base.outputs, opset=18, consts=base.consts,
             nodes=[onnx.NodeProto.FromString(n.SerializeToString()) for n in base.nodes], rtol=1e-5, atol=1e-6,
             check=False)
    axes_nodes = []
    for k in range(2):
        r = _by_op(c.nodes, "ReduceMean", k)
        del r.attribute[:]
        name = "axes_%d" % k
        axes_nodes.append(helper.make_node("Constant", [], [name], name=name,
                                           value=numpy_helper.from_array(np.array([-1], np.int64))))
        r.input.append(name)
    c.nodes = axes_nodes + c.nodes
    yield c
    # HardSigmoid with ONNX's default alpha 0.2 times x: not Hardswish
    h = randf(43, 3, 6, lo=-4, hi=4)
    nodes = [helper.make_node("HardSigmoid", ["x"], ["hs"], name="hs"),
             helper.make_node("Mul", ["x", "hs"], ["y"], name="mul")]
    yield Case("fuse_nearmiss_hardsigmoid", None, {"x": h},
               {"y": (T(h) * torch.clamp(0.2 * T(h) + 0.5, 0, 1)).numpy()}, nodes=nodes, opset=13)


def cases():
    yield from near_miss_cases()
    yield from layernorm_cases()
    yield from layernorm_identity_cases()
    yield from activation_cases()
    yield from chain_cases()
