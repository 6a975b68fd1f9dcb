"""The activation family and the float unary maps: each against the
torch.nn.functional / torch function a user's model calls (what PyTorch
exports as that ONNX op), NaN and +-Inf included where torch defines the
result. PRelu with the slope shapes torch exports; LogSoftmax on any axis
and in its opset-11 flattening form. References: PyTorch."""
import math

import numpy as np
import torch
import torch.nn.functional as F

from opcase import Case, randf

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 2.5, 3.0, -3.0, 20.0, -20.0,
                    25.0, -100.0], np.float32)


def with_specials(seed, *shape, lo=-4.0, hi=4.0):
    """Random values in [lo, hi) with SPECIAL in the first elements."""
    x = randf(seed, *shape, lo=lo, hi=hi)
    flat = x.reshape(-1)
    flat[:len(SPECIAL)] = SPECIAL
    return x


def t(a):
    return torch.from_numpy(a)


def unary(name, op, x, fn, attrs=None, opset=13, rtol=1e-5, atol=1e-6, check=True, consts=()):
    return Case(name, op, {"x": x}, {"y": fn(t(x)).numpy()}, attrs=attrs, opset=opset, rtol=rtol, atol=atol,
                check=check, consts=consts)


def cases():
    x = with_specials(101, 2, 3, 8)
    yield unary("act_hardsigmoid_default", "HardSigmoid", x, lambda v: torch.clamp(0.2 * v + 0.5, 0, 1))
    # what torch exports for F.hardsigmoid
    yield unary("act_hardsigmoid_torch", "HardSigmoid", x, F.hardsigmoid, attrs={"alpha": 1.0 / 6, "beta": 0.5})
    yield unary("act_hardswish", "HardSwish", x, F.hardswish, opset=14)
    yield unary("act_elu_default", "Elu", x, F.elu)
    yield unary("act_elu_alpha", "Elu", x, lambda v: F.elu(v, alpha=0.5), attrs={"alpha": 0.5})
    yield unary("act_selu", "Selu", x, F.selu)
    yield unary("act_celu_alpha", "Celu", x, lambda v: F.celu(v, alpha=0.5), attrs={"alpha": 0.5})
    yield unary("act_celu_default", "Celu", x, F.celu)
    xs = with_specials(102, 4, 8, lo=-120.0, hi=120.0)
    yield unary("act_softplus_wide", "Softplus", xs, F.softplus)
    yield unary("act_softplus", "Softplus", x, F.softplus)
    yield unary("act_softsign", "Softsign", x, F.softsign)
    yield unary("act_mish", "Mish", x, F.mish, opset=18, atol=5e-6, check=False)   # opset 18
    yield unary("act_thresholded_relu", "ThresholdedRelu", x, lambda v: F.threshold(v, 0.5, 0.0),
                attrs={"alpha": 0.5})
    yield unary("act_thresholded_relu_default", "ThresholdedRelu", x, lambda v: F.threshold(v, 1.0, 0.0))
    # Gelu is an opset-20 op, newer than the installed onnx's checker knows and
    # past the loader's opset 18: the cases declare opset 18 (the kernel reads
    # the opset-20 attributes)
    yield unary("act_gelu", "Gelu", x, F.gelu, opset=18, atol=2e-6, check=False)
    yield unary("act_gelu_tanh", "Gelu", x, lambda v: F.gelu(v, approximate="tanh"),
                attrs={"approximate": "tanh"}, opset=18, atol=2e-6, check=False)
    yield unary("act_gelu_const", "Gelu", randf(103, 3, 5, lo=-6, hi=6), F.gelu, opset=18, atol=2e-6,
                check=False, consts={"x"})

    # float math
    yield unary("math_reciprocal", "Reciprocal", x, torch.reciprocal)
    halves = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 2.5000002, -0.0, np.nan, np.inf, -np.inf],
                      np.float32)
    r = np.concatenate([halves, randf(104, 12, lo=-50, hi=50)]).reshape(4, 6)
    yield unary("math_round_half_even", "Round", r, torch.round)
    yield unary("math_floor", "Floor", r, torch.floor)
    yield unary("math_ceil", "Ceil", r, torch.ceil)
    yield unary("math_sign", "Sign", x, torch.sign)
    yield unary("math_sign_const", "Sign", r, torch.sign, consts={"x"})
    trig = with_specials(105, 3, 8, lo=-10, hi=10)
    trig.reshape(-1)[12:16] = [1.0, 2.0, 3.0, 4.0]   # no 20s: tanf and coshf of large values are ill-conditioned
    yield unary("math_sin", "Sin", trig, torch.sin)
    yield unary("math_cos", "Cos", trig, torch.cos)
    yield unary("math_tan", "Tan", randf(106, 3, 8, lo=-1.4, hi=1.4), torch.tan)
    unit = with_specials(107, 3, 8, lo=-1.2, hi=1.2)
    yield unary("math_asin", "Asin", unit, torch.asin)
    yield unary("math_acos", "Acos", unit, torch.acos)
    yield unary("math_atan", "Atan", x, torch.atan)
    yield unary("math_sinh", "Sinh", x, torch.sinh)
    yield unary("math_cosh", "Cosh", x, torch.cosh)
    yield unary("math_asinh", "Asinh", x, torch.asinh)
    yield unary("math_acosh", "Acosh", with_specials(108, 3, 8, lo=0.5, hi=8), torch.acosh)
    yield unary("math_atanh", "Atanh", unit, torch.atanh)

    # PRelu: the slope shapes torch exports, and the spec's trailing-dims form
    xp = with_specials(110, 2, 3, 4, 5)
    for name, slope in [("channel", randf(111, 3, 1, 1)), ("single", randf(112, 1)),
                        ("trailing", randf(113, 5)), ("full", randf(114, 2, 3, 4, 5))]:
        w = slope if name != "channel" else slope.reshape(3)
        ref = F.prelu(t(xp), t(w)) if name in ("channel", "single") else torch.where(t(xp) < 0, t(xp) * t(slope), t(xp))
        yield Case("act_prelu_" + name, "PRelu", {"x": xp, "slope": slope}, {"y": ref.numpy()},
                   consts={"slope"}, ref="torch")
    yield Case("act_prelu_runtime_slope", "PRelu", {"x": xp[:1], "slope": randf(115, 1, 3, 4, 5)},
               {"y": torch.where(t(xp[:1]) < 0, t(xp[:1]) * t(randf(115, 1, 3, 4, 5)), t(xp[:1])).numpy()})

    # LogSoftmax
    ls = randf(120, 3, 4, 6, lo=-5, hi=5)
    yield unary("act_logsoftmax_default", "LogSoftmax", ls, lambda v: F.log_softmax(v, dim=-1))
    yield unary("act_logsoftmax_axis1", "LogSoftmax", ls, lambda v: F.log_softmax(v, dim=1), attrs={"axis": 1})
    yield unary("act_logsoftmax_axis_neg3", "LogSoftmax", ls, lambda v: F.log_softmax(v, dim=0),
                attrs={"axis": -3})
    big = randf(121, 2, 5, lo=-1, hi=1) * np.float32(1e4)
    yield unary("act_logsoftmax_large", "LogSoftmax", big, lambda v: F.log_softmax(v, dim=-1))
    sp = randf(122, 4, 5, lo=-3, hi=3)
    sp[0, 1] = np.nan
    sp[1, 2] = np.inf
    sp[2, 3] = -np.inf
    sp[3, :] = -np.inf
    yield unary("act_logsoftmax_special", "LogSoftmax", sp, lambda v: F.log_softmax(v, dim=-1))
    # opset < 13: flattened to 2-D at axis (default 1)
    yield unary("act_logsoftmax_opset11", "LogSoftmax", ls,
                lambda v: F.log_softmax(v.reshape(3, 24), dim=1).reshape(3, 4, 6), opset=11)
    yield unary("act_logsoftmax_opset11_axis2", "LogSoftmax", ls,
                lambda v: F.log_softmax(v.reshape(12, 6), dim=1).reshape(3, 4, 6), attrs={"axis": 2}, opset=11)

    # integer Abs and Sign (shape arithmetic), also folded
    iv = np.array([[-7, 0, 5, -1, 2**40, -(2**40)], [3, -3, 1, 0, -2, 9]], np.int64)
    yield unary("math_abs_i64", "Abs", iv, torch.abs)
    yield unary("math_sign_i64", "Sign", iv, torch.sign)
    yield unary("math_abs_i32_folded", "Abs", iv[1].astype(np.int32), torch.abs, consts={"x"})
    yield unary("math_sign_i32", "Sign", iv[1].astype(np.int32), torch.sign)
