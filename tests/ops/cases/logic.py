"""The logic family (comparisons, bool logic, Not, IsNaN, IsInf, Mod) and
the variadic Min, Max, Sum, Mean: broadcasting, NaN and +-Inf, the int64 and
int32 forms that exported shape arithmetic uses (also as constants, so that
the plan folds them). References: PyTorch; numpy for the variadic Mean and
Sum of three inputs (torch has no n-ary op; numpy sums left to right in
float32, as the ONNX reference does)."""
import numpy as np
import torch

from opcase import Case, randf, rng


def t(a):
    return torch.from_numpy(a)


def with_nan(seed, *shape):
    x = np.round(randf(seed, *shape, lo=-3, hi=3))   # small integers: ties and equality happen
    flat = x.reshape(-1)
    k = min(4, flat.size)
    flat[:k] = [np.nan, np.inf, -np.inf, 0.0][:k]
    return x


def randi(seed, *shape, lo=-5, hi=5, dtype=np.int64):
    return rng(seed).integers(lo, hi, size=shape).astype(dtype)


CMP = [("Equal", torch.eq, "eq"), ("Less", torch.lt, "lt"), ("Greater", torch.gt, "gt"),
       ("LessOrEqual", torch.le, "le"), ("GreaterOrEqual", torch.ge, "ge")]


