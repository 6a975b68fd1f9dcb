"""The reduce family: ReduceMin, ReduceProd, ReduceL1, ReduceL2,
ReduceSumSquare, ReduceLogSum, ReduceLogSumExp (axes as attribute, opset 13,
and as input with noop_with_empty_axes, opset 18), ArgMax, ArgMin, Hardmax,
CumSum and TopK. References: PyTorch (torch.amin, torch.prod,
torch.linalg.vector_norm, torch.logsumexp, torch.argmax, torch.cumsum,
torch.topk, ...); numpy from the spec where torch does not promise the
answer (TopK's order among equal values; ArgMax with select_last_index)."""
import numpy as np
import torch
import torch.nn.functional as F

from opcase import Case, randf, rng


def t(a):
    return torch.from_numpy(a)


def randi(seed, *shape, lo=-5, hi=5, dtype=np.int64):
    return rng(seed).integers(lo, hi, size=shape).astype(dtype)


def red(name, op, x, fn, axes, keepdims=1, opset=13, axes_input=False, rtol=1e-5, atol=1e-6, **kw):
    """One Reduce* case; fn(tensor, dims, keepdim) is the torch reference."""
    attrs = {"keepdims": keepdims}
    inputs = {"x": x}
    node_inputs = None
    if axes is not None and not axes_input:
        attrs["axes"] = list(axes)
    if axes is not None and axes_input:
        inputs["axes"] = np.array(axes, np.int64)
    dims = tuple(axes) if axes else tuple(range(x.ndim))
    y = fn(t(x), dims, bool(keepdims))
    return Case(name, op, inputs, {"y": y.numpy()}, attrs=attrs, opset=opset, rtol=rtol, atol=atol,
                consts={"axes"}, node_inputs=node_inputs, check=opset <= 17, **kw)


def l1(v, d, k):
    return torch.linalg.vector_norm(v, 1, dim=d, keepdim=k)


def l2(v, d, k):
    return torch.linalg.vector_norm(v, 2, dim=d, keepdim=k)


def prod(v, d, k):
    for a in sorted((a % v.ndim for a in d), reverse=True):
        v = torch.prod(v, dim=a, keepdim=True)
    return v if k else v.reshape([s for i, s in enumerate(v.shape) if i not in {a % v.ndim for a in d}])


