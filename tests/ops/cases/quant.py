"""The quant family: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv.

References: numpy renditions of the ONNX spec written here, with the float32
arithmetic ONNX Runtime uses where the spec leaves it open (x / scale as a
float32 division; the requantization multiplier x_scale * w_scale / y_scale in
float32, applied to float32(acc)); rounding half to even (np.rint). Where
PyTorch has the same operation (torch.quantize_per_tensor / per_channel with
int_repr, torch.dequantize) it cross-checks the numpy reference on inputs away
from rounding ties (PyTorch multiplies by 1/scale, which can differ on a tie).
"""
import numpy as np
import torch

from opcase import Case, rng

F = np.float32
QRANGE = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255)}


def saturate(r, dt):
    lo, hi = QRANGE[np.dtype(dt)]
    return np.clip(np.where(np.isnan(r), np.float32(lo), r), lo, hi).astype(dt)


def per_axis(v, x, axis):
    """v (scalar or 1-D along axis) shaped to broadcast against x."""
    v = np.asarray(v)
    if v.ndim == 0 or v.size == 1 and v.ndim == 1 and x.ndim == 0:
        return v.reshape(())
    shape = [1] * x.ndim
    shape[axis] = v.size
    return v.reshape(shape)


def quantize(x, s, zp, axis=1, dt=np.uint8):
    """QuantizeLinear: y = saturate(round(x / s) + zp); NaN (undefined in ONNX)
    to the type's lowest value, as ONNX Runtime on x86."""
    dt = zp.dtype if zp is not None else np.dtype(dt)
    z = np.zeros(np.shape(s), dt) if zp is None else zp
    s_, z_ = per_axis(s, x, axis), per_axis(z, x, axis).astype(F)
    r = (np.rint((x / s_).astype(F)) + z_).astype(F)
    lo, hi = QRANGE[np.dtype(dt)]
    return np.clip(np.where(np.isnan(r), F(lo), r), lo, hi).astype(dt)


def dequantize(x, s, zp, axis=1):
    """DequantizeLinear: y = (x - zp) * s, the difference exact in int32."""
    z = np.zeros(np.shape(s), np.int32) if zp is None else zp.astype(np.int32)
    d = (x.astype(np.int32) - per_axis(z, x, axis)).astype(F)
    return (d * per_axis(s, x, axis).astype(F)).astype(F)


def dynamic_quantize(x):
    lo = min(F(0), x.min()) if x.size else F(0)
    hi = max(F(0), x.max()) if x.size else F(0)
    s = F(1) if hi == lo else F((F(hi) - F(lo)) / F(255))
    zp = np.uint8(np.clip(np.rint(F(F(0) - F(lo) / s)), 0, 255))
    y = saturate((np.rint((x / s).astype(F)) + F(zp)).astype(F), np.uint8)
    return y, np.array(s, F), np.array(zp, np.uint8)


def qi8(seed, *shape, dt=np.int8):
    lo, hi = QRANGE[np.dtype(dt)]
    return rng(seed).integers(lo, hi + 1, size=shape).astype(dt)


def matmul_int(a, b, azp=None, bzp=None):
    """MatMulInteger: (a - azp) @ (b - bzp) in int32; azp per row [M], bzp per column [N]."""
    a32 = a.astype(np.int32)
    b32 = b.astype(np.int32)
    if azp is not None:
        za = azp.astype(np.int32)
        a32 = a32 - (za.reshape(-1, 1) if za.size > 1 else za.reshape(()))
    if bzp is not None:
        b32 = b32 - bzp.astype(np.int32).reshape(-1 if bzp.size > 1 else ())
    return np.matmul(a32.astype(np.int64), b32.astype(np.int64)).astype(np.int32)


def requant(acc, mult, yzp):
    """QLinear*: saturate(round(float32(acc) * mult) + y_zp), mult float32."""
    r = np.rint((acc.astype(F) * mult).astype(F)) + F(yzp)
    return saturate(r.astype(F), yzp.dtype)


