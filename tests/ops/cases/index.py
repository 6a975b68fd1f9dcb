"""The index family (core/src/exec/ops/index*.c, shape_pad.c, shape_split.c)
and the shape ops exporters lean on (shape.c, shape_copy.c, shape_gather.c).

References: PyTorch where it has the op (torch.gather, scatter, scatter_add,
scatter_reduce, F.one_hot, nonzero, arange, triu/tril, F.pad, repeat, split,
pixel_shuffle, expand, ...); numpy written here from the ONNX spec where it
does not (GatherND/ScatterND, negative indices, DCR DepthToSpace,
SpaceToDepth, OneHot's axis and values). Cases named *_folded have every
input as an initializer, so the plan computes them at build time."""
import numpy as np
import torch
from onnx import TensorProto, helper, numpy_helper

from opcase import Case, randf, rng

I64_MAX = np.iinfo(np.int64).max
T = torch.from_numpy


def randi(seed, *shape, lo=-50, hi=50, dtype=np.int64):
    return rng(seed).integers(lo, hi, size=shape).astype(dtype)


def norm_idx(idx, dim):
    return np.where(idx < 0, idx + dim, idx)


# ---- numpy renditions of the spec ----

def gather_nd(data, ind, b=0):
    """ONNX GatherND: output = indices.shape[:-1] + data.shape[b + k:]."""
    k = ind.shape[-1]
    bshape = ind.shape[:b]
    out = np.empty(ind.shape[:-1] + data.shape[b + k:], data.dtype)
    for bi in np.ndindex(*bshape):
        d = data[bi]
        for t in np.ndindex(*ind.shape[b:-1]):
            tup = tuple(int(v) + (d.shape[i] if v < 0 else 0) for i, v in enumerate(ind[bi + t]))
            out[bi + t] = d[tup]
    return out


def scatter_nd(data, ind, upd, red="none"):
    out = data.copy()
    for t in np.ndindex(*ind.shape[:-1]):
        tup = tuple(int(v) + (data.shape[i] if v < 0 else 0) for i, v in enumerate(ind[t]))
        if red == "none":
            out[tup] = upd[t]
        elif red == "add":
            out[tup] = out[tup] + upd[t]
        elif red == "mul":
            out[tup] = out[tup] * upd[t]
        elif red == "max":
            out[tup] = np.maximum(out[tup], upd[t])
        else:
            out[tup] = np.minimum(out[tup], upd[t])
    return out


def one_hot(ind, depth, values, axis=-1):
    ind = np.asarray(ind)
    r = ind.ndim
    ax = axis + r + 1 if axis < 0 else axis
    out_shape = list(ind.shape)
    out_shape.insert(ax, depth)
    out = np.full(out_shape, values[0], values.dtype)
    for pos in np.ndindex(*ind.shape):
        v = int(ind[pos])
        if v < 0:
            v += depth
        if 0 <= v < depth:
            out[pos[:ax] + (v,) + pos[ax:]] = values[1]
    return out


def depth_to_space(x, b, mode):
    n, c, h, w = x.shape
    if mode == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (b * b), h * b, w * b)


def space_to_depth(x, b):
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


def onnx_pads_to_torch(pads):
    r = len(pads) // 2
    out = []
    for d in reversed(range(r)):
        out += [int(pads[d]), int(pads[r + d])]
    while out and out[-2:] == [0, 0]:   # torch's reflect and replicate pad only the last dims
        out = out[:-2]
    return tuple(out)


def with_constants(case, names):
    """The case with inputs `names` given as Constant nodes. Float
    initializers are parameters (fault sites), never known at plan time, so
    float inputs that set a shape (Range's, OneHot's depth, Resize's scales)
    come from Constant nodes, as torch.onnx.export writes them."""
    order = case.node_inputs if case.node_inputs is not None else list(case.inputs)
    nodes = [helper.make_node("Constant", [], [n], name="const_" + n,
                              value=numpy_helper.from_array(case.inputs[n], n)) for n in names]
    nodes.append(helper.make_node(case.op, [x or "" for x in order], list(case.outputs), name=case.name,
                                  **case.attrs))
    case.inputs = {k: v for k, v in case.inputs.items() if k not in names}
    case.nodes = nodes
    return case


