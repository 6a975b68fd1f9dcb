"""Resize (core/src/exec/ops/resize.c) against torch.nn.functional.interpolate
in the forms torch.onnx.export writes (nearest: asymmetric + floor; bilinear
and bicubic: half_pixel / pytorch_half_pixel, or align_corners; trilinear),
with scale_factor (input 'scales') and size (input 'sizes'), and against a
numpy rendition of the ONNX spec for what PyTorch never writes (other
coordinate and nearest modes, cubic's exclude_outside and coefficient).

Scales are float: as torch exports them they come from Constant nodes (float
initializers are parameters, never known when a plan is built)."""
import math

import numpy as np
import torch
from onnx import helper, numpy_helper

from opcase import Case, randf, rng

F = torch.nn.functional
T = torch.from_numpy


# ---- numpy rendition of the spec: separable, one dim at a time ----

def coord(mode, o, scale, n_in, n_out):
    if mode == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if n_out > 1 else 0.0
    if mode == "align_corners":
        return 0.0 if n_out == 1 else o * (n_in - 1) / (n_out - 1)
    if mode == "asymmetric":
        return o / scale
    if mode == "tf_half_pixel_for_nn":
        return (o + 0.5) / scale
    raise ValueError(mode)


def nearest(x, nmode):
    f = math.floor(x)
    if nmode == "round_prefer_floor":
        return f if x - f == 0.5 else round(x)
    if nmode == "round_prefer_ceil":
        return f + 1 if x - f == 0.5 else round(x)
    if nmode == "floor":
        return f
    return math.ceil(x)


def cubic_w(s, a):
    s = abs(s)
    if s <= 1:
        return (a + 2) * s ** 3 - (a + 3) * s ** 2 + 1
    if s < 2:
        return a * s ** 3 - 5 * a * s ** 2 + 8 * a * s - 4 * a
    return 0.0


def resize_1d(x, axis, n_out, scale, mode, cmode, nmode="round_prefer_floor", a=-0.75, exclude=0):
    n_in = x.shape[axis]
    if n_out == n_in and scale == 1.0:
        return x
    xs = np.moveaxis(x, axis, -1).astype(np.float64) if mode != "nearest" else np.moveaxis(x, axis, -1)
    out = np.zeros(xs.shape[:-1] + (n_out,), xs.dtype)
    for o in range(n_out):
        c = coord(cmode, o, scale, n_in, n_out)
        if mode == "nearest":
            i = min(max(nearest(c, nmode), 0), n_in - 1)
            out[..., o] = xs[..., i]
        elif mode == "linear":
            c = min(max(c, 0.0), n_in - 1.0)
            i0 = int(math.floor(c))
            i1 = min(i0 + 1, n_in - 1)
            l = c - i0
            out[..., o] = (1 - l) * xs[..., i0] + l * xs[..., i1]
        else:
            f = math.floor(c)
            t = c - f
            ws, idx = [], []
            for k in range(4):
                i = f - 1 + k
                w = cubic_w(t - (k - 1), a)
                if exclude and (i < 0 or i >= n_in):
                    w = 0.0
                ws.append(w)
                idx.append(min(max(i, 0), n_in - 1))
            if exclude:
                s = sum(ws)
                ws = [w / s for w in ws]
            out[..., o] = sum(w * xs[..., i] for w, i in zip(ws, idx))
    return np.moveaxis(out, -1, axis)


def resize_ref(x, out_shape, scales, mode, cmode, **kw):
    y = x
    for d in range(x.ndim):
        y = resize_1d(y, d, out_shape[d], scales[d], mode, cmode, **kw)
    return y.astype(x.dtype)