def conv_int(x, w, xzp=None, wzp=None, strides=None, pads=None, dilations=None, group=1, bias=None):
    """ConvInteger: int32 convolution of (x - xzp) and (w - wzp), NCHW (1 or 2 spatial dims)."""
    x32 = x.astype(np.int64) - (0 if xzp is None else int(xzp))
    w32 = w.astype(np.int64)
    if wzp is not None:
        w32 = w32 - wzp.astype(np.int64).reshape([-1] + [1] * (w.ndim - 1) if wzp.size > 1 else [])
    r = x.ndim - 2
    if r == 1:
        x32, w32 = x32[:, :, None, :], w32[:, :, None, :]
        strides = [1] + list(strides or [1])
        dilations = [1] + list(dilations or [1])
        pads = [0, (pads or [0, 0])[0], 0, (pads or [0, 0])[1]]
    strides = strides or [1, 1]
    dilations = dilations or [1, 1]
    pads = pads or [0, 0, 0, 0]
    n, c, h, wd = x32.shape
    m, cg, kh, kw = w32.shape
    xp = np.zeros((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]), np.int64)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x32
    oh = (xp.shape[2] - ((kh - 1) * dilations[0] + 1)) // strides[0] + 1
    ow = (xp.shape[3] - ((kw - 1) * dilations[1] + 1)) // strides[1] + 1
    y = np.zeros((n, m, oh, ow), np.int64)
    mg = m // group
    for oc in range(m):
        g = oc // mg
        for i in range(kh):
            for j in range(kw):
                hs, ws = i * dilations[0], j * dilations[1]
                win = xp[:, g * cg:(g + 1) * cg, hs:hs + (oh - 1) * strides[0] + 1:strides[0],
                         ws:ws + (ow - 1) * strides[1] + 1:strides[1]]
                y[:, oc] += np.einsum("nchw,c->nhw", win, w32[oc, :, i, j])
        if bias is not None:
            y[:, oc] += int(bias[oc])
    y = y.astype(np.int32)
    return y[:, :, 0, :] if r == 1 else y