def cases():
    yield from gather_scatter()
    yield from nd_cases()
    yield from make_cases()
    yield from pad_tile()
    yield from split_blocks()
    yield from shape_checks()
    yield from exported_chains()
    yield from exported_modules()


def gather_scatter():
    x = randf(101, 3, 4, 5)
    idx = rng(102).integers(0, 4, size=(3, 2, 5)).astype(np.int64)
    yield Case("index_gather_elements_axis1", "GatherElements", {"x": x, "i": idx},
               {"y": torch.gather(T(x), 1, T(idx)).numpy()}, attrs={"axis": 1})
    # negative axis, negative indices, indices smaller than data off the axis, int32 indices
    idx = rng(103).integers(-5, 5, size=(2, 3, 4)).astype(np.int32)
    want = np.take_along_axis(x[:2, :3, :], norm_idx(idx, 5).astype(np.int64), axis=2)
    yield Case("index_gather_elements_neg", "GatherElements", {"x": x, "i": idx}, {"y": want},
               attrs={"axis": -1}, ref="numpy", consts={"i"})
    xi = randi(104, 4, 3)
    idx = np.array([[3, 0, 1], [-1, -4, 2]], np.int64)
    yield Case("index_gather_elements_int64_folded", "GatherElements", {"x": xi, "i": idx},
               {"y": np.take_along_axis(xi, norm_idx(idx, 4), axis=0)}, attrs={"axis": 0}, ref="numpy",
               consts={"x", "i"})

    # ScatterElements: none / add / mul / max (torch), negative indices (numpy)
    data = randf(105, 4, 5)
    idx = np.stack([rng(106 + i).permutation(4)[:3] for i in range(5)], axis=1).astype(np.int64)  # [3, 5] unique per column
    upd = randf(107, 3, 5)
    yield Case("index_scatter_elements_none", "ScatterElements", {"d": data, "i": idx, "u": upd},
               {"y": torch.scatter(T(data), 0, T(idx), T(upd)).numpy()}, attrs={"axis": 0}, consts={"i", "u"})
    idx2 = rng(108).integers(0, 5, size=(4, 6)).astype(np.int64)   # duplicates: reductions accumulate
    upd2 = randf(109, 4, 6)
    yield Case("index_scatter_elements_add", "ScatterElements", {"d": data, "i": idx2, "u": upd2},
               {"y": torch.scatter_add(T(data), 1, T(idx2), T(upd2)).numpy()},
               attrs={"axis": 1, "reduction": "add"}, opset=16)
    yield Case("index_scatter_elements_mul", "ScatterElements", {"d": data, "i": idx2, "u": upd2},
               {"y": torch.scatter_reduce(T(data), 1, T(idx2), T(upd2), reduce="prod").numpy()},
               attrs={"axis": -1, "reduction": "mul"}, opset=16)
    yield Case("index_scatter_elements_max_opset18", "ScatterElements", {"d": data, "i": idx2, "u": upd2},
               {"y": torch.scatter_reduce(T(data), 1, T(idx2), T(upd2), reduce="amax").numpy()},
               attrs={"axis": 1, "reduction": "max"}, opset=18)
    di = randi(110, 3, 4)
    ii = np.array([[-1, 0], [1, -3]], np.int64)
    ui = randi(111, 2, 2)
    want = di.copy()
    for (r, c), v in np.ndenumerate(ii):
        want[r, v + 4 if v < 0 else v] += ui[r, c]
    yield Case("index_scatter_elements_int64_neg_folded", "ScatterElements", {"d": di, "i": ii, "u": ui},
               {"y": want}, attrs={"axis": 1, "reduction": "add"}, opset=16, ref="numpy", consts={"d", "i", "u"})


