#!/usr/bin/python3
"""--tie-order pytorch against PyTorch itself (docs/OPS.md, TopK and "Ties").

  /usr/bin/python3 tests/ops/torch_order_check.py BITFLIP WORKDIR

TopK: one-node graphs over thousands of tie-heavy rows (values drawn from a few levels,
NaNs, -0.0 beside +0.0, int64 and int32 rows; k = 1, k = n, k·64 <= n and above it;
largest 0 and 1; sorted 0 and 1), run by `bitflip eval --tie-order pytorch --outputs`:
values and indices must be torch.topk's bit for bit. With the default order (onnx) the
indices must be the spec's (ties: the lower index first), i.e. a stable sort's.
NonMaxSuppression: torchvision's coordinate trick over tied scores, more than 1000 boxes:
the kept indices in the order torchvision's eager batched_nms returns them (ascending,
then torch.sort(descending=True) of their scores), and at 1000 or fewer torchvision.ops.nms's
own order. Exits 77 when torch (or onnx) is missing."""
import json
import os
import struct
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import torch
    from onnx import TensorProto, helper
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)


def save_st(path, tensors):
    hdr, blobs, off = {}, [], 0
    for k, v in tensors.items():
        b = np.ascontiguousarray(v).tobytes()
        dt = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64", np.dtype(np.int32): "I32"}[v.dtype]
        hdr[k] = {"dtype": dt, "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def run(bf, model, data, order, out, parse_int=None):
    r = subprocess.run([bf, "eval", "--tie-order", order, model, data, "--outputs", out, "--json"],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"bitflip eval failed on {model}: {r.stderr[-800:]}")
    with open(out) as f:
        return json.load(f, parse_int=parse_int)   # float: "-0" keeps its sign


def topk_model(path, n, k, largest, sorted_, ttype):
    """one output per row (a batched graph's --outputs holds the first output): the k indices,
    cast to x's type (exact: n < 2^24), then the k values"""
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1, largest=largest, sorted=sorted_),
             helper.make_node("Cast", ["i"], ["ic"], to=ttype),
             helper.make_node("Concat", ["ic", "v"], ["iv0"], axis=-1),
             # eval reads float32 outputs: int rows as float32 (indices exact; the values are
             # then compared as float32, the indices having said which element each is)
             helper.make_node("Cast", ["iv0"], ["iv"], to=TensorProto.FLOAT)]
    g = helper.make_graph(nodes, "topk", [helper.make_tensor_value_info("x", ttype, ["b", n])],
                          [helper.make_tensor_value_info("iv", TensorProto.FLOAT, ["b", 2 * k])],
                          [helper.make_tensor("k", TensorProto.INT64, [1], [k])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def rows_of(out, name):
    return [np.array(r[name]).reshape(-1) for r in out] if isinstance(out, list) else None


def check_topk(bf, wd, rng):
    cases, rows_checked, bad = [], 0, 0
    for n in (1, 2, 3, 5, 16, 17, 40, 64, 65, 129, 300, 700, 2000):
        for k in sorted({min(n, v) for v in (1, n, max(1, n // 64), max(1, n // 64) + 1, n // 2 or 1, 17)}):
            for largest in (1, 0):
                cases.append((n, k, largest, 1 if (n + k) % 5 else 0))
    for ci, (n, k, largest, sorted_) in enumerate(cases):
        kind = ci % 4      # 0, 1: float levels; 2: int64; 3: int32
        rows = 24 if n < 1000 else 8
        lv = rng.integers(1, 5)
        if kind < 2:
            x = rng.integers(0, lv, size=(rows, n)).astype(np.float32) - (lv // 2)
            x[rng.random((rows, n)) < 0.05] = np.nan
            x[x == 0] = np.where(rng.random(int((x == 0).sum())) < 0.5, -0.0, 0.0)
            ttype, tdt = TensorProto.FLOAT, np.float32
        else:
            ttype, tdt = (TensorProto.INT64, np.int64) if kind == 2 else (TensorProto.INT32, np.int32)
            x = rng.integers(0, lv, size=(rows, n)).astype(tdt)
            if kind == 2:
                x[rng.random((rows, n)) < 0.1] = 2**62 + 1       # not exact in double: compared as integers
        m, d, o = (os.path.join(wd, f"topk{ci}.{e}") for e in ("onnx", "safetensors", "json"))
        topk_model(m, n, k, largest, sorted_, ttype)
        save_st(d, {"x": x})
        tv, ti = torch.topk(torch.from_numpy(x), k, dim=-1, largest=bool(largest), sorted=bool(sorted_))
        for order in ("pytorch", "onnx"):
            out = np.array([np.nan if v == "NaN" else v for v in run(bf, m, d, order, o, float)],
                           dtype=np.float64).reshape(rows, 2 * k)
            for r in range(rows):
                gi = out[r, :k].astype(np.int64)
                gv = out[r, k:].astype(np.float32).astype(np.float64)   # printed to 9 digits: float32 exact
                if order == "pytorch":
                    want_i = ti[r].numpy()
                    want_v = tv[r].numpy().astype(np.float32).astype(np.float64)
                    ok = np.array_equal(gi, want_i) and np.array_equal(np.signbit(gv), np.signbit(want_v)) and \
                        np.array_equal(gv, want_v, equal_nan=True)
                else:
                    # the spec: ties by lower index, NaN the largest (a stable sort of the keys)
                    key = x[r].astype(np.float64)
                    nan = np.isnan(key)
                    key = np.where(nan, -np.inf if largest else np.inf, -key if largest else key)
                    want_i = np.lexsort((np.arange(n), key, ~nan if largest else nan))[:k]
                    ok = np.array_equal(gi, want_i)
                rows_checked += 1
                if not ok:
                    bad += 1
                    if bad <= 5:
                        print(f"TopK n={n} k={k} largest={largest} sorted={sorted_} {x.dtype} row {r} ({order}): "
                              f"got {gi[:12].tolist()}, want {np.asarray(want_i)[:12].tolist()}")
    print(f"TopK: {len(cases)} graphs, {rows_checked} rows (both orders), {bad} differ")
    return bad


def nms_model(path, nbox):
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores", "maxo", "iou"], ["sel"]),
             helper.make_node("Gather", ["sel", "two"], ["g"], axis=1),
             helper.make_node("Squeeze", ["g", "one"], ["keep"])]
    inits = [helper.make_tensor("maxo", TensorProto.INT64, [1], [2**62]),
             helper.make_tensor("iou", TensorProto.FLOAT, [1], [0.5]),
             helper.make_tensor("two", TensorProto.INT64, [1], [2]),
             helper.make_tensor("one", TensorProto.INT64, [1], [1])]
    g = helper.make_graph(nodes, "nms", [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, nbox, 4]),
                                         helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, nbox])],
                          [helper.make_tensor_value_info("keep", TensorProto.INT64, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def check_nms(bf, wd, rng):
    try:
        import torchvision
    except ImportError:
        print("NonMaxSuppression: skipped (no torchvision)")
        return 0
    bad = 0
    for ci, (nbox, ncls, levels) in enumerate([(3000, 30, 1), (2400, 12, 3), (1001, 7, 2), (1000, 10, 1), (600, 6, 2)]):
        xy = rng.random((nbox, 2)).astype(np.float32) * 60
        wh = rng.random((nbox, 2)).astype(np.float32) * 30 + 1
        boxes = torch.from_numpy(np.concatenate([xy, xy + wh], 1))
        idxs = torch.from_numpy(rng.integers(0, ncls, nbox))
        scores = torch.from_numpy((rng.integers(0, levels, nbox) * 0.125 + 0.25).astype(np.float32))
        # the export's one NMS: boxes offset by class (torchvision's coordinate trick)
        bfn = boxes + (idxs.to(boxes) * (boxes.max() + 1))[:, None]
        keep = torchvision.ops.nms(bfn, scores, 0.5)
        if nbox * 4 > 4000:    # batched_nms's eager path past 4000 coordinates: ascending, then torch.sort
            k = keep.sort().values
            want = k[scores[k].sort(descending=True)[1]].tolist()
        else:
            want = keep.tolist()
        m, d, o = (os.path.join(wd, f"nms{ci}.{e}") for e in ("onnx", "safetensors", "json"))
        nms_model(m, nbox)
        save_st(d, {"boxes": bfn[None].numpy(), "scores": scores[None, None].numpy()})
        got = run(bf, m, d, "pytorch", o)[0]["keep"]
        onnx_got = run(bf, m, d, "onnx", o)[0]["keep"]
        if got != want or onnx_got != keep.tolist():
            bad += 1
            print(f"NonMaxSuppression {nbox} boxes: pytorch order {'ok' if got == want else 'differs'}, "
                  f"onnx order {'ok' if onnx_got == keep.tolist() else 'differs'}")
    print(f"NonMaxSuppression: 5 graphs, {bad} differ")
    return bad


def main():
    bf, wd = sys.argv[1], sys.argv[2]
    os.makedirs(wd, exist_ok=True)
    torch.set_num_threads(1)
    rng = np.random.default_rng(7)
    bad = check_topk(bf, wd, rng) + check_nms(bf, wd, rng)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