def cases():
    a, b = with_nan(201, 2, 3, 4), with_nan(202, 3, 1)
    for op, fn, short in CMP:
        opset = 16 if op in ("LessOrEqual", "GreaterOrEqual") else 13
        yield Case("logic_%s_f32_broadcast" % short, op, {"a": a, "b": b}, {"y": fn(t(a), t(b)).numpy()},
                   opset=opset)
        ia, ib = randi(203, 4, 5), randi(204, 5)
        yield Case("logic_%s_i64" % short, op, {"a": ia, "b": ib}, {"y": fn(t(ia), t(ib)).numpy()}, opset=opset)
    ja, jb = randi(205, 3, 4, dtype=np.int32), randi(206, 1, 4, dtype=np.int32)
    yield Case("logic_eq_i32", "Equal", {"a": ja, "b": jb}, {"y": torch.eq(t(ja), t(jb)).numpy()})
    yield Case("logic_lt_i32", "Less", {"a": ja, "b": jb}, {"y": torch.lt(t(ja), t(jb)).numpy()})
    ba, bb = randf(207, 3, 4) > 0, randf(208, 4) > 0
    yield Case("logic_eq_bool", "Equal", {"a": ba, "b": bb}, {"y": torch.eq(t(ba), t(bb)).numpy()})
    # shape arithmetic as exports write it, on constants: folded when the plan is built
    sa, sb = np.array([2, 3, 1, 7], np.int64), np.array(1, np.int64)
    yield Case("logic_eq_i64_folded", "Equal", {"s": sa, "one": sb}, {"y": torch.eq(t(sa), t(sb)).numpy()},
               consts={"s", "one"})
    yield Case("logic_gt_scalar_f32", "Greater", {"a": a, "b": np.array(0.5, np.float32)},
               {"y": torch.gt(t(a), 0.5).numpy()}, consts={"b"})

    # bool logic
    p, q = randf(210, 2, 3, 4) > 0, randf(211, 3, 1) > 0
    yield Case("logic_and_broadcast", "And", {"a": p, "b": q}, {"y": torch.logical_and(t(p), t(q)).numpy()})
    yield Case("logic_or_broadcast", "Or", {"a": p, "b": q}, {"y": torch.logical_or(t(p), t(q)).numpy()})
    yield Case("logic_xor_broadcast", "Xor", {"a": p, "b": q}, {"y": torch.logical_xor(t(p), t(q)).numpy()})
    yield Case("logic_not", "Not", {"x": p}, {"y": torch.logical_not(t(p)).numpy()})
    yield Case("logic_not_folded", "Not", {"x": q}, {"y": torch.logical_not(t(q)).numpy()}, consts={"x"})

    # predicates
    x = with_nan(215, 3, 8)
    x.reshape(-1)[8:10] = [np.inf, -np.inf]
    yield Case("logic_isnan", "IsNaN", {"x": x}, {"y": torch.isnan(t(x)).numpy()})
    yield Case("logic_isinf", "IsInf", {"x": x}, {"y": torch.isinf(t(x)).numpy()})
    yield Case("logic_isinf_positive", "IsInf", {"x": x}, {"y": torch.isposinf(t(x)).numpy()},
               attrs={"detect_negative": 0})
    yield Case("logic_isinf_negative", "IsInf", {"x": x}, {"y": torch.isneginf(t(x)).numpy()},
               attrs={"detect_positive": 0})

    # Mod: fmod=0 is torch.remainder (divisor's sign), fmod=1 torch.fmod (dividend's sign)
    ma = randi(220, 4, 6, lo=-20, hi=20)
    mb = randi(221, 6, lo=1, hi=7) * np.where(np.arange(6) % 2 == 0, 1, -1).astype(np.int64)
    yield Case("logic_mod_i64", "Mod", {"a": ma, "b": mb}, {"y": torch.remainder(t(ma), t(mb)).numpy()})
    yield Case("logic_mod_i64_fmod", "Mod", {"a": ma, "b": mb}, {"y": torch.fmod(t(ma), t(mb)).numpy()},
               attrs={"fmod": 1})
    ma32, mb32 = ma.astype(np.int32), mb.astype(np.int32)
    yield Case("logic_mod_i32", "Mod", {"a": ma32, "b": mb32}, {"y": torch.remainder(t(ma32), t(mb32)).numpy()})
    yield Case("logic_mod_i32_fmod", "Mod", {"a": ma32, "b": mb32}, {"y": torch.fmod(t(ma32), t(mb32)).numpy()},
               attrs={"fmod": 1})
    yield Case("logic_mod_i64_scalar_folded", "Mod", {"a": ma[0], "b": np.array(-4, np.int64)},
               {"y": torch.remainder(t(ma[0]), -4).numpy()}, consts={"a", "b"})
    fa = randf(222, 3, 8, lo=-10, hi=10)
    fa.reshape(-1)[:4] = [np.nan, np.inf, -np.inf, -0.0]
    fb = randf(223, 8, lo=-4, hi=4)
    fb[4:7] = [0.0, np.inf, -np.inf]
    yield Case("logic_mod_f32_fmod", "Mod", {"a": fa, "b": fb}, {"y": torch.fmod(t(fa), t(fb)).numpy()},
               attrs={"fmod": 1})

    # variadic Min, Max (NaN wins, as torch.minimum/maximum), Sum, Mean
    v1, v2, v3 = with_nan(230, 2, 3, 4), with_nan(231, 3, 1), randf(232, 4)
    v2.reshape(-1)[1] = 1.0   # Inf at different places in each
    yield Case("var_max_2", "Max", {"a": v1, "b": v2}, {"y": torch.maximum(t(v1), t(v2)).numpy()})
    yield Case("var_min_2", "Min", {"a": v1, "b": v2}, {"y": torch.minimum(t(v1), t(v2)).numpy()})
    yield Case("var_max_3", "Max", {"a": v1, "b": v2, "c": v3},
               {"y": torch.maximum(torch.maximum(t(v1), t(v2)), t(v3)).numpy()})
    yield Case("var_min_3_bcast_first", "Min", {"c": v3, "b": v2, "a": v1},
               {"y": torch.minimum(torch.minimum(t(v3), t(v2)), t(v1)).numpy()})
    yield Case("var_max_1", "Max", {"a": v1}, {"y": v1.copy()})
    w1, w2, w3 = randf(233, 2, 3, 4), randf(234, 3, 1), randf(235, 4)
    yield Case("var_sum_3", "Sum", {"a": w1, "b": w2, "c": w3}, {"y": (w1 + w2) + w3}, ref="numpy")
    yield Case("var_sum_1", "Sum", {"a": w1}, {"y": w1.copy()}, ref="numpy")
    yield Case("var_mean_3", "Mean", {"a": w1, "b": w2, "c": w3},
               {"y": ((w1 + w2) + w3) / np.float32(3)}, ref="numpy")
    yield Case("var_mean_2_torch", "Mean", {"a": w1, "b": w2}, {"y": ((t(w1) + t(w2)) / 2).numpy()})
    i1, i2, i3 = randi(236, 3, 4), randi(237, 4), randi(238, 3, 1)
    yield Case("var_max_i64", "Max", {"a": i1, "b": i2, "c": i3},
               {"y": torch.maximum(torch.maximum(t(i1), t(i2)), t(i3)).numpy()})
    yield Case("var_min_i64_folded", "Min", {"a": i1, "b": i2},
               {"y": torch.minimum(t(i1), t(i2)).numpy()}, consts={"a", "b"})
    yield Case("var_sum_i64", "Sum", {"a": i1, "b": i2, "c": i3}, {"y": ((t(i1) + t(i2)) + t(i3)).numpy()})
    j1, j2 = i1.astype(np.int32), i2.astype(np.int32)
    yield Case("var_max_i32", "Max", {"a": j1, "b": j2}, {"y": torch.maximum(t(j1), t(j2)).numpy()})

    # Bitwise ops (opset 18, newer than onnx 1.12's checker)
    ba, bb = randi(240, 3, 5, lo=-2**40, hi=2**40), randi(241, 5, lo=-2**40, hi=2**40)
    for op, fn in [("BitwiseAnd", torch.bitwise_and), ("BitwiseOr", torch.bitwise_or),
                   ("BitwiseXor", torch.bitwise_xor)]:
        yield Case("logic_%s_i64" % op.lower(), op, {"a": ba, "b": bb}, {"y": fn(t(ba), t(bb)).numpy()},
                   opset=18, check=False)
    b32 = ba[:, :1].astype(np.int32)
    yield Case("logic_bitwiseand_i32", "BitwiseAnd", {"a": b32, "b": bb.astype(np.int32)},
               {"y": torch.bitwise_and(t(b32), t(bb.astype(np.int32))).numpy()}, opset=18, check=False)
    yield Case("logic_bitwisenot_i64", "BitwiseNot", {"x": ba}, {"y": torch.bitwise_not(t(ba)).numpy()},
               opset=18, check=False)
    u8 = rng(242).integers(0, 256, size=(2, 7)).astype(np.uint8)
    yield Case("logic_bitwisenot_u8", "BitwiseNot", {"x": u8}, {"y": torch.bitwise_not(t(u8)).numpy()},
               opset=18, check=False)