def nd_cases():
    x = randf(120, 3, 4, 5)
    ind = np.array([[[0, 1], [2, -1]], [[-3, 0], [1, 3]]], np.int64)
    yield Case("index_gather_nd", "GatherND", {"x": x, "i": ind}, {"y": gather_nd(x, ind)}, ref="numpy",
               consts={"i"})
    ind = np.array([[1], [0], [-1]], np.int64)
    yield Case("index_gather_nd_batch_dims1", "GatherND", {"x": x, "i": ind}, {"y": gather_nd(x, ind, 1)},
               attrs={"batch_dims": 1}, ref="numpy", consts={"i"})
    ind = np.array([[[2, 1, 0]], [[0, 0, 4]], [[1, 3, 3]]], np.int32)
    xi = randi(121, 3, 4, 5)
    yield Case("index_gather_nd_full_int64_folded", "GatherND", {"x": xi, "i": ind}, {"y": gather_nd(xi, ind)},
               ref="numpy", consts={"x", "i"})
    # torch's x[a, b] exports as GatherND when both are tensors: check that too
    a = np.array([0, 2, 1], np.int64)
    b = np.array([3, 0, 1], np.int64)
    yield Case("index_gather_nd_advanced", "GatherND", {"x": x, "i": np.stack([a, b], -1)},
               {"y": T(x)[T(a), T(b)].numpy()}, consts={"i"})

    data = randf(122, 4, 3)
    ind = np.array([[2], [0]], np.int64)
    upd = randf(123, 2, 3)
    yield Case("index_scatter_nd_rows", "ScatterND", {"d": data, "i": ind, "u": upd},
               {"y": scatter_nd(data, ind, upd)}, ref="numpy", consts={"i", "u"})
    ind = np.array([[0, 1], [3, -1], [0, 1]], np.int64)   # a repeated index: reductions accumulate
    upd = randf(124, 3)
    for red in ("add", "mul"):
        yield Case(f"index_scatter_nd_{red}", "ScatterND", {"d": data, "i": ind, "u": upd},
                   {"y": scatter_nd(data, ind, upd, red)}, attrs={"reduction": red}, opset=16, ref="numpy",
                   consts={"i", "u"})
    yield Case("index_scatter_nd_min_opset18", "ScatterND", {"d": data, "i": ind, "u": upd},
               {"y": scatter_nd(data, ind, upd, "min")}, attrs={"reduction": "min"}, opset=18, ref="numpy",
               consts={"i", "u"})
    # index_put_ with a boolean-free index, as exported: torch is the reference
    di = randi(125, 5)
    ind = np.array([[4], [1]], np.int64)
    ui = np.array([7, -9], np.int64)
    ref = T(di).clone()
    ref[T(ind[:, 0])] = T(ui)
    yield Case("index_scatter_nd_int64_folded", "ScatterND", {"d": di, "i": ind, "u": ui}, {"y": ref.numpy()},
               consts={"d", "i", "u"})


