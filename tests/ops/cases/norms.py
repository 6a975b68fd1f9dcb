"""Normalisations and attention as users write or export them, at the
values a single-bit fault makes (docs/NUMERICS.md), against the PyTorch
modules that were exported.

- GroupNorm: below opset 18 the exporter writes Reshape [0, G, -1],
  InstanceNormalization (scale 1, bias 0), Reshape to Shape(x), Mul, Add;
  PyTorch runs group_norm, whose Welford moments overflow to NaN for a group
  past ~1.8e19, where instance_norm's double sums give the bias. bitflip
  fuses the pattern back into group_norm (core/src/exec/fuse.c).
- BatchNorm exported in training mode (batch statistics, PyTorch's
  batch_norm kernel), and InstanceNorm2d (one node: the same kernel),
  RMSNorm
  written out (x * rsqrt(mean(x^2) + eps) * w), attention written out
  (softmax(q k^T / sqrt(d)) v): run node by node in PyTorch and in bitflip.
Every case is fed Inf, NaN and values past the overflow thresholds.
"""
import copy
import io

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper

from cases.fuse import exported
from opcase import Case, randf

T = torch.from_numpy


def _perturb(mod, seed):
    with torch.no_grad():
        for i, p in enumerate(mod.parameters()):
            p.copy_(T(randf(seed + i, *p.shape, lo=0.5, hi=1.5) if p.dim() == 1 and i % 2 == 0 else
                      randf(seed + i, *p.shape)))
    return mod


