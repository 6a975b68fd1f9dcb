#!/usr/bin/python3
"""Builds the DRS zoo: a synthetic Criteo-shaped click log, the five models trained on it
in PyTorch and exported to ONNX, and the eval set, for the DRS study (docs/STUDY.md).

    /usr/bin/python3 study/drs/make_zoo.py [--out build/study/drs/zoo] [--cap 200000]
        [--dim 16] [--train 2000000] [--eval 16384] [--models dlrm,dcn_v2,deepfm,wide_deep,fm]
        [--zipf 1.1] [--scale 0.6] [--epochs 1] [--batch 2048] [--seed 1] [--threads 1]

Writes into --out (never into git: a model is 90 MiB at the default cap):

    NAME.onnx              the trained model, opset 13, dynamic batch, inputs dense
                           [B,13] float32 and sparse [B,26] int64, output prob [B]
    eval.safetensors       dense, sparse, labels (binary task: bitflip reports AUC)
    NAME.ref.npy           PyTorch's outputs on the eval set (float32 [N])
    teacher.npz            the planted teacher's parameters (synth.py)
    teacher_logit.npy      the teacher's logit per eval sample
    manifest.json          cap, rows per table, and per model: parameters, golden AUC in
                           PyTorch, training time and ONNX size; the teacher's AUC

Models that --out already holds, built with the same settings, are kept (--force
rebuilds them); the log is drawn again only if a model is missing.

The log's shape and the teacher are described in synth.py, the models in models.py.
The training set is drawn in memory and never written (2M samples: 450 MiB).  Training:
one pass (--epochs), mini-batches of --batch, SparseAdam on the tables (at the rates of
models.TABLE_LR) and Adam on the rest, binary cross-entropy; a run is deterministic for a
seed and thread count.  The export follows docs/EXPORT.md: torch.onnx.export, opset 13,
do_constant_folding, a dynamic batch axis.  --cap sets the tables' rows (Criteo Kaggle's
cardinalities capped),
--cap 0 means uncapped (33.8M rows: the ONNX file would pass protobuf's 2 GiB limit at
dim 16; docs/STUDY.md says how to run that scale).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import criteo  # noqa: E402
import synth  # noqa: E402
# the eval-set writer of the project's Python package (clients/python), not installed here
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from bitflip.safetensors import write_safetensors  # noqa: E402


def log(msg):
    print(f"[make_zoo] {msg}", file=sys.stderr, flush=True)


def atomic(path, write):
    """write(tmp) then rename over PATH: a campaign reading PATH meanwhile (run_study.py on
    the models already built) sees the old file or the new one, never half of one."""
    tmp = path + ".tmp"
    write(tmp)
    os.replace(tmp, path)


def to_file(path, mode, fn):
    with open(path, mode) as f:
        fn(f)


def table_lrs(model, name):
    """{table parameter name: SparseAdam's rate} (models.TABLE_LR)."""
    import models
    return {n: models.table_lr(name, n.split(".", 1)[0]) for n, _ in model.named_parameters()
            if _is_table(model, n)}


def train(model, name, data, epochs, batch, seed):
    import torch
    dense, sparse, labels = (torch.from_numpy(a) for a in data)
    lrs = table_lrs(model, name)
    groups = {}
    for n, p in model.named_parameters():
        if n in lrs:
            groups.setdefault(lrs[n], []).append(p)
    de = [p for n, p in model.named_parameters() if n not in lrs]
    opts = [torch.optim.SparseAdam([{"params": ps, "lr": lr} for lr, ps in sorted(groups.items())]),
            torch.optim.Adam(de, lr=1e-3)]
    lossf = torch.nn.BCELoss()
    g = torch.Generator().manual_seed(seed)
    model.train()
    n = len(labels)
    for ep in range(epochs):
        order = torch.randperm(n, generator=g)
        tot = 0.0
        for k, s in enumerate(range(0, n, batch)):
            idx = order[s:s + batch]
            for o in opts:
                o.zero_grad()
            p = model(dense[idx], sparse[idx]).clamp(1e-7, 1 - 1e-7)
            loss = lossf(p, labels[idx])
            loss.backward()
            for o in opts:
                o.step()
            tot += float(loss) * len(idx)
        log(f"  epoch {ep + 1}: train log loss {tot / n:.4f}")
    model.eval()


def _is_table(model, name):
    import torch
    mod = model.get_submodule(name.rsplit(".", 1)[0])
    return isinstance(mod, (torch.nn.Embedding, torch.nn.EmbeddingBag))


def _part_lrs(name):
    """Model NAME's table rates as the manifest records them: {"default": rate, part: rate}."""
    import models
    return dict({"default": models.DEFAULT_TABLE_LR}, **models.TABLE_LR.get(name, {}))


def predict(model, dense, sparse, batch=4096):
    import torch
    out = []
    with torch.no_grad():
        for s in range(0, len(dense), batch):
            out.append(model(torch.from_numpy(dense[s:s + batch]), torch.from_numpy(sparse[s:s + batch])))
    return torch.cat(out).numpy().astype(np.float32)


def export(model, dense, sparse, path):
    import torch
    args = (torch.from_numpy(dense[:2]), torch.from_numpy(sparse[:2]))
    torch.onnx.export(model, args, path, opset_version=13, input_names=["dense", "sparse"],
                      output_names=["prob"], do_constant_folding=True,
                      dynamic_axes={"dense": {0: "batch"}, "sparse": {0: "batch"}, "prob": {0: "batch"}})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="build/study/drs/zoo")
    ap.add_argument("--cap", type=int, default=criteo.DEFAULT_CAP, help="rows per table at most (0: uncapped)")
    ap.add_argument("--dim", type=int, default=16, help="embedding dimension")
    ap.add_argument("--train", type=int, default=2_000_000, help="training samples")
    ap.add_argument("--eval", type=int, default=16384, help="eval samples")
    ap.add_argument("--models", default=",".join(["dlrm", "dcn_v2", "deepfm", "wide_deep", "fm"]))
    ap.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent of the id distribution")
    ap.add_argument("--scale", type=float, default=0.6, help="teacher logit scale (sets the Bayes AUC)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--force", action="store_true",
                    help="rebuild models that --out already holds with the same settings")
    ap.add_argument("--threads", type=int, default=1,
                    help="PyTorch threads (1: on a shared machine, 2 threads ran 6x slower than 1)")
    a = ap.parse_args(argv)
    for k in ("dim", "train", "eval", "epochs", "batch", "threads"):
        if getattr(a, k) < 1:
            ap.error(f"--{k} must be at least 1, got {getattr(a, k)}")
    if a.cap < 0:
        ap.error(f"--cap must be 0 (uncapped) or more, got {a.cap}")
    if a.zipf <= 0 or a.scale <= 0:
        ap.error("--zipf and --scale must be positive")
    try:
        import torch
    except ImportError:
        print("make_zoo: PyTorch is missing: install Debian's python3-torch "
              "(scripts/install-deps.sh --bench) and run with /usr/bin/python3", file=sys.stderr)
        return 2
    import models
    names = [m for m in a.models.split(",") if m]
    for m in names:
        if m not in models.ZOO:
            ap.error(f"--models: unknown model {m!r}; known: {', '.join(models.ZOO)}")
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    rows = criteo.table_rows(a.cap or None)
    manifest_path = os.path.join(a.out, "manifest.json")
    settings = {"cap": a.cap, "dim": a.dim, "zipf": a.zipf, "scale": a.scale, "seed": a.seed,
                "train_samples": a.train, "eval_samples": a.eval, "epochs": a.epochs, "batch": a.batch}
    old = {}
    if os.path.exists(manifest_path) and not a.force:
        with open(manifest_path) as f:
            old = json.load(f)
        if any(old.get(k) != v for k, v in settings.items()):
            old = {}
    if old:   # a model trained at other table rates (models.TABLE_LR) is rebuilt
        old["models"] = {m: v for m, v in old.get("models", {}).items()
                         if v.get("table_lr") == _part_lrs(m)}
    if old and all(m in old.get("models", {}) and os.path.exists(os.path.join(a.out, f"{m}.onnx"))
                   for m in names):
        log(f"{manifest_path}: {', '.join(names)} already built with these settings (--force rebuilds)")
        return 0
    t0 = time.time()
    teacher = synth.Teacher(rows, a.seed, zipf=a.zipf, scale=a.scale)
    train_set = teacher.draw(a.seed * 2 + 1, a.train)[:3]
    ev_dense, ev_sparse, ev_labels, ev_logit = teacher.draw(a.seed * 2 + 2, a.eval)
    log(f"log drawn: {a.train} training and {a.eval} eval samples, click rate "
        f"{train_set[2].mean():.3f}, {time.time() - t0:.1f} s")
    atomic(os.path.join(a.out, "eval.safetensors"), lambda p: write_safetensors(
        p, {"dense": ev_dense, "sparse": ev_sparse, "labels": ev_labels}))
    atomic(os.path.join(a.out, "teacher.npz"), lambda p: to_file(p, "wb", teacher.save))
    atomic(os.path.join(a.out, "teacher_logit.npy"), lambda p: to_file(p, "wb", lambda f: np.save(f, ev_logit)))
    teacher_auc = synth.auc(ev_labels, ev_logit)
    log(f"teacher AUC on the eval set: {teacher_auc:.4f}")
    manifest = dict(settings, table_rows=rows, tables=criteo.TABLE_NAMES, threads=a.threads,
                    click_rate_eval=float(ev_labels.mean()), teacher_auc=teacher_auc,
                    models=dict(old.get("models", {})))   # keeps models of an earlier --models run
    for name in names:
        if name in manifest["models"] and os.path.exists(os.path.join(a.out, f"{name}.onnx")):
            log(f"{name}: kept (built with these settings; --force rebuilds)")
            continue
        torch.manual_seed(a.seed)
        model = models.ZOO[name](rows, a.dim)
        params = sum(p.numel() for p in model.parameters())
        t1 = time.time()
        train(model, name, train_set, a.epochs, a.batch, a.seed)
        secs = time.time() - t1
        ref = predict(model, ev_dense, ev_sparse)
        atomic(os.path.join(a.out, f"{name}.ref.npy"), lambda p: to_file(p, "wb", lambda f: np.save(f, ref)))
        path = os.path.join(a.out, f"{name}.onnx")
        atomic(path, lambda p: export(model, ev_dense, ev_sparse, p))
        golden = synth.auc(ev_labels, ref)
        log(f"{name}: {params:,} parameters, trained in {secs:.0f} s, golden AUC {golden:.4f}, "
            f"{os.path.getsize(path) / 2**20:.1f} MiB of ONNX")
        manifest["models"][name] = {"onnx": f"{name}.onnx", "parameters": params,
                                    "table_parameters": sum(p.numel() for n, p in model.named_parameters()
                                                            if _is_table(model, n)),
                                    "table_lr": _part_lrs(name),
                                    "golden_auc_torch": golden, "train_seconds": round(secs, 1),
                                    "onnx_bytes": os.path.getsize(path)}
        atomic(manifest_path, lambda p: to_file(p, "w", lambda f: json.dump(manifest, f, indent=1)))
    log(f"done in {time.time() - t0:.0f} s: {manifest_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