def make_cases():
    # OneHot: torch's one_hot (int64 output, axis -1); numpy for axis, negatives, float values
    ind = np.array([[1, 0, 3], [2, 2, 0]], np.int64)
    depth = np.array(4, np.int64)
    vals = np.array([0, 1], np.int64)
    yield Case("index_onehot_torch", "OneHot", {"i": ind, "depth": depth, "v": vals},
               {"y": torch.nn.functional.one_hot(T(ind), 4).numpy()}, consts={"depth", "v"})
    ind = np.array([[-1, 0, 5], [2, -4, -5]], np.int64)   # 5 and -5: out of range, rows of 'off'
    fv = np.array([-0.5, 2.0], np.float32)
    yield Case("index_onehot_axis0_neg", "OneHot", {"i": ind, "depth": np.array([4], np.int64), "v": fv},
               {"y": one_hot(ind, 4, fv, axis=0)}, attrs={"axis": 0}, ref="numpy", consts={"depth", "v"})
    ind32 = np.array([3, 1], np.int32)
    yield with_constants(Case("index_onehot_axis_neg2_folded", "OneHot",
                              {"i": ind32, "depth": np.array(5.0, np.float32), "v": fv},
                              {"y": one_hot(ind32, 5, fv, axis=-2)}, attrs={"axis": -2}, ref="numpy",
                              consts={"i"}), ["depth", "v"])

    # NonZero: folded only (its shape is its data)
    x = randf(130, 3, 4)
    x[x < 0.2] = 0
    x[1, 1] = np.nan   # NaN is non-zero
    x[2, 3] = -0.0     # -0 is zero
    yield with_constants(Case("index_nonzero_f32_folded", "NonZero", {"x": x},
                              {"y": torch.nonzero(T(x)).T.contiguous().numpy()}), ["x"])
    b = randf(131, 2, 3, 2) > 0
    yield Case("index_nonzero_bool_folded", "NonZero", {"b": b},
               {"y": torch.nonzero(T(b)).T.contiguous().numpy()}, consts={"b"})

    # Range: int64 (what arange exports), int32, float; the count is ceil((limit - start) / delta)
    for name, s, l, d, dt in [("int64", 0, 7, 1, np.int64), ("int64_neg_step", 10, -3, -4, np.int64),
                              ("int32", -5, 6, 3, np.int32), ("f32", 0.5, 3.0, 0.5, np.float32),
                              ("f32_uneven", 1.0, -2.0, -0.75, np.float32), ("int64_empty", 5, 5, 2, np.int64)]:
        want = torch.arange(s, l, d, dtype={np.int64: torch.int64, np.int32: torch.int32,
                                             np.float32: torch.float32}[dt]).numpy()
        yield with_constants(Case(f"index_range_{name}_folded", "Range",
                                  {"s": np.array(s, dt), "l": np.array(l, dt), "d": np.array(d, dt)}, {"y": want}),
                             ["s", "l", "d"])

    # Trilu: torch.triu / tril, batched, with and without k
    x = randf(132, 2, 4, 5)
    yield Case("index_trilu_upper", "Trilu", {"x": x}, {"y": torch.triu(T(x)).numpy()}, opset=14)
    for k in (-1, 2, 7, -9):
        yield Case(f"index_trilu_lower_k{k}".replace("-", "m"), "Trilu", {"x": x, "k": np.array(k, np.int64)},
                   {"y": torch.tril(T(x), k).numpy()}, attrs={"upper": 0}, opset=14, consts={"k"})
        yield Case(f"index_trilu_upper_k{k}".replace("-", "m"), "Trilu", {"x": x, "k": np.array(k, np.int64)},
                   {"y": torch.triu(T(x), k).numpy()}, attrs={"upper": 1}, opset=14, consts={"k"})
    bi = randf(133, 3, 3) > -2
    yield Case("index_trilu_bool_folded", "Trilu", {"b": bi}, {"y": torch.tril(T(bi)).numpy()},
               attrs={"upper": 0}, opset=14, consts={"b"})


