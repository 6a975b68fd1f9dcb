"""The nn family and the normalisations, pools and attention patterns of
exported transformers and CNNs, against PyTorch: LayerNormalization (any axis,
with and without B, and rows with huge, Inf and NaN values, where PyTorch's
Welford moments decide NaN), InstanceNormalization, GroupNormalization
(opset 18), LpNormalization, GlobalMaxPool, the pools as torch.onnx.export
writes them, ConvTranspose (as exported, plus output_shape and auto_pad
against torch's uncropped output), Einsum (torch.einsum), and Softmax, GELU
and masked attention with huge, Inf and NaN inputs (docs/NUMERICS.md).

Cases built from an export run the whole exported graph: its parameters stay
initializers, its input is fed."""
import io

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper

from opcase import Case, randf, rng

T = torch.from_numpy


def exported(name, module, x, opset=13, rtol=1e-5, atol=1e-6):
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


# onnx 1.12's checker knows opset 17 at most; GroupNormalization is opset 18.
# Its cases skip the checker (the node is still checked by bitflip's loader).
_check = onnx.checker.check_model


def _check_unless_opset18(model, *a, **k):
    if any(o.version >= 18 for o in model.opset_import):
        return None
    return _check(model, *a, **k)


onnx.checker.check_model = _check_unless_opset18


def huge_rows(seed, n):
    """Rows of length n around the thresholds of PyTorch's LayerNorm moments:
    a lane mean past ~1.8e19 (delta^2 overflows in a merge: NaN), squared
    deviations past 3.4e38 (variance Inf: the row is B), Inf, NaN, -Inf."""
    x = randf(seed, 12, n, lo=-2, hi=2)
    vals = [1e18, 3e19, 1e20, -1e20, 1e30, 3e38, np.inf, -np.inf, np.nan, 1e19, 5e19]
    for r, v in enumerate(vals):
        x[r + 1, (r * 5) % n] = v
    x[0, :] *= 1e17     # every element large, none alone
    return x


def layernorm_cases():
    x, s, b = randf(1, 2, 5, 16), randf(2, 16, lo=0.5, hi=1.5), randf(3, 16)
    yield Case("nn_layernorm_last_bias", "LayerNormalization", {"x": x, "s": s, "b": b},
               {"y": F.layer_norm(T(x), (16,), T(s), T(b)).numpy()}, attrs={"axis": -1}, opset=17, consts={"s", "b"})
    x, s = randf(4, 3, 4, 6), randf(5, 4, 6, lo=0.5, hi=1.5)
    yield Case("nn_layernorm_axis1_nobias", "LayerNormalization", {"x": x, "s": s},
               {"y": F.layer_norm(T(x), (4, 6), T(s), eps=1e-3).numpy()}, attrs={"axis": 1, "epsilon": 1e-3}, opset=17,
               consts={"s"})
    x, s, b = randf(6, 3, 4, 6), randf(7, 4, 6), randf(8, 4, 6)
    yield Case("nn_layernorm_axis_neg2", "LayerNormalization", {"x": x, "s": s, "b": b},
               {"y": F.layer_norm(T(x), (4, 6), T(s), T(b)).numpy()}, attrs={"axis": -2}, opset=17, consts={"s", "b"})
    # huge rows at widths that exercise the scalar tail (7), one vector (8),
    # vectors and tail (37), and several chunks merged in cascade (300)
    for n in (7, 8, 32, 37, 300):
        x, s, b = huge_rows(10 + n, n), randf(11, n, lo=0.5, hi=1.5), randf(12, n)
        yield Case(f"nn_layernorm_huge_{n}", "LayerNormalization", {"x": x, "s": s, "b": b},
                   {"y": F.layer_norm(T(x), (n,), T(s), T(b)).numpy()}, opset=17, consts={"s", "b"},
                   rtol=1e-4, atol=1e-5)
    # a scale flipped to 1.8e38: (x * rstd - rstd * mean) * scale overflows where |normalised| > 1.9
    x, s, b = randf(13, 16, 32, lo=-3, hi=3), randf(14, 32, lo=0.5, hi=1.5), randf(15, 32)
    s[5] = 1.8e38
    yield Case("nn_layernorm_scale_1e38", "LayerNormalization", {"x": x, "s": s, "b": b},
               {"y": F.layer_norm(T(x), (32,), T(s), T(b)).numpy()}, opset=17, consts={"s", "b"})
    # as exported: opset 17 writes LayerNormalization, opset 13 the decomposed
    # ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div (finite and Inf/NaN rows only:
    # rows past 1.8e19 differ, docs/NUMERICS.md)
    ln = torch.nn.LayerNorm(24)
    with torch.no_grad():
        ln.weight.copy_(T(randf(16, 24, lo=0.5, hi=1.5)))
        ln.bias.copy_(T(randf(17, 24)))
    x = randf(18, 3, 5, 24)
    x[0, 1, 3], x[1, 2, 7], x[2, 0, 0] = np.inf, np.nan, -np.inf
    yield exported("nn_layernorm_export17", ln, x, opset=17)
    yield exported("nn_layernorm_export13", ln, x, opset=13)