def resize_case(name, x, out, attrs, scales=None, sizes=None, opset=13, ref="torch", rtol=1e-5, atol=1e-5,
                roi_const=False, x_const=False):
    """A Resize node with scales as a Constant node and sizes as an int64
    initializer; roi empty ('' from opset 13, an empty Constant as opset 11
    exports it)."""
    nodes, inputs, consts = [], {"x": x}, set()
    node_in = ["x"]
    if roi_const or opset < 13:
        nodes.append(helper.make_node("Constant", [], ["roi"], name="roi",
                                      value=numpy_helper.from_array(np.zeros([0], np.float32), "roi")))
        node_in.append("roi")
    else:
        node_in.append("")
    if scales is not None:
        nodes.append(helper.make_node("Constant", [], ["scales"], name="scales",
                                      value=numpy_helper.from_array(np.array(scales, np.float32), "scales")))
        node_in.append("scales")
    else:
        if opset < 13:
            nodes.append(helper.make_node("Constant", [], ["noscales"], name="noscales",
                                          value=numpy_helper.from_array(np.zeros([0], np.float32), "noscales")))
            node_in.append("noscales")
        else:
            node_in.append("")
        inputs["sizes"] = np.array(sizes, np.int64)
        consts.add("sizes")
        node_in.append("sizes")
    if x_const and x.dtype == np.float32:
        # float initializers are parameters: a folded float input is a Constant node
        nodes.insert(0, helper.make_node("Constant", [], ["x"], name="x", value=numpy_helper.from_array(x, "x")))
        del inputs["x"]
    elif x_const:
        consts.add("x")
    nodes.append(helper.make_node("Resize", node_in, ["y"], name=name, **attrs))
    return Case(name, "Resize", inputs, {"y": out}, opset=opset, ref=ref, rtol=rtol, atol=atol, consts=consts,
                nodes=nodes)


NEAREST_TORCH = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}