def pad_tile():
    x = randf(140, 2, 3, 4, 5)
    F = torch.nn.functional
    for mode, tmode in (("constant", "constant"), ("reflect", "reflect"), ("edge", "replicate")):
        pads = np.array([0, 0, 1, 2, 0, 0, 3, 1], np.int64)
        yield Case(f"index_pad_{mode}", "Pad", {"x": x, "p": pads},
                   {"y": F.pad(T(x), onnx_pads_to_torch(pads), mode=tmode).numpy()},
                   attrs={"mode": mode}, consts={"p"}, opset=13)
    pads = np.array([0, 1, -1, 2, 0, -2, 1, -3], np.int64)   # negative pads crop
    cv = np.array(1.5, np.float32)
    yield Case("index_pad_constant_value_crop", "Pad", {"x": x, "p": pads, "c": cv},
               {"y": F.pad(T(x), onnx_pads_to_torch(pads), value=1.5).numpy()}, consts={"p", "c"}, opset=13)
    pads = np.array([0, 0, 0, -1, 0, 0, -1, 1], np.int64)
    yield Case("index_pad_reflect_crop", "Pad", {"x": x, "p": pads},
               {"y": np.pad(x[:, :, :3, 1:], [(0, 0), (0, 0), (0, 0), (0, 1)], mode="reflect")},
               attrs={"mode": "reflect"}, consts={"p"}, opset=13, ref="numpy")
    # opset 18: axes input (negative); onnx 1.12's checker knows no Pad-18
    pads = np.array([2, 1, 0, 3], np.int64)
    axes = np.array([-1, 1], np.int64)
    yield Case("index_pad_axes_opset18", "Pad", {"x": x, "p": pads, "c": cv, "a": axes},
               {"y": np.pad(x, [(0, 0), (1, 3), (0, 0), (2, 0)], constant_values=1.5)},
               consts={"p", "c", "a"}, opset=18, ref="numpy", check=False)
    # int64 data, folded
    xi = randi(141, 3, 4)
    pads = np.array([1, 0, 0, 2], np.int64)
    yield Case("index_pad_int64_folded", "Pad", {"x": xi, "p": pads, "c": np.array(-7, np.int64)},
               {"y": np.pad(xi, [(1, 0), (0, 2)], constant_values=-7)}, consts={"x", "p", "c"}, opset=11,
               ref="numpy")
    pads = np.array([1, 0, 0, 2], np.int64)
    xf = randf(144, 3, 4)
    yield with_constants(Case("index_pad_edge_f32_folded", "Pad", {"x": xf, "p": pads},
                              {"y": torch.nn.functional.pad(T(xf)[None], (0, 2, 1, 0), mode="replicate")[0].numpy()},
                              attrs={"mode": "edge"}, consts={"p"}), ["x"])
    # DenseNet-style: NaN and Inf pass through, padding is the constant
    xn = x.copy()
    xn[0, 0, 0, 0] = np.nan
    xn[1, 2, 3, 4] = -np.inf
    pads = np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)
    yield Case("index_pad_nan_inf", "Pad", {"x": xn, "p": pads},
               {"y": F.pad(T(xn), onnx_pads_to_torch(pads)).numpy()}, consts={"p"})

    # Tile: Tensor.repeat
    x = randf(142, 2, 3, 4)
    for reps in ([1, 2, 3], [2, 1, 1], [1, 1, 0]):
        r = np.array(reps, np.int64)
        yield Case("index_tile_" + "x".join(map(str, reps)), "Tile", {"x": x, "r": r},
                   {"y": T(x).repeat(*reps).numpy()}, consts={"r"})
    xb = randf(143, 3, 1) > 0
    yield Case("index_tile_bool_folded", "Tile", {"b": xb, "r": np.array([2, 4], np.int64)},
               {"y": T(xb).repeat(2, 4).numpy()}, consts={"b", "r"})