def norm_cases():
    x, s, b = randf(20, 2, 3, 5, 4), randf(21, 3, lo=0.5, hi=1.5), randf(22, 3)
    yield Case("nn_instancenorm_2d", "InstanceNormalization", {"x": x, "s": s, "b": b},
               {"y": F.instance_norm(T(x), weight=T(s), bias=T(b)).numpy()}, consts={"s", "b"}, rtol=1e-4,
               atol=1e-5)
    x = randf(23, 3, 4, 16)
    x[0, 0, 3], x[0, 1, 2], x[1, 0, 0], x[1, 1, 5], x[2, 2, 9] = 3e19, 1e38, np.inf, np.nan, 1e18
    s, b = randf(24, 4, lo=0.5, hi=1.5), randf(25, 4)
    yield Case("nn_instancenorm_1d_huge", "InstanceNormalization", {"x": x, "s": s, "b": b},
               {"y": F.instance_norm(T(x), weight=T(s), bias=T(b), eps=1e-3).numpy()}, attrs={"epsilon": 1e-3},
               consts={"s", "b"}, rtol=1e-4, atol=1e-5)
    # GroupNormalization-18: scale and bias per group
    x, s, b = randf(26, 2, 6, 3, 5), randf(27, 3, lo=0.5, hi=1.5), randf(28, 3)
    x[1, 2, 0, 0] = 1e20
    y = F.group_norm(T(x), 3, eps=1e-5)
    y = y * T(np.repeat(s, 2)).view(1, 6, 1, 1) + T(np.repeat(b, 2)).view(1, 6, 1, 1)
    yield Case("nn_groupnorm_18", "GroupNormalization", {"x": x, "s": s, "b": b}, {"y": y.numpy()},
               attrs={"num_groups": 3}, opset=18, consts={"s", "b"}, rtol=1e-4, atol=1e-5)
    # as exported: InstanceNorm2d is one node; GroupNorm (opset <= 17) is
    # Reshape + InstanceNormalization + Reshape + Mul + Add
    inorm, gnorm = torch.nn.InstanceNorm2d(4, affine=True), torch.nn.GroupNorm(2, 6)
    with torch.no_grad():
        for mod, seed in ((inorm, 90), (gnorm, 92)):
            mod.weight.copy_(T(randf(seed, mod.weight.numel(), lo=0.5, hi=1.5)))
            mod.bias.copy_(T(randf(seed + 1, mod.bias.numel())))
    yield exported("nn_instancenorm_export13", inorm, randf(94, 2, 4, 5, 3), opset=13, rtol=1e-4, atol=1e-5)
    yield exported("nn_groupnorm_export17", gnorm, randf(95, 2, 6, 4, 3), opset=17, rtol=1e-4, atol=1e-5)
    x = randf(29, 3, 4, 5)
    x[0, :, 1] = 0
    for axis, p in ((-1, 2), (1, 1), (0, 2)):
        xt = T(x)
        yield Case(f"nn_lpnorm_p{p}_axis{axis}".replace("-", "m"), "LpNormalization", {"x": x},
                   {"y": (xt / torch.linalg.vector_norm(xt, ord=p, dim=axis, keepdim=True)).numpy()},
                   attrs={"axis": axis, "p": p}, rtol=1e-5, atol=1e-6)


