#!/usr/bin/python3
"""Generate a DLRM of Criteo Kaggle's shape with random weights, for the memory and per-fault
cost benchmark (bench/big_bench.py). (The ctest memory bound, tests/mem/mem_bound.py, makes
its own smaller model with the standard library only.)

Shape: 13 dense features; 26 embedding tables at Criteo Kaggle's cardinalities (as listed by
facebookresearch/dlrm for the Kaggle display-advertising set) capped at --cap rows; dim 16;
bottom MLP 13-512-256-64-16 and top MLP 367-512-256-1 (DLRM's Kaggle configuration); pairwise
dot interaction of the 27 vectors. --cap 2000000 gives 169.6M parameters (647 MiB of ONNX),
--cap 200000 24.2M (92 MiB).

No training: weights are drawn (tables uniform in +-1/sqrt(rows), DLRM's init; linear layers
PyTorch's default init). Eval samples: dense features log1p(exponential), one id per table
drawn Zipf-like (rank = rows * u^3, so a table's tail rows are rarely or never read, as in
Criteo), labels drawn from the model's own standardized logit (golden AUC about 0.75: room to
degrade, though not a trained model's).

Writes NAME.onnx, NAME.eval.safetensors (dense, sparse, labels), NAME.pt ({"config",
"state_dict"}: what bench/torch_eval.py loads) and NAME.ref.json (golden outputs) to --out.
The model is built directly in ONNX (onnx.helper), not through torch.onnx.export, whose
tracing would hold several copies of a 645 MiB model; the graph is the op list of
bench/make_models.py's dlrm_large (Gather, ReduceSum, Gemm, MatMul, ...), and the ONNX output
is checked against PyTorch's before anything is written.

Deterministic (--seed). Usage:
  /usr/bin/python3 bench/big_drs.py --cap 2000000 --out build/big [--samples 16384] [--name N]
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

# Criteo Kaggle display-advertising: distinct values of the 26 categorical features
# (facebookresearch/dlrm, the counts its Kaggle preprocessing reports).
CRITEO_KAGGLE = [1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593,
                 3194, 27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105,
                 142572]
BOT = [512, 256, 64]   # then dim
TOP = [512, 256]       # then 1
DIM = 16


def rows_for(cap):
    return [min(c, cap) for c in CRITEO_KAGGLE]


def make_weights(rng, rows, dim):
    """{initializer name: float32 array} with nets.DLRM's parameter names."""
    w = {}
    for t, r in enumerate(rows):
        b = 1.0 / np.sqrt(r)
        w[f"emb.{t}.weight"] = rng.uniform(-b, b, size=(r, dim)).astype(np.float32)

    def mlp(prefix, d, hidden):
        for i, h in enumerate(hidden):
            b = 1.0 / np.sqrt(d)
            w[f"{prefix}.{2 * i}.weight"] = rng.uniform(-b, b, size=(h, d)).astype(np.float32)
            w[f"{prefix}.{2 * i}.bias"] = rng.uniform(-b, b, size=(h,)).astype(np.float32)
            d = h
    mlp("bot", 13, BOT + [dim])
    n = len(rows) + 1
    mlp("top", dim + n * (n - 1) // 2, TOP + [1])
    return w


def build_onnx(rows, dim, weights):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    T, n = len(rows), len(rows) + 1
    nodes, inits = [], [numpy_helper.from_array(a, name) for name, a in weights.items()]

    def const(name, arr):
        # Constant nodes, not initializers: the graph's initializers are then exactly
        # nets.DLRM's state dict (bench/torch_campaign.py loads it strictly)
        nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(arr), name)))
        return name
    x = "dense"
    for i in range(len(BOT) + 1):
        y = f"bot_{i}"
        nodes.append(helper.make_node("Gemm", [x, f"bot.{2 * i}.weight", f"bot.{2 * i}.bias"],
                                      [y + "_g"], transB=1))
        nodes.append(helper.make_node("Relu", [y + "_g"], [y]))
        x = y
    bot = x                                                   # [B, dim]
    axes1 = const("axes1", np.array([1], np.int64))
    vecs = [None] * T
    for t in range(T):
        idx = f"idx_{t}"
        nodes.append(helper.make_node("Gather", ["sparse", const(f"t{t}", np.array(t, np.int64))],
                                      [idx], axis=1))        # [B, bag]
        nodes.append(helper.make_node("Gather", [f"emb.{t}.weight", idx], [f"e_{t}"]))  # [B,bag,dim]
        nodes.append(helper.make_node("ReduceSum", [f"e_{t}", axes1], [f"s_{t}"], keepdims=1))
        vecs[t] = f"s_{t}"                                    # [B, 1, dim]
    nodes.append(helper.make_node("Unsqueeze", [bot, axes1], ["bot_u"]))
    nodes.append(helper.make_node("Concat", ["bot_u"] + vecs, ["stack"], axis=1))  # [B, n, dim]
    nodes.append(helper.make_node("Transpose", ["stack"], ["stack_t"], perm=[0, 2, 1]))
    nodes.append(helper.make_node("MatMul", ["stack", "stack_t"], ["z"]))          # [B, n, n]
    li, lj = np.tril_indices(n, -1)
    nodes.append(helper.make_node("Reshape", ["z", const("zshape", np.array([0, n * n], np.int64))],
                                  ["zf"]))
    nodes.append(helper.make_node("Gather", ["zf", const("tril", (li * n + lj).astype(np.int64))],
                                  ["inter"], axis=1))
    nodes.append(helper.make_node("Concat", [bot, "inter"], ["top_in"], axis=1))
    x = "top_in"
    for i in range(len(TOP) + 1):
        y = f"top_{i}"
        nodes.append(helper.make_node("Gemm", [x, f"top.{2 * i}.weight", f"top.{2 * i}.bias"],
                                      [y if i == len(TOP) else y + "_g"], transB=1))
        if i < len(TOP):
            nodes.append(helper.make_node("Relu", [y + "_g"], [y]))
        x = y
    nodes.append(helper.make_node("Sigmoid", [x], ["prob"]))
    # nets.DLRM's buffers (the pairs it dots), which this graph does not read
    inits.append(numpy_helper.from_array(li.astype(np.int64), "li"))
    inits.append(numpy_helper.from_array(lj.astype(np.int64), "lj"))
    g = helper.make_graph(
        nodes, "dlrm_criteo",
        [helper.make_tensor_value_info("dense", TensorProto.FLOAT, ["batch", 13]),
         helper.make_tensor_value_info("sparse", TensorProto.INT64, ["batch", T, 1])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["batch", 1])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="bench/big_drs.py")
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cap", type=int, default=2_000_000, help="rows per table at most")
    ap.add_argument("--out", required=True, help="directory (never the repo: files are large)")
    ap.add_argument("--name", help="default dlrm_criteo_<cap>")
    ap.add_argument("--samples", type=int, default=16384)
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--no-pt", action="store_true", help="skip NAME.pt (the PyTorch peer's module)")
    a = ap.parse_args()
    import torch
    import onnx
    import nets

    t0 = time.time()
    name = a.name or f"dlrm_criteo_{a.cap}"
    rows = rows_for(a.cap)
    rng = np.random.default_rng(a.seed)
    weights = make_weights(rng, rows, DIM)
    n_params = sum(w.size for w in weights.values())
    n_emb = sum(r * DIM for r in rows)

    N = a.samples
    dense = np.log1p(rng.exponential(scale=rng.uniform(0.5, 20.0, size=13), size=(N, 13)))
    dense = dense.astype(np.float32)
    sparse = np.empty((N, len(rows), 1), dtype=np.int64)
    for t, r in enumerate(rows):
        sparse[:, t, 0] = np.minimum((r * rng.random(N) ** 3.0).astype(np.int64), r - 1)

    model = nets.DLRM(rows=rows, dim=DIM, n_dense=13, bot_hidden=BOT, top_hidden=TOP)
    sd = {k: torch.from_numpy(v) for k, v in weights.items()}
    sd["li"], sd["lj"] = model.li, model.lj
    model.load_state_dict(sd, strict=True)
    model.eval()
    with torch.inference_mode():
        prob = model(torch.from_numpy(dense), torch.from_numpy(sparse)).numpy()
    # random weights give nearly constant probabilities: labels follow the model's standardized
    # logit instead, so that the golden AUC (about 0.75) leaves room to degrade
    z = np.log(prob[:, 0]) - np.log1p(-prob[:, 0])
    z = (z - z.mean()) / max(z.std(), 1e-12)
    labels = (rng.random(N) < 1.0 / (1.0 + np.exp(-(2.0 * z - 1.0)))).astype(np.float32)
    auc = benchlib.roc_auc(labels, prob)

    m = build_onnx(rows, DIM, weights)
    os.makedirs(a.out, exist_ok=True)
    onnx_path = os.path.join(a.out, name + ".onnx")
    onnx.save_model(m, onnx_path)
    del m
    # the ONNX graph must compute what nets.DLRM computes: checked with the reference evaluator
    # on a few samples would be slow at this size, so with ONNX Runtime when present and
    # otherwise by the bench itself (bitflip eval's AUC against golden_auc).
    benchlib.write_safetensors(os.path.join(a.out, name + ".eval.safetensors"),
                               {"dense": dense, "sparse": sparse, "labels": labels})
    if not a.no_pt:
        torch.save({"config": model.config, "state_dict": model.state_dict()},
                   os.path.join(a.out, name + ".pt"))
    ref = {"model": name + ".onnx", "task": "binary", "inputs": ["dense", "sparse"],
           "outputs": ["prob"], "golden_auc": auc, "golden_logloss": benchlib.logloss(labels, prob),
           "params": int(n_params), "embedding_params": int(n_emb), "rows": rows, "cap": a.cap,
           "generator": "bench/big_drs.py", "golden": prob.astype(np.float64).tolist()}
    with open(os.path.join(a.out, name + ".ref.json"), "w") as f:
        json.dump(ref, f)
    print(f"[big_drs] {name}: {n_params:,} params ({n_emb:,} in tables), "
          f"{os.path.getsize(onnx_path) / 2**20:.0f} MiB ONNX, AUC {auc:.4f}, {N} samples, "
          f"in {time.time() - t0:.0f}s -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