def split_blocks():
    x = randf(150, 2, 7, 3)
    parts = torch.split(T(x), [2, 4, 1], dim=1)
    yield Case("index_split_input", "Split", {"x": x, "s": np.array([2, 4, 1], np.int64)},
               {f"y{i}": p.numpy() for i, p in enumerate(parts)}, attrs={"axis": 1}, consts={"s"})
    parts = torch.split(T(x), [1, 0, 2], dim=-1)   # an empty part
    yield Case("index_split_neg_axis_empty", "Split", {"x": x, "s": np.array([1, 0, 2], np.int64)},
               {f"y{i}": p.numpy() for i, p in enumerate(parts)}, attrs={"axis": -1}, consts={"s"})
    parts = torch.chunk(T(x), 2, dim=0)
    yield Case("index_split_equal", "Split", {"x": x}, {f"y{i}": p.numpy() for i, p in enumerate(parts)},
               attrs={"axis": 0})
    parts = torch.split(T(x), 3, dim=1)   # 3, 3, 1: opset 18 num_outputs, unknown to onnx 1.12's checker
    yield Case("index_split_num_outputs_opset18", "Split", {"x": x},
               {f"y{i}": p.numpy() for i, p in enumerate(parts)}, attrs={"axis": 1, "num_outputs": 3}, opset=18,
               check=False)
    parts = torch.split(T(x), [5, 2], dim=1)
    yield Case("index_split_attr_opset11", "Split", {"x": x}, {f"y{i}": p.numpy() for i, p in enumerate(parts)},
               attrs={"axis": 1, "split": [5, 2]}, opset=11)
    xi = randi(151, 6)
    yield Case("index_split_int64_folded", "Split", {"x": xi, "s": np.array([4, 2], np.int64)},
               {"a": xi[:4], "b": xi[4:]}, consts={"x", "s"}, ref="numpy")

    x = randf(152, 2, 8, 3, 2)
    yield Case("index_depth_to_space_crd", "DepthToSpace", {"x": x},
               {"y": torch.pixel_shuffle(T(x), 2).numpy()}, attrs={"blocksize": 2, "mode": "CRD"})
    yield Case("index_depth_to_space_dcr", "DepthToSpace", {"x": x}, {"y": depth_to_space(x, 2, "DCR")},
               attrs={"blocksize": 2}, ref="numpy")
    x = randf(153, 2, 3, 4, 6)
    yield Case("index_space_to_depth", "SpaceToDepth", {"x": x}, {"y": space_to_depth(x, 2)},
               attrs={"blocksize": 2}, ref="numpy")
    # pixel_unshuffle round trip through DepthToSpace(CRD): torch defines both
    x = randf(154, 1, 2, 6, 3)
    yield Case("index_space_to_depth_b3", "SpaceToDepth", {"x": x}, {"y": space_to_depth(x, 3)},
               attrs={"blocksize": 3}, ref="numpy")

    xi = randi(156, 1, 8, 2, 3)
    yield Case("index_depth_to_space_int64_folded", "DepthToSpace", {"x": xi}, {"y": depth_to_space(xi, 2, "DCR")},
               attrs={"blocksize": 2}, ref="numpy", consts={"x"})
    xb = randf(157, 1, 2, 4, 2) > 0
    yield Case("index_space_to_depth_bool_folded", "SpaceToDepth", {"x": xb}, {"y": space_to_depth(xb, 2)},
               attrs={"blocksize": 2}, ref="numpy", consts={"x"})
    x = randf(155, 3, 4, 5)
    yield Case("index_size", "Size", {"x": x}, {"y": np.array(x.size, np.int64)}, ref="numpy")