def pool_cases():
    x = randf(30, 2, 3, 5, 7)
    x[0, 1, 2, 3], x[1, 2, 0, 0] = np.nan, np.inf
    yield Case("nn_globalmaxpool_2d", "GlobalMaxPool", {"x": x},
               {"y": torch.amax(T(x), dim=(2, 3), keepdim=True).numpy()})
    x1 = randf(31, 2, 3, 11)
    yield Case("nn_globalmaxpool_1d", "GlobalMaxPool", {"x": x1}, {"y": torch.amax(T(x1), dim=2, keepdim=True).numpy()})
    # the pools as the exporter writes them, opsets 13 and 17
    x1, x2 = randf(32, 2, 3, 13), randf(33, 2, 3, 9, 10)
    mods = [
        ("maxpool1d_ceil", torch.nn.MaxPool1d(3, 2, padding=1, ceil_mode=True), x1),
        ("maxpool1d_dil", torch.nn.MaxPool1d(3, 1, padding=1, dilation=2), x1),
        ("maxpool2d_dil_ceil", torch.nn.MaxPool2d((3, 2), (2, 2), padding=(1, 0), dilation=(2, 1), ceil_mode=True), x2),
        ("avgpool1d_pad_nocip", torch.nn.AvgPool1d(3, 2, padding=1, count_include_pad=False), x1),
        ("avgpool2d_ceil_nocip", torch.nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False), x2),
    ]
    for name, mod, x in mods:
        for opset in (13, 17):
            yield exported(f"nn_{name}_op{opset}", mod, x, opset=opset)
    # count_include_pad = 1: the exporter writes Pad + AveragePool; the
    # AveragePool node alone, against torch's pool with the same padding
    for name, x, k, s_, p, ceil in [("1d_pad", x1, [3], [2], [1], 0), ("1d_ceil", x1, [4], [3], [1], 1),
                                    ("2d_ceil", x2, [3, 2], [2, 3], [1, 1], 1)]:
        pool = F.avg_pool1d if x.ndim == 3 else F.avg_pool2d
        y = pool(T(x), k, s_, p, ceil_mode=bool(ceil), count_include_pad=True).numpy()
        yield Case(f"nn_avgpool{name}_cip", "AveragePool", {"x": x}, {"y": y},
                   attrs={"kernel_shape": k, "strides": s_, "pads": p + p, "ceil_mode": ceil, "count_include_pad": 1})


def convtranspose_cases():
    torch.manual_seed(40)
    x1, x2 = randf(41, 2, 4, 7), randf(42, 2, 4, 5, 6)
    mods = [
        ("1d", torch.nn.ConvTranspose1d(4, 6, 3), x1),
        ("1d_s2_p1_op1", torch.nn.ConvTranspose1d(4, 3, 4, stride=2, padding=1, output_padding=1), x1),
        ("1d_dil_groups_nobias", torch.nn.ConvTranspose1d(4, 6, 3, stride=3, dilation=2, groups=2, bias=False), x1),
        ("2d", torch.nn.ConvTranspose2d(4, 5, (3, 2)), x2),
        ("2d_s2_p1_op1", torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1), x2),
        ("2d_groups_dil", torch.nn.ConvTranspose2d(4, 8, (2, 3), stride=(1, 2), padding=(1, 2), dilation=(2, 1),
                                                   groups=4, output_padding=(0, 1)), x2),
        ("2d_depthwise_nobias", torch.nn.ConvTranspose2d(4, 4, 3, stride=2, groups=4, bias=False), x2),
    ]
    for name, mod, x in mods:
        yield exported(f"nn_convtranspose_{name}", mod, x, opset=13, rtol=1e-4, atol=1e-5)
    yield exported("nn_convtranspose_3d", torch.nn.ConvTranspose3d(2, 3, 2, stride=2, padding=1),
                   randf(43, 1, 2, 3, 4, 3), opset=17, rtol=1e-4, atol=1e-5)
    # output_shape and auto_pad, which the exporter never writes: the
    # reference is torch's output without padding, cropped where ONNX's
    # computed pads say (the odd one at the end for SAME_UPPER, else at the start)
    w, b = randf(44, 4, 3, 3, 3), randf(45, 3)
    full = F.conv_transpose2d(T(x2), T(w), T(b), stride=2).numpy()     # [2, 3, 11, 13]
    for name, attrs, crop in [
        ("output_shape", {"strides": [2, 2], "output_shape": [10, 12]}, ((1, 11), (1, 13))),
        ("output_shape_nc", {"strides": [2, 2], "output_shape": [2, 3, 9, 13]}, ((1, 10), (0, 13))),
        ("same_upper", {"strides": [2, 2], "auto_pad": "SAME_UPPER"}, ((0, 10), (0, 12))),
        ("same_lower", {"strides": [2, 2], "auto_pad": "SAME_LOWER"}, ((1, 11), (1, 13))),
    ]:
        (h0, h1), (w0, w1) = crop
        yield Case(f"nn_convtranspose_{name}", "ConvTranspose", {"x": x2, "w": w, "b": b},
                   {"y": np.ascontiguousarray(full[:, :, h0:h1, w0:w1])}, attrs=attrs, consts={"w", "b"},
                   rtol=1e-4, atol=1e-5, ref="torch")


