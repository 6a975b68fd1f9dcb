"""Helpers shared by the benchmark scripts: safetensors I/O, metrics, paths.

Only numpy and the standard library: run.py imports this without importing torch.
"""
import json
import math
import os
import struct

import numpy as np

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
MODELS_DIR = os.path.join(BENCH_DIR, "models")

# safetensors dtype tag <-> numpy dtype (little endian)
_DTYPES = {
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_TAGS = {v: k for k, v in _DTYPES.items()}


def read_safetensors(path):
    """Return {name: numpy array} (C-contiguous copies) from a .safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + hlen].decode("utf-8"))
    base = 8 + hlen
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = _DTYPES[info["dtype"]]
        a, b = info["data_offsets"]
        arr = np.frombuffer(blob, dtype=dt, count=(b - a) // dt.itemsize, offset=base + a)
        out[name] = arr.reshape(info["shape"]).copy()
    return out


def write_safetensors(path, tensors, metadata=None):
    """Write {name: numpy array} as safetensors: u64 LE header length, JSON header, data.

    Tensors are laid out in the order given (dicts keep insertion order)."""
    header = {}
    chunks = []
    off = 0
    for name, arr in tensors.items():
        arr = np.asarray(arr)
        tag = _TAGS.get(arr.dtype.newbyteorder("<"))
        if tag is None:
            raise ValueError(f"{name}: dtype {arr.dtype} has no safetensors tag here")
        data = np.ascontiguousarray(arr, dtype=_DTYPES[tag]).tobytes()
        header[name] = {"dtype": tag, "shape": list(arr.shape), "data_offsets": [off, off + len(data)]}
        chunks.append(data)
        off += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)  # pad so the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for c in chunks:
            f.write(c)


def roc_auc(labels, scores):
    """Area under the ROC curve (Mann-Whitney U with average ranks for ties)."""
    y = np.asarray(labels, dtype=np.float64).reshape(-1) > 0.5
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ss = s[order]
    ranks = np.empty(s.size, dtype=np.float64)
    i = 0
    n = s.size
    # average ranks over runs of equal scores
    while i < n:
        j = i + 1
        while j < n and ss[j] == ss[i]:
            j += 1
        ranks[order[i:j]] = 0.5 * (i + j - 1) + 1.0
        i = j
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


LOGLOSS_EPS = 1e-7


def logloss(labels, probs):
    y = np.asarray(labels, dtype=np.float64).reshape(-1)
    p = np.clip(np.asarray(probs, dtype=np.float64).reshape(-1), LOGLOSS_EPS, 1.0 - LOGLOSS_EPS)
    return float(-np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p)))


def accuracy(labels, logits):
    logits = np.asarray(logits)
    pred = np.argmax(logits.reshape(logits.shape[0], -1), axis=1)
    return float(np.mean(pred == np.asarray(labels).reshape(-1)))


def task_of(labels):
    return "classification" if np.issubdtype(np.asarray(labels).dtype, np.integer) else "binary"


def metrics(task, labels, outputs):
    if task == "classification":
        return {"accuracy": accuracy(labels, outputs)}
    return {"auc": roc_auc(labels, outputs), "logloss": logloss(labels, outputs)}


def _num(x):
    if isinstance(x, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[x]
    return x


def load_golden(ref):
    """ref.json's `golden` as a float64 array (strings NaN/Infinity decoded)."""
    g = ref["golden"]
    return np.array([[_num(v) for v in row] if isinstance(row, list) else _num(row) for row in g],
                    dtype=np.float64)


def compare_golden(outputs, golden, rtol=1e-4, atol=1e-5):
    """Return (ok, max_abs_err, worst_index). A value matches when within rtol relative OR
    atol absolute; NaN/Inf must be in the same places."""
    o = np.asarray(outputs, dtype=np.float64).reshape(golden.shape[0], -1)
    g = golden.reshape(golden.shape[0], -1)
    if o.shape != g.shape:
        return False, float("inf"), None
    fin_o, fin_g = np.isfinite(o), np.isfinite(g)
    if not np.array_equal(fin_o, fin_g):
        return False, float("inf"), None
    same_nonfinite = np.all((o[~fin_g] == g[~fin_g]) | (np.isnan(o[~fin_g]) & np.isnan(g[~fin_g])))
    d = np.abs(np.where(fin_g, o, 0.0) - np.where(fin_g, g, 0.0))
    okmask = (d <= atol) | (d <= rtol * np.abs(np.where(fin_g, g, 0.0)))
    worst = int(np.argmax(d)) if d.size else None
    return bool(okmask.all() and same_nonfinite), float(d.max()) if d.size else 0.0, worst


def golden_metric(ref):
    if "golden_accuracy" in ref:
        return "accuracy", ref["golden_accuracy"]
    if "golden_auc" in ref:
        return "auc", ref["golden_auc"]
    return None, None


def default_conformance_dir():
    """../shared/conformance relative to the repo root, else tests/fixtures/conformance."""
    for d in (os.path.join(os.path.dirname(REPO_ROOT), "shared", "conformance"),
              os.path.join(REPO_ROOT, "tests", "fixtures", "conformance")):
        if os.path.isfile(os.path.join(d, "digits_mlp.onnx")):
            return d
    return os.path.join(os.path.dirname(REPO_ROOT), "shared", "conformance")


def find_model(name, dirs=None):
    """Directory holding NAME.onnx and NAME.eval.safetensors, searching `dirs` (default: the
    conformance dir, then bench/models). Raises FileNotFoundError."""
    for d in dirs or [default_conformance_dir(), MODELS_DIR]:
        if d and os.path.isfile(os.path.join(d, name + ".onnx")) and \
                os.path.isfile(os.path.join(d, name + ".eval.safetensors")):
            return d
    raise FileNotFoundError(f"model {name!r}: no {name}.onnx + {name}.eval.safetensors in "
                            f"{dirs or [default_conformance_dir(), MODELS_DIR]}")


THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def thread_env(threads, base=None):
    """Environment for a peer subprocess pinned to `threads` threads."""
    env = dict(os.environ if base is None else base)
    for k in THREAD_ENV:
        env[k] = str(threads)
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def save_results(path, meta, rows):
    """Writes a benchmark's raw results ({"meta", "rows"}) as JSON; returns the path
    relative to the repository, for the log."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1, default=str)
    return os.path.relpath(os.path.abspath(path), REPO_ROOT)