def shape_checks():
    """Ops that existed before, on what exporters write: int64 data, axes as
    inputs, negative steps, INT64_MAX ends, scalars."""
    x = randf(160, 3, 1, 4)
    yield Case("index_expand_int64_shape", "Expand", {"x": x, "s": np.array([2, 1, 5, 1], np.int64)},
               {"y": T(x).expand(2, 3, 5, 4).numpy()}, consts={"s"})
    xi = randi(161, 1, 3)
    yield Case("index_expand_int64_data_folded", "Expand", {"x": xi, "s": np.array([4, 1], np.int64)},
               {"y": np.broadcast_to(xi, (4, 3)).copy()}, consts={"x", "s"}, ref="numpy")
    val = helper.make_tensor("value", TensorProto.INT64, [1], [-3])
    yield Case("index_constant_of_shape_int64", "ConstantOfShape", {"s": np.array([2, 3], np.int64)},
               {"y": np.full((2, 3), -3, np.int64)}, attrs={"value": val}, consts={"s"}, ref="numpy")
    val = helper.make_tensor("value", TensorProto.BOOL, [1], [True])
    yield Case("index_constant_of_shape_bool", "ConstantOfShape", {"s": np.array([3, 1, 2], np.int64)},
               {"y": np.ones((3, 1, 2), np.bool_)}, attrs={"value": val}, consts={"s"}, ref="numpy")
    yield Case("index_constant_of_shape_default", "ConstantOfShape", {"s": np.array([0, 2], np.int64)},
               {"y": np.zeros((0, 2), np.float32)}, consts={"s"}, ref="numpy")
    c = randf(162, 2, 1, 3) > 0
    a, b = randi(163, 2, 4, 1), randi(164, 3)
    yield Case("index_where_int64", "Where", {"c": c, "a": a, "b": b},
               {"y": torch.where(T(c), T(a), T(b)).numpy()})
    x = randf(165, 6, 5)
    yield Case("index_slice_neg_step", "Slice",
               {"x": x, "s": np.array([-1, 4], np.int64), "e": np.array([-I64_MAX, 0], np.int64),
                "a": np.array([0, -1], np.int64), "t": np.array([-2, -3], np.int64)},
               {"y": x[::-2, 4:0:-3].copy()}, consts={"s", "e", "a", "t"}, ref="numpy")
    yield Case("index_slice_int64max_end", "Slice",
               {"x": x, "s": np.array([1], np.int64), "e": np.array([I64_MAX], np.int64),
                "a": np.array([-1], np.int64)},
               {"y": T(x)[:, 1:].numpy()}, consts={"s", "e", "a"})
    xi = randi(166, 7)
    yield Case("index_slice_int64_folded", "Slice",
               {"x": xi, "s": np.array([-3], np.int64), "e": np.array([I64_MAX], np.int64)},
               {"y": xi[-3:].copy()}, consts={"x", "s", "e"}, ref="numpy")
    x = randf(167, 3, 1, 4, 1)
    yield Case("index_squeeze_axes_input", "Squeeze", {"x": x, "a": np.array([-1, 1], np.int64)},
               {"y": T(x).squeeze(-1).squeeze(1).numpy()}, consts={"a"})
    yield Case("index_unsqueeze_axes_input", "Unsqueeze", {"x": x, "a": np.array([-1, 0], np.int64)},
               {"y": T(x).unsqueeze(0).unsqueeze(-1).numpy()}, consts={"a"})
    yield Case("index_unsqueeze_scalar_int64_folded", "Unsqueeze",
               {"x": np.array(5, np.int64), "a": np.array([0], np.int64)}, {"y": np.array([5], np.int64)},
               consts={"x", "a"}, ref="numpy")
    xi = randi(168, 4, 3)
    yield Case("index_gather_scalar_neg_int64_folded", "Gather", {"x": xi, "i": np.array(-1, np.int64)},
               {"y": xi[:, -1].copy()}, attrs={"axis": 1}, consts={"x", "i"}, ref="numpy")
    x = randf(169, 4, 3)
    idx = np.array([[2, -3], [0, -1]], np.int64)
    yield Case("index_gather_axis_neg", "Gather", {"x": x, "i": idx},
               {"y": x[:, norm_idx(idx, 3)]}, attrs={"axis": -1}, consts={"i"}, ref="numpy")
    yield Case("index_concat_int64_folded", "Concat",
               {"a": np.array([1, 2], np.int64), "b": np.array([-1], np.int64), "c": np.array([], np.int64)},
               {"y": np.array([1, 2, -1], np.int64)}, attrs={"axis": -1}, consts={"a", "b", "c"}, ref="numpy")
    # SSD and SSDlite (torchvision, COCO's 91 classes) concatenate the 90 per-class results
    # of their post-processing in one Concat: a Split into 90 and a Concat of the 90 pieces
    # in reverse order (graph.h's BF__MAX_IO, 128 inputs or outputs per node)
    x = randf(170, 2, 90)
    pieces = [f"p{i}" for i in range(90)]
    nodes = [helper.make_node("Split", ["x", "ones"], pieces, name="split90", axis=1),
             helper.make_node("Concat", pieces[::-1], ["y"], name="concat90", axis=1)]
    yield Case("index_split_concat_90", None, {"x": x, "ones": np.ones(90, np.int64)},
               {"y": torch.flip(torch.from_numpy(x), [1]).numpy()}, consts={"ones"}, nodes=nodes)