def einsum_cases():
    ops = [
        ("bmm", "bij,bjk->bik", [(3, 4, 5), (3, 5, 2)]),
        ("attn", "bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]),
        ("transpose", "ij->ji", [(4, 6)]),
        ("outer", "i,j->ij", [(5,), (3,)]),
        ("bilinear", "bn,anm,bm->ba", [(3, 4), (2, 4, 5), (3, 5)]),
        ("trace", "bii->b", [(2, 5, 5)]),
        ("diag", "ii->i", [(4, 4)]),
        ("implicit", "ij,jk", [(3, 4), (4, 2)]),
        ("ellipsis", "...ij,...jk->...ik", [(2, 3, 4, 5), (3, 5, 2)]),
        ("ellipsis_bcast", "...ij,...jk", [(2, 1, 4, 5), (3, 5, 2)]),
        ("sum_axis", "ijk->ik", [(3, 4, 5)]),
        # two operands that are not a plain batched product (the loop path)
        ("sum_one_side", "ij,jk->k", [(3, 4), (4, 5)]),
        ("diag_two", "ii,ij->j", [(4, 4), (4, 3)]),
        # batched products with the roles in unusual places (the packed path)
        ("roles_permuted", "kbm,nkb->nbm", [(6, 2, 3), (4, 6, 2)]),
        ("multi_k", "abcd,cdbe->aeb", [(2, 3, 4, 5), (4, 5, 3, 2)]),
    ]
    for i, (name, eq, shapes) in enumerate(ops):
        xs = [randf(50 + 7 * i + j, *s) for j, s in enumerate(shapes)]
        y = torch.einsum(eq, *[T(a) for a in xs]).numpy()
        yield Case(f"nn_einsum_{name}", "Einsum", {f"x{j}": a for j, a in enumerate(xs)}, {"y": y},
                   attrs={"equation": eq}, opset=13, rtol=1e-5, atol=1e-5)


def einsum_exact_cases():
    """Einsum of two fed inputs bit for bit (rtol = atol = 0) against
    torch.einsum, which lowers a pair to one bmm (batch: the output
    subscripts of both; rows, columns: those of one; contraction: the rest,
    ellipsis dims, then A..Z, then a..z): under 400 multiply-adds per matrix
    ATen's plain loop of rounded products, else BLAS, with OpenBLAS 0.3.21
    the in-order fma chain; nothing contracted, a product (docs/NUMERICS.md,
    "Softmax and attention"). Generate with OpenBLAS as libblas.so.3, as the
    MatMul cases (norms.py)."""
    exact = dict(rtol=0.0, atol=0.0)

    def ein(name, eq, *xs):
        y = torch.einsum(eq, *[T(a) for a in xs]).numpy()
        return Case(f"nn_einsum_exact_{name}", "Einsum", {f"x{j}": a for j, a in enumerate(xs)}, {"y": y},
                    attrs={"equation": eq}, opset=13, **exact)

    att = "bhqd,bhkd->bhqk"
    yield ein("attn_385", att, randf(300, 2, 3, 5, 11), randf(301, 2, 3, 7, 11))     # 5 x 7 x 11: the loop
    yield ein("attn_400", att, randf(302, 2, 3, 5, 10), randf(303, 2, 3, 8, 10))     # 400: BLAS
    yield ein("bmm_399", "bij,bjk->bik", randf(304, 3, 7, 19), randf(305, 3, 19, 3))
    yield ein("bmm_400", "bij,bjk->bik", randf(306, 2, 5, 16), randf(307, 2, 16, 5))
    yield ein("mm_399", "ij,jk->ik", randf(308, 7, 19), randf(309, 19, 3))          # 2-D is a bmm too
    yield ein("mm_big", "ij,jk->ik", randf(310, 20, 24), randf(311, 24, 12))
    # two contracted subscripts, summed in PyTorch's order: the ellipsis dim,
    # then I before j (uppercase first), then a diagonal (no packed product)
    yield ein("order_ell", "...ij,...jk->ik", randf(312, 2, 3, 4), randf(313, 2, 4, 5))
    yield ein("order_case", "bIj,bjIk->bk", randf(314, 2, 3, 4, lo=-4, hi=4), randf(315, 2, 4, 3, 5, lo=-4, hi=4))
    yield ein("diag", "bii,bij->bj", randf(316, 2, 5, 5), randf(317, 2, 5, 3))
    # the implicit output: the subscripts seen once, capitals first ([A, c])
    yield ein("implicit_case", "Ab,bc", randf(328, 3, 4), randf(329, 4, 5))
    yield ein("order_big", "aBcd,cdBe->ae", randf(318, 20, 4, 5, 6), randf(319, 5, 6, 4, 12))    # 120 x 20 x 12: BLAS
    # three and four operands, contracted pair by pair from the left (no
    # opt_einsum): nn.Bilinear's equation, a chain of products, a subscript
    # all three share (a product first, then the sum), four operands
    yield ein("bilinear", "bn,anm,bm->ba", randf(330, 3, 4), randf(331, 2, 4, 5), randf(332, 3, 5))
    yield ein("bilinear_big", "bn,anm,bm->ba", randf(333, 6, 16), randf(334, 5, 16, 12), randf(335, 6, 12))
    yield ein("chain3", "bij,bjk,bkl->bil", randf(336, 2, 3, 4), randf(337, 2, 4, 5), randf(338, 2, 5, 6))
    yield ein("shared3", "bi,bi,bi->b", randf(339, 4, 30), randf(340, 4, 30), randf(341, 4, 30))
    yield ein("four", "ab,bc,cd,de->ae", randf(342, 3, 4), randf(343, 4, 5), randf(344, 5, 6), randf(345, 6, 2))
    # nothing contracted: a product, -0 kept
    a, b = randf(320, 4), randf(321, 3)
    a[1], b[2] = 0.0, -0.0
    yield ein("outer_zero", "i,j->ij", a, b)
    # products past FLT_MAX of both signs in one sum: NaN in PyTorch's loop
    # (Inf - Inf), +-Inf from BLAS's fma chain
    q, k = randf(322, 1, 2, 4, 8, lo=-2, hi=2), randf(323, 1, 2, 5, 8, lo=-2, hi=2)
    q[0, 0, 1, 2:4] = 1e20
    k[0, 0, 0, 2:4] = [1e20, -1e20]      # score [0, 0, 1, 0]: 1e40 - 1e40
    k[0, 0, 1, 2] = 1e20                 # score [0, 0, 1, 1]: one product past FLT_MAX
    q[0, 1, 0, 6:8] = [3e38, -3e38]
    k[0, 1, 3, 6:8] = [1.5, 1.5]         # 3e38 * 1.5 - 3e38 * 1.5
    y = torch.einsum(att, T(q), T(k)).numpy()
    assert np.isnan(y[0, 0, 1, 0]) and np.isinf(y[0, 0, 1, 1]) and np.isnan(y[0, 1, 0, 3])
    yield ein("overflow_attn", att, q, k)
    qb, kb = randf(324, 2, 16, 32), randf(325, 2, 32, 16)      # past 400: BLAS, +-Inf
    qb[1, 4, :2], kb[1, :2, 7] = 1e20, [1e20, -1e20]
    yb = torch.einsum("bij,bjk->bik", T(qb), T(kb)).numpy()
    assert np.isinf(yb[1, 4, 7])
    yield ein("overflow_bmm", "bij,bjk->bik", qb, kb)
    d = randf(326, 1, 4, 4)
    d[0, 1, 1], d[0, 2, 2] = 1e20, -1e20
    e = randf(327, 1, 4, 3)
    e[0, 1, :], e[0, 2, :] = 1e20, 1e20
    yield ein("overflow_diag", "bii,bij->bj", d, e)


def softmax_attention_cases():
    # rows: plain, one +Inf, two +Inf, one -Inf, all -Inf (a fully masked
    # query), NaN, huge finite of both signs, all equal huge
    x = randf(60, 9, 6, lo=-3, hi=3)
    x[1, 2] = np.inf
    x[2, [0, 4]] = np.inf
    x[3, 1] = -np.inf
    x[4, :] = -np.inf
    x[5, 3] = np.nan
    x[6, 0], x[6, 5] = 3e38, -3e38
    x[7, :] = 1e38
    x[8, 2] = 1e30
    for axis in (-1, 0):
        yield Case(f"nn_softmax_extreme_axis{axis}".replace("-", "m"), "Softmax", {"x": x},
                   {"y": torch.softmax(T(x), dim=axis).numpy()}, attrs={"axis": axis})

    class Attention(torch.nn.Module):
        """scores = q k^T / sqrt(d) + mask, softmax, times v: the pattern of
        nn.MultiheadAttention's slow path, with -inf masks."""

        def __init__(self, mask):
            super().__init__()
            self.register_buffer("mask", mask)

        def forward(self, x):
            q, k, v = x[..., :8], x[..., 8:16], x[..., 16:]
            s = torch.matmul(q, k.transpose(-2, -1)) / 8 ** 0.5 + self.mask
            return torch.matmul(torch.softmax(s, dim=-1), v)

    mask = torch.zeros(5, 5)
    mask[:, 3:] = float("-inf")      # padding keys
    mask[4, :] = float("-inf")       # a query with every key masked: NaN row
    x = randf(61, 2, 5, 24)
    x[1, 2, 3] = 1e20                 # a huge q element: +-Inf scores, NaN rows
    x[0, 1, 10] = 3e38                # a huge k element
    yield exported("nn_attention_masked", Attention(mask), x, opset=13)
    causal = torch.triu(torch.full((5, 5), float("-inf")), diagonal=1)
    yield exported("nn_attention_causal", Attention(causal), x, opset=17)

    # GELU as exported at opset 13: x * (1 + erf(x / sqrt 2)) * 0.5, and the
    # tanh form; PyTorch computes x * 0.5 * (1 + erf(...)) in one kernel, so
    # inputs past 1.7e38 overflow here and not there (docs/NUMERICS.md): the
    # extremes below stay out of that range
    g = randf(62, 4, 8, lo=-4, hi=4)
    g[0, :7] = [np.inf, -np.inf, np.nan, 1e30, -1e30, 1e38, -3e38]
    g[1, :4] = [1e13, -1e13, 1e20, -1e20]
    yield exported("nn_gelu_erf", torch.nn.GELU(), g, opset=13)
    yield exported("nn_gelu_tanh", torch.nn.GELU(approximate="tanh"), g, opset=13, rtol=1e-5, atol=1e-6)


def cases():
    yield from layernorm_cases()
    yield from norm_cases()
    yield from pool_cases()
    yield from convtranspose_cases()
    yield from einsum_cases()
    yield from einsum_exact_cases()
    yield from softmax_attention_cases()