def _huge_groups(seed, n, c, *rest):
    """[n, c, *rest] values in [-2, 2]; in most samples one group holds an
    element past a threshold: 1e19 (normal), 3e19, 1e20, 1e30, -2.7e37 (a
    flipped exponent bit), 3e38, Inf, -Inf, NaN; and one whole channel of
    -2.7e37 times the values, as a faulty conv weight makes it."""
    x = randf(seed, n, c, *rest, lo=-2, hi=2)
    flat = x.reshape(n, -1)
    vals = [1e19, 3e19, 1e20, 1e30, -2.7e37, 3e38, np.inf, -np.inf, np.nan]
    for s, v in enumerate(vals[:n - 2]):
        flat[s + 1, (7 * s + 3) % flat.shape[1]] = v
    x[n - 1, c // 2] *= -2.7e37
    return x


class GN(torch.nn.Module):
    def __init__(self, g, c, affine=True, eps=1e-5):
        super().__init__()
        self.gn = torch.nn.GroupNorm(g, c, affine=affine, eps=eps)

    def forward(self, x):
        return self.gn(x)


def groupnorm_cases():
    for opset in (13, 17):
        yield exported(f"norm_groupnorm_1d_op{opset}", _perturb(GN(4, 48), 1), _huge_groups(2, 11, 48, 5), opset,
                       rtol=1e-4, atol=1e-5)
    yield exported("norm_groupnorm_2d_op13", _perturb(GN(2, 6), 3), _huge_groups(4, 9, 6, 3, 4), 13,
                   rtol=1e-4, atol=1e-5)
    # one group per channel (C == G) and eps 1e-3: scale and bias per channel
    yield exported("norm_groupnorm_c_eq_g_op13", _perturb(GN(6, 6, eps=1e-3), 5), _huge_groups(6, 9, 6, 7), 13,
                   rtol=1e-4, atol=1e-5)
    # long groups: the Welford cascade over several chunks (12 * 300 values)
    yield exported("norm_groupnorm_long_op13", _perturb(GN(2, 24), 7), _huge_groups(8, 4, 24, 300), 13,
                   rtol=1e-4, atol=1e-5)
    # without affine parameters: the export's Mul and Add take constants
    yield exported("norm_groupnorm_noaffine_op13", GN(3, 12, affine=False), _huge_groups(9, 9, 12, 4), 13,
                   rtol=1e-4, atol=1e-5)
    # a scale of 1.8e38 in one channel: rstd * scale, then x * a + b
    gn = _perturb(GN(4, 16), 10)
    with torch.no_grad():
        gn.gn.weight[5] = 1.8e38
    yield exported("norm_groupnorm_scale_1e38_op13", gn, randf(11, 3, 16, 6, lo=-3, hi=3), 13)


class SharedGN(torch.nn.Module):
    """One GroupNorm run on both halves of the batch, as FCOS's and RetinaNet
    v2's heads run theirs on each FPN level: the exporter reads the folded
    weight and bias through Identity nodes the second time. With `twin`, a
    second GroupNorm left at its initial values (ones, zeros) as the first:
    the exporter merges equal initializers and reads them through Identity
    too (an untrained model's norms)."""

    def __init__(self, half, twin=False):
        super().__init__()
        self.half = half
        self.gn = torch.nn.GroupNorm(4, 48)
        self.gn2 = torch.nn.GroupNorm(4, 48) if twin else self.gn

    def forward(self, x):
        return torch.cat([self.gn(x[:self.half]), self.gn2(x[self.half:])])


def shared_groupnorm_cases():
    for opset in (13, 16):
        yield exported(f"norm_groupnorm_shared_op{opset}", _perturb(SharedGN(5), 12), _huge_groups(13, 11, 48, 5),
                       opset, rtol=1e-4, atol=1e-5)
    yield exported("norm_groupnorm_twin_init_op13", SharedGN(5, twin=True), _huge_groups(14, 11, 48, 5), 13,
                   rtol=1e-4, atol=1e-5)


class ConvGN(torch.nn.Module):
    """Dilated Conv1d then GroupNorm(4, 48), the held-out model's block."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(8, 48, 3, padding=2, dilation=2)
        self.gn = torch.nn.GroupNorm(4, 48)

    def forward(self, x):
        return torch.relu(self.gn(self.conv(x)))


def conv_groupnorm_cases():
    for k, w in enumerate((-2.7e37, 1e20, 3e38)):
        torch.manual_seed(20)
        m = _perturb(ConvGN(), 21)
        with torch.no_grad():
            m.conv.weight[13, 2, 1] = w
        yield exported(f"norm_conv_groupnorm_w{k}_op13", m, randf(22, 3, 8, 16), 13, rtol=1e-4, atol=1e-5)


class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.w, self.eps = torch.nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w


class Attention(torch.nn.Module):
    """softmax(q k^T / sqrt(d)) v written out, as PyTorch 1.13 users do."""

    def __init__(self, d):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(d, d) for _ in range(3))
        self.d = d

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        a = torch.softmax(q @ k.transpose(-2, -1) / self.d ** 0.5, dim=-1)
        return a @ v


def written_out_cases():
    x = randf(30, 12, 16, lo=-2, hi=2)
    x[1:10, 3] = [1e19, 2e19, 1e20, 1e30, -2.7e37, 3e38, np.inf, -np.inf, np.nan]
    yield exported("norm_rmsnorm_op13", _perturb(RMSNorm(16), 31), x.reshape(3, 4, 16), 13, rtol=1e-4, atol=1e-5)
    torch.manual_seed(32)
    att = Attention(8)
    xa = randf(33, 5, 6, 8, lo=-2, hi=2)
    # 1e18: scores near 1e35
    xa[1, 2, 3], xa[2, 0, 0], xa[3, 5, 7], xa[4, 1, 1] = 1e18, -2.7e37, np.inf, np.nan
    yield exported("norm_attention_op13", att, xa, 13, rtol=1e-4, atol=1e-5)
    # 1e20 and 3e38 in one token: its q and k rows are all near 1e20 (or
    # Inf), single products q_i k_i pass FLT_MAX with both signs, and
    # PyTorch's loop (each product rounded, then added) gives Inf - Inf = NaN
    # in that score and so a NaN row (docs/NUMERICS.md, "Softmax and
    # attention"); a fused multiply-add chain gave +-Inf there
    for tag, v in (("1e20", 1e20), ("3e38", 3e38)):
        xh = randf(36, 5, 6, 8, lo=-2, hi=2)
        xh[1, 2, 3], xh[3, 0, 5] = v, -v
        yield exported(f"norm_attention_x{tag}_op13", att, xh, 13, rtol=1e-4, atol=1e-5)
    inorm = torch.nn.InstanceNorm2d(4, affine=True)
    _perturb(inorm, 34)
    yield exported("norm_instancenorm2d_huge_op13", inorm, _huge_groups(35, 9, 4, 3, 5), 13, rtol=1e-4, atol=1e-5)


def matmul_activation_cases():
    """MatMul of two fed inputs (two activations), bit for bit (rtol = atol =
    0) against torch.matmul: a bmm (both ranks >= 3) under 400 multiply-adds
    per matrix is ATen's plain loop, each product rounded before it is added
    (bitflip: core/src/exec/ops/matmul_plain.c); the others are BLAS, with
    OpenBLAS 0.3.21 the in-order fma chain bitflip's bf__sgemm computes.
    Generate with OpenBLAS as libblas.so.3 (Debian's libopenblas0; the
    reference libblas3 rounds every product, and the large cases differ)."""
    exact = dict(rtol=0.0, atol=0.0)

    def mm(name, a, b):
        y = torch.matmul(T(a), T(b)).numpy()
        return Case(name, "MatMul", {"a": a, "b": b}, {"y": y}, opset=13, **exact)

    yield mm("norm_matmul_act_small", randf(70, 3, 5, 8), randf(71, 3, 8, 6))          # 240 < 400
    yield mm("norm_matmul_act_399", randf(84, 2, 7, 19), randf(85, 2, 19, 3))        # 399: the loop
    yield mm("norm_matmul_act_400", randf(86, 2, 5, 16), randf(87, 2, 16, 5))        # 400: BLAS
    yield mm("norm_matmul_act_bmm", randf(72, 4, 16, 32), randf(73, 4, 32, 16))      # BLAS, per matrix
    yield mm("norm_matmul_act_2d", randf(74, 20, 24), randf(75, 24, 12))             # mm
    yield mm("norm_matmul_act_fold", randf(76, 2, 7, 24), randf(77, 24, 9))          # 3-D @ 2-D: mm
    yield mm("norm_matmul_act_bcast", randf(78, 2, 3, 4, 8), randf(79, 3, 8, 5))     # bmm, batch broadcast
    # products past FLT_MAX of both signs in one sum: NaN in PyTorch (Inf -
    # Inf), where an fma chain keeps +-Inf; one huge product alone: +-Inf
    q, k = randf(80, 2, 4, 8, lo=-2, hi=2), randf(81, 2, 8, 5, lo=-2, hi=2)
    q[0, 1, 2:4] = 1e20
    k[0, 2:4, 0] = [1e20, -1e20]        # score [0, 1, 0]: 1e40 - 1e40
    k[0, 2, 1] = 1e20                   # score [0, 1, 1]: one product past FLT_MAX
    q[1, 0, 6] = 3e38
    k[1, 6, :] = [1.5, -1.5, 0.5, -0.25, 2.0]
    q[1, 0, 7] = -3e38                  # 3e38*k6 - 3e38*k7: overflows of both signs
    k[1, 7, :] = [1.5, 1.5, 0.5, -0.25, -2.0]
    y = torch.matmul(T(q), T(k)).numpy()
    assert np.isnan(y[0, 1, 0]) and np.isinf(y[0, 1, 1]) and np.isnan(y[1, 0, 0])
    yield mm("norm_matmul_act_overflow", q, k)
    qb, kb = randf(82, 3, 16, 32), randf(83, 3, 32, 16)      # the same past 400: BLAS, +-Inf
    qb[1, 4, :2], kb[1, :2, 7] = 1e20, [1e20, -1e20]
    yield mm("norm_matmul_act_overflow_bmm", qb, kb)
    q2, k2 = q[0].copy(), k[0].copy()                        # 2-D (mm): BLAS, +-Inf
    yield mm("norm_matmul_act_overflow_2d", q2, k2)


class ConvBN(torch.nn.Module):
    """Conv2d, BatchNorm2d, ReLU, Conv2d, BatchNorm2d, global mean, Linear."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.BatchNorm2d(6)
        self.c2, self.b2 = torch.nn.Conv2d(6, 4, 3, padding=1), torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        h = torch.relu(self.b1(self.c1(x)))
        return self.fc(self.b2(self.c2(h)).mean((2, 3)))


class BN(torch.nn.Module):
    def __init__(self, c, dims=2, momentum=0.1, eps=1e-5):
        super().__init__()
        cls = {1: torch.nn.BatchNorm1d, 2: torch.nn.BatchNorm2d}[dims]
        self.bn = cls(c, momentum=momentum, eps=eps)

    def forward(self, x):
        return self.bn(x)


def exported_training(name, module, x, opset, rtol=0.0, atol=0.0):
    """torch.onnx.export(..., training=TrainingMode.TRAINING) of module(x);
    reference: the module in training mode (its BatchNorms normalise with
    the batch's statistics), run on a copy, since the export's trace updates
    the running statistics it then stores."""
    ref = copy.deepcopy(module).train()
    with torch.no_grad():
        y = ref(T(x)).numpy()
    module.train()
    f = io.BytesIO()
    torch.onnx.export(module, (T(x),), f, opset_version=opset, input_names=["x"], output_names=["y"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    m = onnx.load_from_string(f.getvalue())
    bn = [n for n in m.graph.node if n.op_type == "BatchNormalization"]
    assert bn and all(len(n.output) == (3 if opset >= 14 else 5) for n in bn), name
    inits = {i.name: numpy_helper.to_array(i).copy() for i in m.graph.initializer}
    return Case(name, None, {"x": x, **inits}, {"y": y}, opset=opset, consts=set(inits), nodes=list(m.graph.node),
                rtol=rtol, atol=atol)


def _bn_extreme(seed, n, c, *rest):
    """[n, c, *rest] in [-2, 2] with, per channel, a value a fault makes:
    1e19 (its square is finite), a pair +-1.5e19 (each square finite, their
    sum past FLT_MAX: an Inf variance), 3e38, +Inf, -Inf, NaN; and one
    channel of ordinary values."""
    x = randf(seed, n, c, *rest, lo=-2, hi=2)
    flat = x.reshape(n, c, -1)
    vals = [1e19, 1.5e19, 3e38, np.inf, -np.inf, np.nan]
    for ch, v in enumerate(vals[:c - 1]):
        flat[1 % n, ch, 0] = v
        if v == 1.5e19:
            flat[(n - 1), ch, -1] = -v
    return x


def batchnorm_training_cases():
    """BatchNorm exported in training mode: PyTorch normalises with the
    batch's own statistics (its batch_norm kernel: double sums, float
    deviations, the transform as fused multiply-adds). One thread: for
    [N, C] inputs ATen splits the samples among its threads."""
    torch.set_num_threads(1)
    for opset in (13, 14):
        torch.manual_seed(60)
        net = _perturb(ConvBN(), 61)
        yield exported_training(f"norm_bn_train_convnet_op{opset}", net, randf(62, 4, 3, 6, 5), opset)
        yield exported_training(f"norm_bn_train_2d_extreme_op{opset}", _perturb(BN(7), 63),
                                _bn_extreme(64, 3, 7, 4, 5), opset)
        yield exported_training(f"norm_bn_train_1d_extreme_op{opset}", _perturb(BN(7, dims=1), 65),
                                _bn_extreme(66, 4, 7, 6), opset)
    # [N, C] (BatchNorm1d after a Linear), a momentum and an eps of the user's
    yield exported_training("norm_bn_train_nc_op14", _perturb(BN(5, dims=1, momentum=0.3, eps=1e-3), 67),
                            randf(68, 6, 5, lo=-3, hi=3), 14)
    # [N, C]: PyTorch's channels-last statistics (float sums in sample order,
    # fma squares); two values of 2e38 overflow the float sum of channel 6
    xn = _bn_extreme(83, 6, 7)
    xn[0, 6], xn[2, 6] = 2e38, 2e38
    yield exported_training("norm_bn_train_nc_extreme_op14", _perturb(BN(7, dims=1), 84), xn, 14)
    # a conv weight flipped to a huge value, before a training-mode BatchNorm
    for k, w in enumerate((-2.7e37, 1e20, 3e38)):
        torch.manual_seed(69)
        net = _perturb(ConvBN(), 70)
        with torch.no_grad():
            net.c1.weight[2, 1, 1, 1] = w
        yield exported_training(f"norm_bn_train_convnet_w{k}_op14", net, randf(71, 3, 3, 6, 5), 14)
    # eval mode (TrainingMode.PRESERVE, not folded): running statistics,
    # the same fused transform, bit for bit
    bne = _perturb(BN(7), 79)
    with torch.no_grad():
        bne.bn.running_mean.copy_(T(randf(80, 7)))
        bne.bn.running_var.copy_(T(randf(81, 7, lo=0.5, hi=2.0)))
    bne.eval()
    f = io.BytesIO()
    xe = _bn_extreme(82, 3, 7, 4, 5)
    torch.onnx.export(bne, (T(xe),), f, opset_version=13, input_names=["x"], output_names=["y"],
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
    me = onnx.load_from_string(f.getvalue())
    assert [n.op_type for n in me.graph.node][-1] == "BatchNormalization"
    inits = {i.name: numpy_helper.to_array(i).copy() for i in me.graph.initializer}
    with torch.no_grad():
        ye = bne(T(xe)).numpy()
    yield Case("norm_bn_eval_exact_op13", None, {"x": xe, **inits}, {"y": ye}, opset=13, consts=set(inits),
               nodes=list(me.graph.node), rtol=0.0, atol=0.0)
    # the node alone with every output: running statistics as PyTorch
    # updates its buffers (momentum 1 - ONNX's, the unbiased variance), and
    # at opset 13 the batch's mean and (biased) variance
    x = randf(72, 4, 3, 5, lo=-2, hi=2)
    x[1, 2, 3] = 1e19
    w, b = randf(73, 3, lo=0.5, hi=1.5), randf(74, 3)
    rm, rv = randf(75, 3), randf(76, 3, lo=0.5, hi=2.0)
    tm, tv = T(rm.copy()), T(rv.copy())
    y = F.batch_norm(T(x), tm, tv, T(w), T(b), training=True, momentum=0.1, eps=1e-5).numpy()
    ins = {"x": x, "scale": w, "B": b, "mean": rm, "var": rv}
    yield Case("norm_bn_train_outputs_op14", "BatchNormalization", ins,
               {"y": y, "running_mean": tm.numpy(), "running_var": tv.numpy()},
               attrs={"epsilon": 1e-5, "momentum": 0.9, "training_mode": 1}, opset=14,
               consts={"scale", "B", "mean", "var"}, rtol=1e-5, atol=1e-6)
    xt = T(x)
    yield Case("norm_bn_train_outputs_op13", "BatchNormalization", ins,
               {"y": y, "running_mean": tm.numpy(), "running_var": tv.numpy(),
                "saved_mean": xt.mean((0, 2)).numpy(), "saved_var": xt.var((0, 2), unbiased=False).numpy()},
               attrs={"epsilon": 1e-5, "momentum": 0.9}, opset=13,
               consts={"scale", "B", "mean", "var"}, rtol=1e-5, atol=1e-6)
    # InstanceNorm2d: two values of +-1.5e19 in a plane, squares summing past
    # FLT_MAX: PyTorch's variance sum, rounded to float, is Inf, the plane B
    inorm = _perturb(torch.nn.InstanceNorm2d(3, affine=True), 77)
    xi = randf(78, 2, 3, 4, 4, lo=-2, hi=2)
    xi[0, 1, 0, 0], xi[0, 1, 3, 3], xi[1, 2, 2, 1] = 1.5e19, -1.5e19, 1.9e19
    yield exported("norm_instancenorm2d_varsum_op13", inorm, xi, 13, rtol=1e-4, atol=1e-5)


def _copy_nodes(case):
    return [onnx.NodeProto.FromString(n.SerializeToString()) for n in case.nodes]


def groupnorm_near_miss_cases():
    """GroupNorm exports one detail away from the exporter's, which must stay
    unfused and compute what their nodes say (reference: the nodes' formula
    in torch, on ordinary values where instance_norm and group_norm agree)."""
    gn = _perturb(GN(2, 6), 40)
    x = randf(41, 3, 6, 5)
    base = exported("tmp", gn, x, 13)
    w = gn.gn.weight.detach().view(6, 1)
    b = gn.gn.bias.detach().view(6, 1)
    xt = T(x)

    def nodes_formula(in_scale):
        r = F.instance_norm(xt.reshape(3, 2, -1), weight=T(np.asarray(in_scale, np.float32)), eps=1e-5)
        return r.reshape(xt.shape) * w + b, r

    # the InstanceNormalization's scale is 2, not the exporter's 1
    c = Case("norm_groupnorm_nearmiss_scale2", None, base.inputs, {}, opset=13, consts=base.consts,
             nodes=_copy_nodes(base), rtol=1e-4, atol=1e-5)
    inode = next(n for n in c.nodes if n.op_type == "InstanceNormalization")
    for n in c.nodes:
        if n.op_type == "Constant" and n.output[0] == inode.input[1]:
            del n.attribute[:]
            n.attribute.extend([helper.make_attribute("value", numpy_helper.from_array(np.full(2, 2.0, np.float32)))])
    c.outputs = {"y": nodes_formula([2.0, 2.0])[0].numpy()}
    yield c
    # the InstanceNormalization's output is a graph output too: read twice
    c = Case("norm_groupnorm_nearmiss_read_twice", None, base.inputs, {}, opset=13, consts=base.consts,
             nodes=_copy_nodes(base), rtol=1e-4, atol=1e-5)
    inode = next(n for n in c.nodes if n.op_type == "InstanceNormalization")
    y, r = nodes_formula([1.0, 1.0])
    c.outputs = {"y": y.numpy(), inode.output[0]: r.numpy()}
    yield c


def cases():
    yield from groupnorm_cases()
    yield from shared_groupnorm_cases()
    yield from groupnorm_near_miss_cases()
    yield from conv_groupnorm_cases()
    yield from written_out_cases()
    yield from matmul_activation_cases()
    yield from batchnorm_training_cases()
