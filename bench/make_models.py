#!/usr/bin/python3
"""Generate the benchmark-only models into bench/models/ (gitignored: they exceed 2 MiB).

dlrm_large: the dlrm_small architecture (see /work/shared/conformance/dlrm_small.onnx) scaled
up: 8 embedding tables, 70,000 rows x dim 16 = 1,120,000 embedding parameters; bottom MLP
13-256-64-16, pairwise dot interaction of 9 vectors (36 pairs), top MLP 52-256-128-1, sigmoid.
Trained for one epoch on 262,144 synthetic click data from a fixed random teacher (so its AUC means
something), then exported like the conformance set:
torch.onnx.export(opset_version=13, do_constant_folding=True, dynamic batch axis).

Writes, per model NAME:
  NAME.onnx               the model
  NAME.eval.safetensors   eval set: one tensor per graph input + `labels` (float32 0/1)
  NAME.pt                 {"config": ..., "state_dict": ...} for the torch peer (same module)
  NAME.ref.json           like the conformance NAME.ref.json: task, inputs, outputs,
                          golden_auc, golden (PyTorch's outputs on the eval set), params
Deterministic (fixed seeds). Usage: /usr/bin/python3 bench/make_models.py [--force] [--out DIR]
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ALLOWED_OPS = {"Gemm", "MatMul", "Relu", "Sigmoid", "Gather", "ReduceSum", "Concat", "Transpose",
               "Reshape", "Flatten", "Unsqueeze", "Shape", "Constant", "Add", "Mul"}

DLRM_LARGE = dict(
    rows=[30000, 15000, 10000, 6000, 4000, 2500, 1500, 1000],  # 70,000 rows
    dim=16, n_dense=13, bot_hidden=[256, 64], top_hidden=[256, 128],
)
BAG = 2            # indices per table per sample, like dlrm_small's sparse [B, 8, 2]
N_TRAIN = 262144
N_EVAL = 8192
EPOCHS = 1           # more overfits: 1.1M embedding params vs 262k samples
SEED = 20240613


def synth_data(rng, n, rows, teacher):
    """Synthetic CTR-like data: heavy-tailed dense features, Zipf-ish categorical indices with
    the hot rows scattered over each table, labels drawn from a fixed logistic teacher."""
    dense = np.log1p(rng.exponential(scale=teacher["dense_scale"], size=(n, 13))).astype(np.float32)
    sparse = np.empty((n, len(rows), BAG), dtype=np.int64)
    for t, r in enumerate(rows):
        u = rng.random((n, BAG))
        ranks = np.minimum((r * u ** 3.0).astype(np.int64), r - 1)  # heavy head
        sparse[:, t, :] = teacher["perm"][t][ranks]
    logit = (dense - dense.mean(0)) @ teacher["w_dense"]
    for t in range(len(rows)):
        logit += teacher["row_effect"][t][sparse[:, t, :]].sum(1)
    # one pairwise interaction: feature table 0 x table 1 via low-rank factors
    logit += (teacher["f0"][sparse[:, 0, 0]] * teacher["f1"][sparse[:, 1, 0]]).sum(1)
    logit += teacher["bias"]
    p = 1.0 / (1.0 + np.exp(-logit))
    labels = (rng.random(n) < p).astype(np.float32)
    return dense, sparse, labels


def make_teacher(rng, rows):
    return {
        "dense_scale": rng.uniform(0.5, 20.0, size=13),
        "perm": [rng.permutation(r) for r in rows],
        "w_dense": rng.normal(0, 0.35, size=13),
        "row_effect": [rng.normal(0, 0.45, size=r) for r in rows],
        "f0": rng.normal(0, 0.6, size=(rows[0], 4)),
        "f1": rng.normal(0, 0.6, size=(rows[1], 4)),
        "bias": -1.0,
    }


def make_dlrm_large(out_dir, name="dlrm_large"):
    import torch
    import onnx
    import nets

    t0 = time.time()
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    cfg = DLRM_LARGE
    teacher = make_teacher(rng, cfg["rows"])
    tr_dense, tr_sparse, tr_y = synth_data(rng, N_TRAIN, cfg["rows"], teacher)
    ev_dense, ev_sparse, ev_y = synth_data(rng, N_EVAL, cfg["rows"], teacher)

    model = nets.DLRM(**cfg)
    with torch.no_grad():  # DLRM-style init: uniform(+-1/sqrt(rows)) tables
        for e, r in zip(model.emb, cfg["rows"]):
            e.weight.uniform_(-1.0 / np.sqrt(r), 1.0 / np.sqrt(r))
    n_emb = sum(e.weight.numel() for e in model.emb)
    n_params = sum(p.numel() for p in model.parameters())
    assert n_emb >= 1_000_000, n_emb

    # train briefly (full-batch Adam would be slow; minibatch 512)
    torch.set_num_threads(os.cpu_count() or 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    lossf = torch.nn.BCELoss()
    X_d, X_s, Y = (torch.from_numpy(tr_dense), torch.from_numpy(tr_sparse),
                   torch.from_numpy(tr_y).unsqueeze(1))
    g = torch.Generator().manual_seed(SEED)
    model.train()
    for ep in range(EPOCHS):
        perm = torch.randperm(N_TRAIN, generator=g)
        tot = 0.0
        for i in range(0, N_TRAIN, 512):
            idx = perm[i:i + 512]
            opt.zero_grad()
            loss = lossf(model(X_d[idx], X_s[idx]), Y[idx])
            loss.backward()
            opt.step()
            tot += loss.item() * idx.numel()
        print(f"[make_models] {name} epoch {ep + 1}/{EPOCHS}: train logloss {tot / N_TRAIN:.4f}",
              file=sys.stderr)
    model.eval()

    with torch.inference_mode():
        golden = model(torch.from_numpy(ev_dense), torch.from_numpy(ev_sparse)).numpy()
    auc = benchlib.roc_auc(ev_y, golden)
    ll = benchlib.logloss(ev_y, golden)
    print(f"[make_models] {name}: eval AUC {auc:.4f} logloss {ll:.4f} "
          f"({n_params} params, {n_emb} in embeddings)", file=sys.stderr)

    os.makedirs(out_dir, exist_ok=True)
    onnx_path = os.path.join(out_dir, name + ".onnx")
    torch.onnx.export(model, (torch.from_numpy(ev_dense[:2]), torch.from_numpy(ev_sparse[:2])),
                      onnx_path, opset_version=13, do_constant_folding=True,
                      input_names=["dense", "sparse"], output_names=["prob"],
                      dynamic_axes={"dense": {0: "batch"}, "sparse": {0: "batch"},
                                    "prob": {0: "batch"}})
    m = onnx.load(onnx_path)
    onnx.checker.check_model(m)
    ops = sorted({n.op_type for n in m.graph.node})
    bad = set(ops) - ALLOWED_OPS
    if bad:
        raise SystemExit(f"[make_models] {name}: export used ops outside the allowed set: {sorted(bad)}")

    benchlib.write_safetensors(os.path.join(out_dir, name + ".eval.safetensors"),
                               {"dense": ev_dense, "sparse": ev_sparse, "labels": ev_y})
    torch.save({"config": model.config, "state_dict": model.state_dict()},
               os.path.join(out_dir, name + ".pt"))
    ref = {"model": name + ".onnx", "task": "binary", "inputs": ["dense", "sparse"],
           "outputs": ["prob"], "golden_auc": auc, "golden_logloss": ll, "onnx_ops": ops,
           "params": n_params, "embedding_params": n_emb, "generator": "bench/make_models.py",
           "golden": golden.astype(np.float64).tolist()}
    with open(os.path.join(out_dir, name + ".ref.json"), "w") as f:
        json.dump(ref, f)
    print(f"[make_models] wrote {name}.{{onnx,eval.safetensors,pt,ref.json}} to {out_dir} "
          f"in {time.time() - t0:.1f}s", file=sys.stderr)


MODELS = {"dlrm_large": make_dlrm_large}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=benchlib.MODELS_DIR)
    ap.add_argument("--force", action="store_true", help="regenerate even if present")
    ap.add_argument("models", nargs="*", default=list(MODELS))
    a = ap.parse_args()
    for name in a.models:
        files = [os.path.join(a.out, name + s) for s in (".onnx", ".eval.safetensors", ".pt", ".ref.json")]
        if not a.force and all(os.path.exists(f) for f in files):
            print(f"[make_models] {name}: present in {a.out} (use --force to regenerate)", file=sys.stderr)
            continue
        MODELS[name](a.out, name)


if __name__ == "__main__":
    main()