def cases():
    yield from exported_cases()
    x = randf(200, 2, 3, 4, 5)
    # nearest, as torch exports it
    yield resize_case("resize_nearest_scale2", x, F.interpolate(T(x), scale_factor=2, mode="nearest").numpy(),
                      NEAREST_TORCH, scales=[1, 1, 2, 2])
    yield resize_case("resize_nearest_sizes", x, F.interpolate(T(x), size=(7, 9), mode="nearest").numpy(),
                      NEAREST_TORCH, sizes=[2, 3, 7, 9])
    yield resize_case("resize_nearest_down_opset11", x,
                      F.interpolate(T(x), size=(2, 3), mode="nearest").numpy(), NEAREST_TORCH,
                      sizes=[2, 3, 2, 3], opset=11)
    yield resize_case("resize_nearest_scale_half", x,
                      F.interpolate(T(x), scale_factor=0.5, mode="nearest").numpy(), NEAREST_TORCH,
                      scales=[1, 1, 0.5, 0.5])
    # NaN and Inf travel through nearest untouched
    xn = x.copy()
    xn[0, 1, 2, 3] = np.nan
    xn[1, 0, 0, 0] = np.inf
    yield resize_case("resize_nearest_nan_inf", xn, F.interpolate(T(xn), scale_factor=3, mode="nearest").numpy(),
                      NEAREST_TORCH, scales=[1, 1, 3, 3])
    # int64 and bool data (nearest moves bytes), folded
    xi = rng(201).integers(-9, 9, size=(1, 2, 3, 2)).astype(np.int64)
    yield resize_case("resize_nearest_int64_folded", xi,
                      F.interpolate(T(xi).float(), scale_factor=2, mode="nearest").long().numpy(), NEAREST_TORCH,
                      scales=[1, 1, 2, 2], x_const=True)

    yield resize_case("resize_bilinear_f32_folded", x,
                      F.interpolate(T(x), scale_factor=1.5, mode="bilinear", align_corners=False).numpy(),
                      {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
                      scales=[1, 1, 1.5, 1.5], x_const=True)
    # bilinear: align_corners False (half_pixel as torch 1.13 writes it, and pytorch_half_pixel) and True
    for cm in ("half_pixel", "pytorch_half_pixel"):
        lin = {"mode": "linear", "coordinate_transformation_mode": cm}
        yield resize_case(f"resize_bilinear_{cm}_scale2", x,
                          F.interpolate(T(x), scale_factor=2, mode="bilinear", align_corners=False).numpy(), lin,
                          scales=[1, 1, 2, 2])
        yield resize_case(f"resize_bilinear_{cm}_sizes", x,
                          F.interpolate(T(x), size=(7, 3), mode="bilinear", align_corners=False).numpy(), lin,
                          sizes=[2, 3, 7, 3])
    lin_ac = {"mode": "linear", "coordinate_transformation_mode": "align_corners"}
    yield resize_case("resize_bilinear_align_corners_sizes", x,
                      F.interpolate(T(x), size=(9, 11), mode="bilinear", align_corners=True).numpy(), lin_ac,
                      sizes=[2, 3, 9, 11])
    yield resize_case("resize_bilinear_align_corners_down_opset11", x,
                      F.interpolate(T(x), size=(3, 2), mode="bilinear", align_corners=True).numpy(), lin_ac,
                      sizes=[2, 3, 3, 2], opset=11)
    yield resize_case("resize_bilinear_nan", xn,
                      F.interpolate(T(xn), scale_factor=2, mode="bilinear", align_corners=False).numpy(),
                      {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
                      scales=[1, 1, 2, 2])
    # trilinear over a 5-D input
    v = randf(202, 1, 2, 3, 4, 5)
    yield resize_case("resize_trilinear", v,
                      F.interpolate(T(v), size=(5, 3, 8), mode="trilinear", align_corners=False).numpy(),
                      {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
                      sizes=[1, 2, 5, 3, 8])
    # bicubic (a = -0.75, edge taps clamped)
    cub = {"mode": "cubic", "coordinate_transformation_mode": "pytorch_half_pixel", "cubic_coeff_a": -0.75}
    yield resize_case("resize_bicubic_scale2", x,
                      F.interpolate(T(x), scale_factor=2, mode="bicubic", align_corners=False).numpy(), cub,
                      scales=[1, 1, 2, 2], atol=1e-5, rtol=1e-4)
    yield resize_case("resize_bicubic_align_corners", x,
                      F.interpolate(T(x), size=(6, 8), mode="bicubic", align_corners=True).numpy(),
                      {"mode": "cubic", "coordinate_transformation_mode": "align_corners", "cubic_coeff_a": -0.75},
                      sizes=[2, 3, 6, 8], atol=1e-5, rtol=1e-4)

    # what PyTorch never writes: numpy from the spec
    y = randf(203, 1, 2, 4, 6)
    for cm, nm in (("half_pixel", "round_prefer_floor"), ("half_pixel", "round_prefer_ceil"),
                   ("asymmetric", "ceil"), ("tf_half_pixel_for_nn", "floor"), ("align_corners", "round_prefer_ceil")):
        sc = [1.0, 1.0, 2.0, 0.5]
        yield resize_case(f"resize_nearest_{cm}_{nm}", y,
                          resize_ref(y, [1, 2, 8, 3], sc, "nearest", cm, nmode=nm),
                          {"mode": "nearest", "coordinate_transformation_mode": cm, "nearest_mode": nm},
                          scales=sc, ref="numpy")
    # the defaults (half_pixel, round_prefer_floor) with sizes
    yield resize_case("resize_nearest_defaults_sizes", y, resize_ref(y, [1, 2, 6, 4], [1, 1, 1.5, 4 / 6],
                                                                     "nearest", "half_pixel"),
                      {}, sizes=[1, 2, 6, 4], ref="numpy")
    yield resize_case("resize_linear_asymmetric", y,
                      resize_ref(y, [1, 2, 10, 4], [1, 1, 2.5, 0.75], "linear", "asymmetric"),
                      {"mode": "linear", "coordinate_transformation_mode": "asymmetric"},
                      scales=[1, 1, 2.5, 0.75], ref="numpy")
    # linear on every dim, scales not 1 on the channel dim too
    yield resize_case("resize_linear_channels", y,
                      resize_ref(y, [1, 3, 4, 6], [1, 1.5, 1, 1], "linear", "half_pixel"),
                      {"mode": "linear"}, scales=[1, 1.5, 1, 1], ref="numpy")
    yield resize_case("resize_cubic_exclude_outside", y,
                      resize_ref(y, [1, 2, 7, 9], [1, 1, 7 / 4, 9 / 6], "cubic", "half_pixel", a=-0.5, exclude=1),
                      {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1},
                      sizes=[1, 2, 7, 9], ref="numpy", rtol=1e-4, atol=1e-5)
    yield resize_case("resize_cubic_asymmetric_down", y,
                      resize_ref(y, [1, 2, 3, 4], [1, 1, 0.75, 4 / 6], "cubic", "asymmetric"),
                      {"mode": "cubic", "coordinate_transformation_mode": "asymmetric"},
                      sizes=[1, 2, 3, 4], ref="numpy", rtol=1e-4, atol=1e-5)


class _Interp(torch.nn.Module):
    """A segmentation head's upsampling, sizes from the input's shape."""
    def forward(self, x):
        return (F.interpolate(x, size=(9, 11), mode="bilinear", align_corners=False),
                F.interpolate(x, scale_factor=2, mode="nearest"),
                F.interpolate(x, size=(3, 8), mode="bicubic", align_corners=True),
                F.interpolate(x[:, :, 0], scale_factor=2.5, mode="linear", align_corners=False))


class _Transform(torch.nn.Module):
    """torchvision's GeneralizedRCNNTransform resize: scale_factor with
    recompute_scale_factor, exported as Resize of 'sizes' from shape arithmetic."""
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x):
        return F.interpolate(x, scale_factor=self.f, mode="bilinear", recompute_scale_factor=True,
                             align_corners=False)


class _Exact(torch.nn.Module):
    """A segmentation head's upsampling (size=), ASPP's pooled 1x1 branch, align_corners,
    scale_factor (input 'scales'), linear and trilinear."""
    def forward(self, x, v):
        return (F.interpolate(x, size=(37, 23), mode="bilinear", align_corners=False),
                F.interpolate(x, size=(5, 4), mode="bilinear", align_corners=False),
                F.interpolate(x[:, :, :1, :1], size=(7, 9), mode="bilinear", align_corners=False),
                F.interpolate(x, size=(29, 31), mode="bilinear", align_corners=True),
                F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=False),
                F.interpolate(x[:, :, 0], size=41, mode="linear", align_corners=False),
                F.interpolate(v, size=(5, 9, 7), mode="trilinear", align_corners=False))


def torch_avx2():
    """PyTorch's CPU kernels are those of its AVX2 (or AVX-512) build: the bilinear
    sum's t0 * w0 + t1 * w1 is then one fused multiply-add (the exact cases' bits)."""
    cap = [ln for ln in torch.__config__.show().splitlines() if "CPU capability usage" in ln]
    return bool(cap) and ("AVX2" in cap[0] or "AVX512" in cap[0])


def exported_cases():
    from cases.index import exported
    g = torch.Generator().manual_seed(210)
    for opset in (11, 13, 17):
        yield exported(f"resize_exported_opset{opset}", _Interp(), (torch.randn(2, 3, 4, 5, generator=g),), ["x"],
                       opset=opset, rtol=1e-4, atol=1e-5)
    # bit for bit PyTorch's (rtol = atol = 0): the taps and the sum of linear in PyTorch's
    # arithmetic (resize.c, pt_taps); a detector's image transform up, down and by an odd
    # factor, and a segmenter's forms
    if not torch_avx2():
        raise SystemExit("resize: the exact cases need PyTorch's AVX2 kernels (ATEN_CPU_CAPABILITY unset, an "
                         "x86-64 CPU with AVX2 and FMA): its default kernels sum without FMA")
    for name, shape, f in (("resize_exact_transform_up", (1, 3, 12, 17), 60 / 12),
                           ("resize_exact_transform_down", (1, 3, 97, 75), 64 / 75),
                           ("resize_exact_transform_odd", (1, 3, 14, 19), 800 / 333)):
        x = torch.rand(shape, generator=g)
        yield exported(name, _Transform(f), (x,), ["x"], opset=13, rtol=0, atol=0)
    yield exported("resize_exact_forms", _Exact(), (torch.randn(2, 3, 11, 7, generator=g) * 4,
                                                    torch.randn(1, 2, 3, 4, 5, generator=g)), ["x", "v"],
                   opset=13, rtol=0, atol=0)