def cases():
    # ---- QuantizeLinear
    x = (rng(1).standard_normal((2, 3, 4)) * 3).astype(F)
    x.flat[:8] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e6, -np.inf]   # ties to even, saturation
    s = np.array(0.5, F)
    zp = np.array(3, np.uint8)
    yield Case("quant_quantize_u8_ties", "QuantizeLinear", {"x": x, "s": s, "zp": zp},
               {"y": quantize(x, s, zp)}, ref="numpy")
    x2 = x * F(2)
    zp8 = np.array(-5, np.int8)
    yield Case("quant_quantize_i8_opset11", "QuantizeLinear", {"x": x2, "s": s, "zp": zp8},
               {"y": quantize(x2, s, zp8)}, ref="numpy", opset=11)
    yield Case("quant_quantize_no_zp", "QuantizeLinear", {"x": x, "s": s},
               {"y": quantize(x, s, None)}, ref="numpy", node_inputs=["x", "s"])
    xn = x.copy()
    xn.flat[3] = np.nan
    yield Case("quant_quantize_nan", "QuantizeLinear", {"x": xn, "s": s, "zp": zp8},
               {"y": quantize(xn, s, zp8)}, ref="numpy")
    xc = (rng(2).standard_normal((2, 3, 4, 2)) * 2).astype(F)
    sc = np.array([0.02, 0.05, 0.1], F)
    zc = np.array([0, -3, 7], np.int8)
    yield Case("quant_quantize_per_axis1", "QuantizeLinear", {"x": xc, "s": sc, "zp": zc},
               {"y": quantize(xc, sc, zc, axis=1)}, ref="numpy")
    s2 = np.array([0.01, 0.02], F)
    z2 = np.array([128, 120], np.uint8)
    yield Case("quant_quantize_per_axis_neg", "QuantizeLinear", {"x": xc, "s": s2, "zp": z2},
               {"y": quantize(xc, s2, z2, axis=3)}, ref="numpy", attrs={"axis": -1})
    xr = (rng(3).standard_normal((4, 5)) * 2).astype(F)
    s0 = np.array([0.013, 0.021, 0.034, 0.055], F)
    z0 = np.array([1, 2, -3, 0], np.int8)
    want = quantize(xr, s0, z0, axis=0)
    tq = torch.quantize_per_channel(torch.from_numpy(xr), torch.from_numpy(s0.astype(np.float64)),
                                    torch.from_numpy(z0.astype(np.int64)), 0, torch.qint8).int_repr().numpy()
    assert np.abs(tq.astype(int) - want.astype(int)).max() <= 1 and (tq == want).mean() > 0.9, "torch disagrees"
    yield Case("quant_quantize_per_axis0", "QuantizeLinear", {"x": xr, "s": s0, "zp": z0},
               {"y": want}, ref="numpy", attrs={"axis": 0}, consts={"s", "zp"})
    yield Case("quant_quantize_per_axis1_op17", "QuantizeLinear", {"x": xc, "s": sc, "zp": zc},
               {"y": quantize(xc, sc, zc, axis=1)}, ref="numpy", opset=17)
    # cross-check with torch on values away from ties
    xt = (rng(4).standard_normal((3, 8)) * 4).astype(F)
    st, zt = np.array(0.0625, F), np.array(100, np.uint8)
    want = quantize(xt, st, zt)
    tq = torch.quantize_per_tensor(torch.from_numpy(xt), 0.0625, 100, torch.quint8).int_repr().numpy()
    assert (tq == want).all(), "torch.quantize_per_tensor disagrees with the numpy reference"
    yield Case("quant_quantize_torch", "QuantizeLinear", {"x": xt, "s": st, "zp": zt}, {"y": want}, ref="numpy")
    # folded at plan time: every input a constant
    yield Case("quant_quantize_folded", "QuantizeLinear", {"x": xt, "s": st, "zp": zt}, {"y": want}, ref="numpy",
               consts={"x", "s", "zp"})

    # ---- DequantizeLinear
    q = qi8(10, 2, 3, 4, dt=np.uint8)
    zq = np.array(128, np.uint8)
    sq = np.array(0.037, F)
    want = dequantize(q, sq, zq)
    tdq = torch.dequantize(torch._make_per_tensor_quantized_tensor(torch.from_numpy(q), float(sq), 128)).numpy()
    assert np.allclose(tdq, want, rtol=1e-6, atol=0), "torch.dequantize disagrees"
    yield Case("quant_dequantize_u8", "DequantizeLinear", {"x": q, "s": sq, "zp": zq}, {"y": want}, ref="numpy",
               rtol=0, atol=0)
    q8 = qi8(11, 2, 3, 4)
    z8 = np.array(-7, np.int8)
    yield Case("quant_dequantize_i8_opset11", "DequantizeLinear", {"x": q8, "s": sq, "zp": z8},
               {"y": dequantize(q8, sq, z8)}, ref="numpy", opset=11, rtol=0, atol=0)
    yield Case("quant_dequantize_no_zp", "DequantizeLinear", {"x": q8, "s": sq},
               {"y": dequantize(q8, sq, None)}, ref="numpy", node_inputs=["x", "s"], rtol=0, atol=0)
    i32 = rng(12).integers(-100000, 100000, size=(2, 5)).astype(np.int32)
    yield Case("quant_dequantize_i32", "DequantizeLinear", {"x": i32, "s": sq},
               {"y": dequantize(i32, sq, None)}, ref="numpy", node_inputs=["x", "s"], rtol=0, atol=0)
    w = qi8(13, 4, 3, 3, 3)
    sw = np.array([0.01, 0.002, 0.03, 0.4], F)
    zw = np.zeros(4, np.int8)
    yield Case("quant_dequantize_per_axis0", "DequantizeLinear", {"w": w, "s": sw, "zp": zw},
               {"y": dequantize(w, sw, zw, axis=0)}, ref="numpy", attrs={"axis": 0}, consts={"w", "s", "zp"},
               rtol=0, atol=0)
    yield Case("quant_dequantize_per_axis0_op17", "DequantizeLinear", {"w": w, "s": sw, "zp": zw},
               {"y": dequantize(w, sw, zw, axis=0)}, ref="numpy", attrs={"axis": 0}, consts={"w", "s", "zp"},
               rtol=0, atol=0, opset=17)
    sa = np.array([0.5, 0.25, 0.125], F)
    za = np.array([1, 2, 3], np.int8)
    yield Case("quant_dequantize_per_axis_default", "DequantizeLinear", {"x": q8, "s": sa, "zp": za},
               {"y": dequantize(q8, sa, za, axis=1)}, ref="numpy", rtol=0, atol=0)
    s4 = np.array([0.5, 0.25, 0.125, 2.0], F)
    z4 = np.array([10, 20, 30, 40], np.uint8)
    yield Case("quant_dequantize_per_axis_neg", "DequantizeLinear", {"x": q, "s": s4, "zp": z4},
               {"y": dequantize(q, s4, z4, axis=2)}, ref="numpy", attrs={"axis": -1}, rtol=0, atol=0)

    # ---- DynamicQuantizeLinear
    for i, (lo, hi) in enumerate([(-3, 5), (0.5, 4), (-6, -1)]):
        xd = rng(20 + i).uniform(lo, hi, size=(3, 7)).astype(F)
        y, ys, yz = dynamic_quantize(xd)
        yield Case(f"quant_dynamic_{i}", "DynamicQuantizeLinear", {"x": xd}, {"y": y, "y_scale": ys, "y_zp": yz},
                   ref="numpy", rtol=0, atol=0, opset=11)
    xz = np.zeros((2, 3), F)
    y, ys, yz = dynamic_quantize(xz)
    yield Case("quant_dynamic_zeros", "DynamicQuantizeLinear", {"x": xz}, {"y": y, "y_scale": ys, "y_zp": yz},
               ref="numpy", rtol=0, atol=0, opset=13)

    # ---- MatMulInteger
    a = qi8(30, 4, 6, dt=np.uint8)
    b = qi8(31, 6, 5, dt=np.uint8)
    azp, bzp = np.array(12, np.uint8), np.array(200, np.uint8)
    yield Case("quant_matmulinteger_u8u8", "MatMulInteger", {"a": a, "b": b, "azp": azp, "bzp": bzp},
               {"y": matmul_int(a, b, azp, bzp)}, ref="numpy")
    bs = qi8(32, 6, 5)
    yield Case("quant_matmulinteger_u8s8_no_zp", "MatMulInteger", {"a": a, "b": bs},
               {"y": matmul_int(a, bs)}, ref="numpy", consts={"b"})
    bzc = qi8(33, 5)
    azr = qi8(34, 4, dt=np.uint8)
    yield Case("quant_matmulinteger_per_row_col", "MatMulInteger", {"a": a, "b": bs, "azp": azr, "bzp": bzc},
               {"y": matmul_int(a, bs, azr, bzc)}, ref="numpy", consts={"b", "azp", "bzp"})
    a3 = qi8(35, 2, 3, 6)
    yield Case("quant_matmulinteger_batch", "MatMulInteger", {"a": a3, "b": bs, "bzp": bzc},
               {"y": matmul_int(a3, bs, None, bzc)}, ref="numpy", node_inputs=["a", "b", "", "bzp"],
               consts={"b", "bzp"})
    b3 = qi8(36, 2, 6, 5, dt=np.uint8)
    a1 = qi8(37, 6, dt=np.uint8)
    yield Case("quant_matmulinteger_1d", "MatMulInteger", {"a": a1, "b": b3},
               {"y": matmul_int(a1, b3)}, ref="numpy", consts={"b"})

    # ---- QLinearMatMul
    a_s, b_s, y_s = np.array(0.02, F), np.array(0.015, F), np.array(0.07, F)
    yzp = np.array(128, np.uint8)
    acc = matmul_int(a, b, azp, bzp)
    mult = F(F(a_s * b_s) / y_s)
    yield Case("quant_qlinearmatmul_u8", "QLinearMatMul",
               {"a": a, "as": a_s, "azp": azp, "b": b, "bs": b_s, "bzp": bzp, "ys": y_s, "yzp": yzp},
               {"y": requant(acc, mult, yzp)}, ref="numpy")
    yield Case("quant_matmulinteger_op17", "MatMulInteger", {"a": a, "b": b, "azp": azp, "bzp": bzp},
               {"y": matmul_int(a, b, azp, bzp)}, ref="numpy", opset=17)
    b_sc = np.array([0.01, 0.02, 0.004, 0.05, 0.03], F)
    yzp8 = np.array(-10, np.int8)
    a8 = qi8(38, 4, 6)
    azp8 = np.array(3, np.int8)
    acc = matmul_int(a8, bs, azp8, bzc)
    mult = (F(a_s) * b_sc / F(y_s)).astype(F)
    yield Case("quant_qlinearmatmul_i8_per_column", "QLinearMatMul",
               {"a": a8, "as": a_s, "azp": azp8, "b": bs, "bs": b_sc, "bzp": bzc, "ys": y_s, "yzp": yzp8},
               {"y": requant(acc, mult, yzp8)}, ref="numpy", consts={"b", "bs", "bzp"})
    acc = matmul_int(a3, bs, np.array(0, np.int8), bzc)
    yield Case("quant_qlinearmatmul_batch", "QLinearMatMul",
               {"a": a3, "as": a_s, "azp": np.array(0, np.int8), "b": bs, "bs": b_sc, "bzp": bzc, "ys": y_s,
                "yzp": yzp8},
               {"y": requant(acc, (F(a_s) * b_sc / F(y_s)).astype(F), yzp8)}, ref="numpy", consts={"b", "bs", "bzp"})

    # ---- ConvInteger
    x = qi8(40, 2, 4, 6, 5, dt=np.uint8)
    w = qi8(41, 3, 4, 3, 3)
    yield Case("quant_convinteger_pads_strides", "ConvInteger",
               {"x": x, "w": w, "xzp": np.array(128, np.uint8)},
               {"y": conv_int(x, w, 128, None, strides=[2, 1], pads=[1, 0, 1, 2])}, ref="numpy",
               attrs={"strides": [2, 1], "pads": [1, 0, 1, 2]}, consts={"w"})
    wg = qi8(42, 4, 2, 2, 2, dt=np.uint8)
    wzc = qi8(43, 4, dt=np.uint8)
    yield Case("quant_convinteger_group_wzp", "ConvInteger",
               {"x": x, "w": wg, "xzp": np.array(7, np.uint8), "wzp": wzc},
               {"y": conv_int(x, wg, 7, wzc, group=2, dilations=[2, 1])}, ref="numpy",
               attrs={"group": 2, "dilations": [2, 1]}, consts={"w", "wzp"})
    x1 = qi8(44, 2, 3, 9)
    w1 = qi8(45, 2, 3, 3)
    yield Case("quant_convinteger_1d_no_zp", "ConvInteger", {"x": x1, "w": w1},
               {"y": conv_int(x1, w1, pads=[1, 1])}, ref="numpy", attrs={"pads": [1, 1]}, consts={"w"})

    # ---- QLinearConv
    xs, ws, ysc = np.array(0.03, F), np.array([0.004, 0.02, 0.011], F), np.array(0.2, F)
    bias = rng(46).integers(-2000, 2000, size=3).astype(np.int32)
    acc = conv_int(x, w, 128, np.zeros(3, np.int8), pads=[1, 1, 1, 1], bias=bias)
    mult = (F(xs) * ws / F(ysc)).astype(F).reshape(1, 3, 1, 1)
    yield Case("quant_qlinearconv_per_channel_bias", "QLinearConv",
               {"x": x, "xs": xs, "xzp": np.array(128, np.uint8), "w": w, "ws": ws, "wzp": np.zeros(3, np.int8),
                "ys": ysc, "yzp": np.array(100, np.uint8), "b": bias},
               {"y": requant(acc, mult, np.array(100, np.uint8))}, ref="numpy",
               attrs={"pads": [1, 1, 1, 1]}, consts={"w", "ws", "wzp", "b"})
    yield Case("quant_qlinearconv_op17", "QLinearConv",
               {"x": x, "xs": xs, "xzp": np.array(128, np.uint8), "w": w, "ws": ws, "wzp": np.zeros(3, np.int8),
                "ys": ysc, "yzp": np.array(100, np.uint8), "b": bias},
               {"y": requant(acc, mult, np.array(100, np.uint8))}, ref="numpy",
               attrs={"pads": [1, 1, 1, 1]}, consts={"w", "ws", "wzp", "b"}, opset=17)
    x8 = qi8(47, 2, 4, 6, 5)
    acc = conv_int(x8, w, -3, np.array(2, np.int8), strides=[2, 2], pads=[1, 1, 0, 1])  # SAME_LOWER: the odd pad first
    mult = F(F(xs) * F(0.01) / F(ysc))
    yield Case("quant_qlinearconv_i8_same_lower", "QLinearConv",
               {"x": x8, "xs": xs, "xzp": np.array(-3, np.int8), "w": w, "ws": np.array(0.01, F),
                "wzp": np.array(2, np.int8), "ys": ysc, "yzp": np.array(-1, np.int8)},
               {"y": requant(acc, mult, np.array(-1, np.int8))}, ref="numpy",
               attrs={"strides": [2, 2], "auto_pad": "SAME_LOWER", "kernel_shape": [3, 3]}, consts={"w"})