def cases():
    x = randf(301, 2, 3, 4, 5)
    xn = x.copy()
    xn[0, 1, 2, :] = [np.nan, 1.0, np.inf, -np.inf, 0.0]
    xn[1, 2, 3, 4] = -np.inf
    amin = lambda v, d, k: torch.amin(v, dim=d, keepdim=k)
    yield red("red_min_axis1", "ReduceMin", x, amin, [1])
    yield red("red_min_neg_axes_keep0", "ReduceMin", xn, amin, [-1, -3], keepdims=0)
    yield red("red_min_all", "ReduceMin", xn, amin, None)
    yield red("red_min_all_keep0", "ReduceMin", x, amin, None, keepdims=0)
    xi = randi(302, 3, 4, 5, lo=-100, hi=100)
    yield red("red_min_i64", "ReduceMin", xi, amin, [2], keepdims=0)
    yield red("red_min_opset18_axes_input", "ReduceMin", xn, amin, [0, 2], opset=18, axes_input=True)
    yield Case("red_min_opset18_noop", "ReduceMin", {"x": x}, {"y": x.copy()},
               attrs={"noop_with_empty_axes": 1}, opset=18, check=False)

    xp = randf(303, 3, 4, 5, lo=0.5, hi=1.5)
    yield red("red_prod_axis2", "ReduceProd", xp, prod, [2])
    yield red("red_prod_middle_keep0", "ReduceProd", xp, prod, [1], keepdims=0)
    yield red("red_prod_all", "ReduceProd", xp, prod, None, rtol=1e-4)
    yield red("red_prod_i64", "ReduceProd", randi(304, 3, 4, lo=-3, hi=4), prod, [-1], keepdims=0)

    yield red("red_l1_axis_neg1", "ReduceL1", xn, l1, [-1])
    yield red("red_l1_middle", "ReduceL1", x, l1, [1, 2], keepdims=0)
    yield red("red_l2_axis_neg1", "ReduceL2", xn, l2, [-1])
    yield red("red_l2_middle", "ReduceL2", x, l2, [1], keepdims=0)
    yield red("red_l2_all", "ReduceL2", x, l2, None)
    yield red("red_l2_opset18_axes_input", "ReduceL2", x, l2, [-2], opset=18, axes_input=True)
    ssq = lambda v, d, k: torch.sum(v * v, dim=d, keepdim=k)
    yield red("red_sumsquare", "ReduceSumSquare", xn, ssq, [2, 3])
    yield red("red_sumsquare_middle_keep0", "ReduceSumSquare", x, ssq, [1], keepdims=0)
    logsum = lambda v, d, k: torch.log(torch.sum(v, dim=d, keepdim=k))
    yield red("red_logsum", "ReduceLogSum", xp, logsum, [1])
    yield red("red_logsum_all_keep0", "ReduceLogSum", xp, logsum, None, keepdims=0)
    lse = lambda v, d, k: torch.logsumexp(v, dim=d, keepdim=k)
    yield red("red_logsumexp", "ReduceLogSumExp", xn, lse, [-1])
    yield red("red_logsumexp_middle", "ReduceLogSumExp", xn, lse, [1], keepdims=0)
    big = randf(305, 4, 6, lo=-1, hi=1) * np.float32(200)
    big[1, :] = -np.inf
    big[2, 3] = np.inf
    yield red("red_logsumexp_large", "ReduceLogSumExp", big, lse, [1])

    # ArgMax / ArgMin: torch treats NaN as the extreme of both, first index on ties
    a = np.round(randf(310, 3, 4, 6, lo=-3, hi=3))     # ties
    an = a.copy()
    an[0, 1, 2] = np.nan
    an[1, :, 4] = [1.0, np.nan, 2.0, np.nan]
    an[2, 3, :] = np.inf
    for op, fn in [("ArgMax", torch.argmax), ("ArgMin", torch.argmin)]:
        s = op.lower()
        yield Case("red_%s_default" % s, op, {"x": an}, {"y": fn(t(an), dim=0, keepdim=True).numpy()})
        yield Case("red_%s_axis_neg1_keep0" % s, op, {"x": an}, {"y": fn(t(an), dim=-1).numpy()},
                   attrs={"axis": -1, "keepdims": 0})
        yield Case("red_%s_axis1" % s, op, {"x": an}, {"y": fn(t(an), dim=1, keepdim=True).numpy()},
                   attrs={"axis": 1})
        ai = randi(311, 4, 7, lo=-3, hi=3)
        yield Case("red_%s_i64" % s, op, {"x": ai}, {"y": fn(t(ai), dim=1).numpy()},
                   attrs={"axis": 1, "keepdims": 0})
        # select_last_index: the last of equal extremes (numpy from the spec)
        flip = a[:, :, ::-1]
        npfn = np.argmax if op == "ArgMax" else np.argmin
        yield Case("red_%s_last_index" % s, op, {"x": a},
                   {"y": (a.shape[2] - 1 - npfn(flip, axis=2)).astype(np.int64)},
                   attrs={"axis": -1, "keepdims": 0, "select_last_index": 1}, ref="numpy")

    # Hardmax: one-hot of the first maximum
    h = np.round(randf(315, 3, 4, 5, lo=-2, hi=2))

    def hardmax(v, dim):
        return F.one_hot(torch.argmax(v, dim=dim), v.shape[dim]).movedim(-1, dim).float()
    yield Case("red_hardmax_default", "Hardmax", {"x": h}, {"y": hardmax(t(h), -1).numpy()})
    yield Case("red_hardmax_axis1", "Hardmax", {"x": h}, {"y": hardmax(t(h), 1).numpy()}, attrs={"axis": 1})
    yield Case("red_hardmax_opset11", "Hardmax", {"x": h},
               {"y": hardmax(t(h).reshape(3, 20), 1).reshape(3, 4, 5).numpy()}, opset=11)

    # CumSum (torch.cumsum; exclusive and reverse by shifting and flipping it)
    c = randf(320, 3, 4, 5)
    c.reshape(-1)[7] = np.inf

    def cumsum(v, axis, exclusive=0, reverse=0):
        v = t(v)
        if reverse:
            v = torch.flip(v, [axis])
        y = torch.cumsum(v, axis)
        if exclusive:
            y = torch.cat([torch.zeros_like(y.narrow(axis, 0, 1)), y.narrow(axis, 0, y.shape[axis] - 1)], axis)
        if reverse:
            y = torch.flip(y, [axis])
        return y.numpy()
    for ax, ex, rev in [(0, 0, 0), (1, 0, 0), (-1, 0, 0), (1, 1, 0), (2, 0, 1), (-2, 1, 1)]:
        yield Case("red_cumsum_axis%s_ex%d_rev%d" % (str(ax).replace("-", "neg"), ex, rev), "CumSum",
                   {"x": c, "axis": np.array(ax, np.int64)}, {"y": cumsum(c, ax, ex, rev)},
                   attrs={"exclusive": ex, "reverse": rev}, consts={"axis"})
    ci = randi(321, 4, 6, lo=-50, hi=50)
    yield Case("red_cumsum_i64", "CumSum", {"x": ci, "axis": np.array([1], np.int32)}, {"y": cumsum(ci, 1)},
               consts={"axis"})
    yield Case("red_cumsum_i64_reverse_folded", "CumSum", {"x": ci, "axis": np.array(0, np.int64)},
               {"y": cumsum(ci, 0, 0, 1)}, attrs={"reverse": 1}, consts={"x", "axis"})

    # TopK: distinct values against torch.topk; ties against the spec (lower index first)
    k = randf(330, 3, 4, 10, lo=-5, hi=5)
    k[0, 0, 3] = np.nan
    k[1, 2, 7] = np.inf
    k[2, 1, 0] = -np.inf
    for name, kk, axis, largest in [("default", 3, -1, 1), ("smallest", 4, -1, 0), ("axis1", 2, 1, 1),
                                    ("axis0_smallest", 3, 0, 0), ("k0", 0, -1, 1), ("all", 10, 2, 1)]:
        v, i = torch.topk(t(k), kk, dim=axis, largest=bool(largest), sorted=True)
        yield Case("red_topk_" + name, "TopK", {"x": k, "k": np.array([kk], np.int64)},
                   {"values": v.numpy(), "indices": i.numpy()},
                   attrs={"axis": axis, "largest": largest}, consts={"k"})
    ki = randi(331, 3, 12, lo=-1000, hi=1000)
    v, i = torch.topk(t(ki), 5, dim=1, largest=True, sorted=True)
    yield Case("red_topk_i64", "TopK", {"x": ki, "k": np.array([5], np.int64)},
               {"values": v.numpy(), "indices": i.numpy()}, attrs={"axis": 1}, consts={"k"})
    # sorted = 0: ONNX leaves the order open; bitflip returns it sorted
    v, i = torch.topk(t(k), 3, dim=-1, sorted=True)
    yield Case("red_topk_unsorted_attr", "TopK", {"x": k, "k": np.array([3], np.int64)},
               {"values": v.numpy(), "indices": i.numpy()}, attrs={"sorted": 0}, consts={"k"})
    tie = np.round(randf(332, 4, 9, lo=-2, hi=2))
    for largest in (1, 0):
        order = np.argsort(-tie if largest else tie, axis=1, kind="stable")[:, :4]
        yield Case("red_topk_ties_%s" % ("largest" if largest else "smallest"), "TopK",
                   {"x": tie, "k": np.array([4], np.int64)},
                   {"values": np.take_along_axis(tie, order, 1), "indices": order.astype(np.int64)},
                   attrs={"largest": largest}, consts={"k"}, ref="numpy")
