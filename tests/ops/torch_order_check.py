#!/usr/bin/python3
"""--tie-order pytorch against PyTorch itself (docs/OPS.md, TopK and "Ties").

  /usr/bin/python3 tests/ops/torch_order_check.py BITFLIP WORKDIR

TopK: TopK nodes over thousands of tie-heavy rows (values drawn from a few levels,
NaNs, -0.0 beside +0.0, int64 and int32 rows; k = 1, k = n, k·64 <= n and above it;
largest 0 and 1; sorted 0 and 1), run by `bitflip eval --tie-order pytorch --outputs`:
values and indices must be torch.topk's bit for bit. With the default order (onnx) the
indices must be the spec's (ties: the lower index first), i.e. a stable sort's.
NonMaxSuppression: torchvision's coordinate trick over tied scores, more than 1000 boxes:
the kept indices in the order torchvision's eager batched_nms returns them (ascending,
then torch.sort(descending=True) of their scores), and at 1000 or fewer torchvision.ops.nms's
own order. Exits 77 when torch (or onnx) is missing.

The 112 TopK cases run as two graphs (one per row count: a TopK node and its own input
per case, their outputs side by side) and the 5 NMS cases as one, each graph once per
order: 6 bitflip processes, not 234 (a process per case per order was most of the test's
time under ASan, each start and leak scan 110-175 ms; tests/README.md, "The sixteenth
round"). Each case's rows are still compared on their own."""
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