def exported_chains():
    """Small graphs in the shapes exporters write, computed at plan time from a
    runtime input's shape: a causal mask (Shape -> Gather -> Unsqueeze ->
    Concat -> ConstantOfShape -> Trilu) and positions (Shape -> Gather ->
    Range -> Unsqueeze -> Expand)."""
    x = randf(180, 2, 5, 3)
    one = numpy_helper.from_array(np.array([1.0], np.float32), "value")
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"], name="shape"),
        helper.make_node("Gather", ["shp", "one"], ["t"], name="gather_t", axis=0),
        helper.make_node("Unsqueeze", ["t", "zero1"], ["t1"], name="unsq"),
        helper.make_node("Concat", ["t1", "t1"], ["tt"], name="concat", axis=0),
        helper.make_node("ConstantOfShape", ["tt"], ["ones"], name="cos", value=one),
        helper.make_node("Trilu", ["ones"], ["mask"], name="tril", upper=0),
    ]
    yield Case("index_chain_causal_mask", None,
               {"x": x, "one": np.array(1, np.int64), "zero1": np.array([0], np.int64)},
               {"mask": torch.tril(torch.ones(5, 5)).numpy()}, consts={"one", "zero1"}, opset=14, nodes=nodes)
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"], name="shape"),
        helper.make_node("Gather", ["shp", "one"], ["t"], name="gather_t", axis=0),
        helper.make_node("Range", ["zero", "t", "one"], ["pos"], name="range"),
        helper.make_node("Unsqueeze", ["pos", "zero1"], ["pos1"], name="unsq"),
        helper.make_node("Expand", ["pos1", "shp2"], ["y"], name="expand"),
    ]
    yield Case("index_chain_positions", None,
               {"x": x, "one": np.array(1, np.int64), "zero": np.array(0, np.int64),
                "zero1": np.array([0], np.int64), "shp2": np.array([2, 1], np.int64)},
               {"y": torch.arange(5).unsqueeze(0).expand(2, 5).numpy()},
               consts={"one", "zero", "zero1", "shp2"}, nodes=nodes)


def exported(name, mod, args, names, opset=14, **kw):
    """A case whose graph is what torch.onnx.export writes for `mod` (dynamic
    batch, constants as Constant nodes), with PyTorch's outputs."""
    import io
    import onnx
    f = io.BytesIO()
    torch.onnx.export(mod, args, f, opset_version=opset, input_names=names,
                      dynamic_axes={n: {0: "batch"} for n in names})
    g = onnx.load_from_string(f.getvalue()).graph
    assert not g.initializer, "exported graphs here hold constants as nodes only"
    with torch.no_grad():
        outs = mod(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    return Case(name, None, {n: a.numpy() for n, a in zip(names, args)},
                {o.name: t.numpy() for o, t in zip(g.output, outs)}, opset=opset, nodes=list(g.node), **kw)


class _PadRollSplit(torch.nn.Module):
    """Swin's window shift (roll), a pad to whole windows, a split."""
    def forward(self, x):
        y = torch.nn.functional.pad(x, (1, 2, 0, 3))
        y = torch.roll(y, shifts=(2, -1), dims=(2, 3))
        return torch.split(y, [1, 2], dim=1)


class _GatherOneHot(torch.nn.Module):
    def forward(self, x, i):
        return torch.gather(x, 1, i), torch.nn.functional.one_hot(i, 5)


class _PixelShuffle(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.pixel_shuffle(x, 2), torch.nn.functional.pixel_unshuffle(x, 2)


class _TileTrilFlip(torch.nn.Module):
    def forward(self, x):
        return x.repeat(1, 2, 3), torch.tril(x, -1), x.flip(-1)


def exported_modules():
    g = torch.Generator().manual_seed(190)
    yield exported("index_exported_pad_roll_split", _PadRollSplit(), (torch.randn(2, 3, 4, 5, generator=g),), ["x"])
    yield exported("index_exported_gather_onehot", _GatherOneHot(),
                   (torch.randn(2, 5, generator=g), torch.randint(0, 5, (2, 3), generator=g)), ["x", "i"])
    yield exported("index_exported_pixel_shuffle", _PixelShuffle(), (torch.randn(2, 8, 4, 6, generator=g),), ["x"])
    yield exported("index_exported_tile_tril_flip", _TileTrilFlip(), (torch.randn(2, 3, 4, generator=g),), ["x"])