def topk_model(path, group):
    """every case of the group in one graph (a process per case was 224 starts: under ASan
    most of the test's time), each case its own input x<i> [b, n] and its own TopK node;
    each case's k indices, cast to x's type (exact: n < 2^24), then its k values, and the
    cases side by side in the one output (a batched graph's --outputs holds the first)"""
    nodes, ins, parts, inits = [], [], [], []
    for i, (n, k, largest, sorted_, ttype) in group:
        nodes += [helper.make_node("TopK", [f"x{i}", f"k{i}"], [f"v{i}", f"i{i}"], axis=-1, largest=largest,
                                   sorted=sorted_),
                  helper.make_node("Cast", [f"i{i}"], [f"ic{i}"], to=ttype),
                  helper.make_node("Concat", [f"ic{i}", f"v{i}"], [f"iv0{i}"], axis=-1),
                  # eval reads float32 outputs: int rows as float32 (indices exact; the values are
                  # then compared as float32, the indices having said which element each is)
                  helper.make_node("Cast", [f"iv0{i}"], [f"iv{i}"], to=TensorProto.FLOAT)]
        ins.append(helper.make_tensor_value_info(f"x{i}", ttype, ["b", n]))
        inits.append(helper.make_tensor(f"k{i}", TensorProto.INT64, [1], [k]))
        parts.append(f"iv{i}")
    nodes.append(helper.make_node("Concat", parts, ["all"], axis=-1))
    width = sum(2 * k for _, (n, k, *_rest) in group)
    g = helper.make_graph(nodes, "topk", ins, [helper.make_tensor_value_info("all", TensorProto.FLOAT, ["b", width])],
                          inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def check_topk(bf, wd, rng):
    cases, rows_checked, bad = [], 0, 0
    for n in (1, 2, 3, 5, 16, 17, 40, 64, 65, 129, 300, 700, 2000):
        for k in sorted({min(n, v) for v in (1, n, max(1, n // 64), max(1, n // 64) + 1, n // 2 or 1, 17)}):
            for largest in (1, 0):
                cases.append((n, k, largest, 1 if (n + k) % 5 else 0))
    # the cases' inputs, drawn in the order (and so with the values) of a graph per case
    xs, ttypes = [], []
    for ci, (n, k, largest, sorted_) in enumerate(cases):
        kind = ci % 4      # 0, 1: float levels; 2: int64; 3: int32
        rows = 24 if n < 1000 else 8
        lv = rng.integers(1, 5)
        if kind < 2:
            x = rng.integers(0, lv, size=(rows, n)).astype(np.float32) - (lv // 2)
            x[rng.random((rows, n)) < 0.05] = np.nan
            x[x == 0] = np.where(rng.random(int((x == 0).sum())) < 0.5, -0.0, 0.0)
            ttype = TensorProto.FLOAT
        else:
            ttype, tdt = (TensorProto.INT64, np.int64) if kind == 2 else (TensorProto.INT32, np.int32)
            x = rng.integers(0, lv, size=(rows, n)).astype(tdt)
            if kind == 2:
                x[rng.random((rows, n)) < 0.1] = 2**62 + 1       # not exact in double: compared as integers
        xs.append(x)
        ttypes.append(ttype)
    # one graph (one bitflip process per order) for the cases of each row count
    groups = {}
    for ci, (n, k, largest, sorted_) in enumerate(cases):
        groups.setdefault(xs[ci].shape[0], []).append((ci, (n, k, largest, sorted_, ttypes[ci])))
    for rows, group in sorted(groups.items()):
        m, d, o = (os.path.join(wd, f"topk_rows{rows}.{e}") for e in ("onnx", "safetensors", "json"))
        topk_model(m, group)
        save_st(d, {f"x{ci}": xs[ci] for ci, _ in group})
        for order in ("pytorch", "onnx"):
            got = run(bf, m, d, order, o, float)
            out = np.array([[np.nan if v == "NaN" else v for v in row] for row in got], dtype=np.float64)
            if out.shape[0] != rows:
                sys.exit(f"TopK: {out.shape[0]} rows out of the graph of {rows}-row cases")
            col = 0
            for ci, (n, k, largest, sorted_, _) in group:
                x = xs[ci]
                part = out[:, col:col + 2 * k]
                col += 2 * k
                if order == "pytorch":
                    tv, ti = torch.topk(torch.from_numpy(x), k, dim=-1, largest=bool(largest), sorted=bool(sorted_))
                for r in range(rows):
                    gi = part[r, :k].astype(np.int64)
                    gv = part[r, k:].astype(np.float32).astype(np.float64)   # printed to 9 digits: float32 exact
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
            if col != out.shape[1]:
                sys.exit(f"TopK: {out.shape[1]} output columns, the cases account for {col}")
    print(f"TopK: {len(cases)} cases in {len(groups)} graphs, {rows_checked} rows (both orders), {bad} differ")
    return bad


def nms_model(path, nboxes):
    """one NonMaxSuppression per case in one graph (one process per order), its kept
    indices the output keep<i>"""
    nodes, ins, outs = [], [], []
    inits = [helper.make_tensor("maxo", TensorProto.INT64, [1], [2**62]),
             helper.make_tensor("iou", TensorProto.FLOAT, [1], [0.5]),
             helper.make_tensor("two", TensorProto.INT64, [1], [2]),
             helper.make_tensor("one", TensorProto.INT64, [1], [1])]
    for i, nbox in enumerate(nboxes):
        nodes += [helper.make_node("NonMaxSuppression", [f"boxes{i}", f"scores{i}", "maxo", "iou"], [f"sel{i}"]),
                  helper.make_node("Gather", [f"sel{i}", "two"], [f"g{i}"], axis=1),
                  helper.make_node("Squeeze", [f"g{i}", "one"], [f"keep{i}"])]
        ins += [helper.make_tensor_value_info(f"boxes{i}", TensorProto.FLOAT, [1, nbox, 4]),
                helper.make_tensor_value_info(f"scores{i}", TensorProto.FLOAT, [1, 1, nbox])]
        outs.append(helper.make_tensor_value_info(f"keep{i}", TensorProto.INT64, None))
    g = helper.make_graph(nodes, "nms", ins, outs, inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def check_nms(bf, wd, rng):
    try:
        import torchvision
    except ImportError:
        print("NonMaxSuppression: skipped (no torchvision)")
        return 0
    bad = 0
    configs = [(3000, 30, 1), (2400, 12, 3), (1001, 7, 2), (1000, 10, 1), (600, 6, 2)]
    tensors, wants = {}, []
    for ci, (nbox, ncls, levels) in enumerate(configs):
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
        wants.append((want, keep.tolist()))
        tensors[f"boxes{ci}"] = bfn[None].numpy()
        tensors[f"scores{ci}"] = scores[None, None].numpy()
    m, d, o = (os.path.join(wd, f"nms.{e}") for e in ("onnx", "safetensors", "json"))
    nms_model(m, [c[0] for c in configs])
    save_st(d, tensors)
    got_all = run(bf, m, d, "pytorch", o)[0]
    onnx_all = run(bf, m, d, "onnx", o)[0]
    for ci, (nbox, _, _) in enumerate(configs):
        want, onnx_want = wants[ci]
        got, onnx_got = got_all[f"keep{ci}"], onnx_all[f"keep{ci}"]
        if got != want or onnx_got != onnx_want:
            bad += 1
            print(f"NonMaxSuppression {nbox} boxes: pytorch order {'ok' if got == want else 'differs'}, "
                  f"onnx order {'ok' if onnx_got == onnx_want else 'differs'}")
    print(f"NonMaxSuppression: {len(configs)} cases in one graph, {bad} differ")
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
