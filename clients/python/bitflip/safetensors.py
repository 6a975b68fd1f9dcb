"""Eval sets in safetensors, written and read by hand.

Debian has no safetensors package, and the format is small: an 8-byte
little-endian header length, a JSON header ``{name: {dtype, shape,
data_offsets}}``, then the raw little-endian data. bitflip reads one tensor per
graph input (named like the input, samples on dim 0) plus ``labels``: int64
class ids for classification, float32 0/1 for binary tasks (docs/GUIDE.md).
"""
import json
import os
import struct

from .errors import BitflipError, need

# numpy dtype name -> safetensors dtype; the kinds bitflip reads (core/src/model/dataset.c)
_ST_DTYPE = {"float32": "F32", "float16": "F16", "int64": "I64", "int32": "I32", "uint8": "U8"}
# what other numpy dtypes are stored as
_WIDEN = {"float64": "float32", "bool": "uint8", "int8": "int32", "int16": "int32", "uint16": "int32",
          "uint32": "int64"}
_NP_DTYPE = {"F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "U8": "u1", "F64": "<f8", "I8": "i1",
             "I16": "<i2", "BOOL": "u1", "BF16": "<u2"}


def to_numpy(x, what="a tensor"):
    """A numpy array from a torch tensor, a numpy array or a (nested) list."""
    np = need("numpy", "writing an eval set")
    if hasattr(x, "detach") and hasattr(x, "cpu"):      # a torch tensor, without importing torch
        t = x.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()
        return t.numpy()
    try:
        return np.asarray(x)
    except Exception as e:  # noqa: BLE001 - numpy raises many kinds
        raise BitflipError(f"{what} is a {type(x).__name__}, not an array or tensor: {e}") from e


def write_safetensors(path, tensors, *, sort_keys=False):
    """Writes ``{name: array}`` to ``path`` (atomically: a temp file, then a rename).

    The data is in the order given; so is the header, unless ``sort_keys``
    (its names, and each tensor's fields, sorted: the bytes ``json.dumps``
    writes with ``sort_keys=True``, as files made that way must stay)."""
    np = need("numpy", "writing safetensors")
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        a = to_numpy(arr, f"tensor {name!r}")
        kind = _WIDEN.get(a.dtype.name, a.dtype.name)
        if kind not in _ST_DTYPE:
            raise BitflipError(f"tensor {name!r} has dtype {a.dtype.name}; eval sets take "
                               "float32, float16, int64, int32 or uint8 (convert it first)")
        a = np.ascontiguousarray(a.astype(np.dtype(kind).newbyteorder("<"), copy=False))
        raw = a.tobytes()
        header[name] = {"dtype": _ST_DTYPE[kind], "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":"), sort_keys=sort_keys).encode()
    h += b" " * (-len(h) % 8)     # the format pads the header with spaces to 8 bytes
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
    return path


def read_safetensors(path):
    """Reads a safetensors file into ``{name: numpy array}`` (BF16 comes back as float32)."""
    np = need("numpy", "reading safetensors")
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise BitflipError(f"{path}: {len(data)} bytes, too short for a safetensors file (8-byte header length first)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise BitflipError(f"{path}: the header says {n} bytes but the file has {len(data) - 8} after the length")
    try:
        header = json.loads(data[8:8 + n])
    except ValueError as e:
        raise BitflipError(f"{path}: the header is not JSON: {e}") from e
    if not isinstance(header, dict):
        raise BitflipError(f"{path}: the header is not a JSON object")
    out, base = {}, 8 + n
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(t, dict) or t.get("dtype") not in _NP_DTYPE:
            raise BitflipError(f"{path}: tensor {name!r} has no dtype this reader knows ({_NP_DTYPE.keys()})")
        shape, offs = t.get("shape"), t.get("data_offsets")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)
                and isinstance(offs, list) and len(offs) == 2 and all(isinstance(o, int) for o in offs)):
            raise BitflipError(f"{path}: tensor {name!r}: shape and data_offsets must be lists of integers")
        lo, hi = offs
        count = 1
        for d in shape:
            count *= d
        size = count * np.dtype(_NP_DTYPE[t["dtype"]]).itemsize
        if not 0 <= lo <= hi <= len(data) - base or hi - lo != size:
            raise BitflipError(f"{path}: tensor {name!r}: bytes {lo}..{hi} do not hold {shape} of {t['dtype']} "
                               f"({size} bytes) within the {len(data) - base} data bytes")
        a = np.frombuffer(data[base + lo:base + hi], dtype=_NP_DTYPE[t["dtype"]]).reshape(shape)
        if t["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.copy()
    return out


def _is_batches(x):
    # a DataLoader (or any iterable of batches), told apart from arrays and containers
    return not hasattr(x, "shape") and not isinstance(x, (dict, list, tuple, str, bytes)) and hasattr(x, "__iter__")


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def collect_batches(loader, max_samples=None):
    """Concatenates a DataLoader's batches: ``(inputs, labels)`` or inputs alone, inputs
    one tensor, a tuple of tensors, or a dict. A batch of two tensors is read as
    ``(inputs, labels)``: a two-input model's batches are ``((x1, x2), labels)``.
    Returns ``(inputs, labels or None)``."""
    np = need("numpy", "reading a DataLoader")
    parts, labels, keys, count = None, [], None, 0
    for batch in loader:
        x, y = batch, None
        if isinstance(batch, (list, tuple)) and len(batch) == 2 and not isinstance(batch[0], (int, float)):
            x, y = batch
        if isinstance(x, dict):
            keys = keys or list(x)
            x = [x[k] for k in keys]
        xs = [to_numpy(v, "a DataLoader batch") for v in _as_list(x)]
        if parts is None:
            parts = [[] for _ in xs]
        if len(xs) != len(parts):
            raise BitflipError(f"the DataLoader's batches changed shape: {len(parts)} inputs, then {len(xs)}")
        for p, v in zip(parts, xs):
            p.append(v)
        if y is not None:
            labels.append(to_numpy(y, "a DataLoader batch's labels"))
        count += len(xs[0])
        if max_samples and count >= max_samples:
            break
    if parts is None:
        raise BitflipError("the DataLoader gave no batches")
    xs = [np.concatenate(p)[:max_samples] if max_samples else np.concatenate(p) for p in parts]
    lab = None
    if labels:
        lab = np.concatenate(labels)
        lab = lab[:max_samples] if max_samples else lab
    if keys:
        return dict(zip(keys, xs)), lab
    return (xs[0] if len(xs) == 1 else tuple(xs)), lab


def normalize_inputs(inputs, input_names=None):
    """``{graph input name: numpy array}`` from one array, a tuple or list of them, or a dict."""
    if isinstance(inputs, dict):
        arrays = {k: to_numpy(v, f"input {k!r}") for k, v in inputs.items()}
        if input_names and list(arrays) != list(input_names):
            missing = [n for n in input_names if n not in arrays]
            if missing:
                raise BitflipError(f"the eval inputs lack {missing} (the model's inputs are {list(input_names)})")
            arrays = {n: arrays[n] for n in input_names}
        return arrays
    xs = [to_numpy(v, "an eval input") for v in _as_list(inputs)]
    names = list(input_names) if input_names else (["input"] if len(xs) == 1 else [f"input{i}" for i in range(len(xs))])
    if len(names) != len(xs):
        raise BitflipError(f"{len(xs)} eval input tensors for {len(names)} input names {names}")
    return dict(zip(names, xs))


def normalize_labels(labels, n):
    """Labels as bitflip reads them: integer class ids as int64, 0/1 scores as float32."""
    np = need("numpy", "writing labels")
    y = to_numpy(labels, "labels")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise BitflipError(f"labels have shape {list(y.shape)}; bitflip wants one per sample ([{n}]): class ids "
                           "(int64) or 0/1 targets (float32)")
    if len(y) != n:
        raise BitflipError(f"{len(y)} labels for {n} samples: give one label per sample")
    if y.dtype.kind in "iub":
        return y.astype(np.int64) if y.dtype.kind != "b" else y.astype(np.float32)
    return y.astype(np.float32)


def save_eval_set(path, inputs, labels=None, *, input_names=None, max_samples=None):
    """Writes an eval set for bitflip: one tensor per graph input plus ``labels``.

    ``inputs`` is a tensor or array (one graph input), a tuple or list (several, in
    the model's input order), a dict ``{input name: tensor}``, or a DataLoader whose
    batches are ``(inputs, labels)`` (or inputs alone). ``labels`` holds int class
    ids (classification: accuracy) or 0/1 floats (binary: AUC, log loss).
    ``input_names`` must match the ONNX model's inputs (``bitflip.export`` uses the
    names it exported with). A language model's labels, int [N, T] (the next token
    at each position, -100 where none), are written as such when an integer input
    (its token ids) has the same shape [N, T]; labels [N, T] without one are
    refused with a pointer to ``save_lm_eval_set``. Returns the path.
    """
    if _is_batches(inputs):
        inputs, loader_labels = collect_batches(inputs, max_samples)
        if loader_labels is not None:
            if labels is not None:
                raise BitflipError("labels given twice: the DataLoader yields (inputs, labels) and labels= is set; "
                                   "drop one")
            labels = loader_labels
    arrays = normalize_inputs(inputs, input_names)
    counts = {k: (a.shape[0] if a.ndim else 0) for k, a in arrays.items()}
    n = next(iter(counts.values()))
    if any(c != n for c in counts.values()) or n == 0:
        raise BitflipError(f"every eval input needs the samples on dim 0, the same number each; got {counts}")
    if max_samples:
        arrays = {k: a[:max_samples] for k, a in arrays.items()}
        n = min(n, max_samples)
        if labels is not None:
            labels = to_numpy(labels, "labels")[:max_samples]
    if "labels" in arrays:
        raise BitflipError("a graph input is called 'labels', which is the eval set's label tensor; rename the input")
    if labels is not None:
        ids = _lm_ids(arrays, labels)
        arrays["labels"] = lm_labels(labels, arrays[ids]) if ids else normalize_labels(labels, n)
    return write_safetensors(path, arrays)


def _lm_ids(arrays, labels):
    """The input a language model's labels go with: labels [N, T] (T > 1) of
    integers and an integer input of that very shape (the token ids) make the
    eval set a language model's (bitflip's task language_model: one label per
    position, -100 where none). Labels [N, T] with no such input are refused,
    pointing to the ways that say what they are."""
    y = to_numpy(labels, "labels")
    if y.ndim != 2 or y.shape[1] == 1:
        return None
    ids = [k for k, a in arrays.items() if a.dtype.kind in "iu" and a.shape == y.shape]
    if y.dtype.kind in "iu" and ids:
        return "input_ids" if "input_ids" in ids else ids[0]
    shapes = {k: list(a.shape) for k, a in arrays.items()}
    raise BitflipError(f"labels have shape {list(y.shape)} ({y.dtype.name}), and no integer input has that shape "
                       f"(inputs: {shapes}): per-position labels are a language model's, the next token at each "
                       "position of an int input_ids [N, T] (-100 where none). Give that input with them, or write "
                       "the eval set from token ids with bitflip.save_lm_eval_set(path, token_ids, seq_len); a "
                       "classifier takes one label per sample ([N])")


IGNORE_INDEX = -100   # a position with no next token: PyTorch's cross_entropy ignore_index


def lm_labels(labels, input_ids, vocab_size=None, what="labels"):
    """A language model's labels checked against its ``input_ids`` [N, T]:
    int64 [N, T], each a token id in [0, vocab_size) or -100 (no target)."""
    np = need("numpy", "writing labels")
    y = to_numpy(labels, what)
    if y.dtype.kind not in "iu":
        raise BitflipError(f"{what} have dtype {y.dtype.name}; a language model's labels are token ids (int64), "
                           f"-100 where a position has no next token")
    if y.shape != input_ids.shape:
        raise BitflipError(f"{what} have shape {list(y.shape)}, input_ids {list(input_ids.shape)}: a language "
                           "model needs one label per position, the next token ([samples, sequence])")
    y = y.astype(np.int64)
    bad = (y < 0) & (y != IGNORE_INDEX)
    if vocab_size is not None:
        bad |= y >= vocab_size
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        raise BitflipError(f"{what}{list(i)} is {int(y[i])}: a label is a token id in [0, "
                           f"{vocab_size if vocab_size is not None else 'vocab'}) or -100 (no target)")
    return y


def save_lm_eval_set(path, token_ids, seq_len, *, vocab_size=None, max_samples=None):
    """Writes a language model's eval set: ``input_ids`` and ``labels``, int64 [N, seq_len].

    ``token_ids`` is one 1-D sequence of token ids (a list, numpy array or torch
    tensor: a tokenized text). It is cut into N rows of ``seq_len + 1`` tokens,
    each starting where the last one's inputs ended (row i is tokens
    ``i*seq_len .. i*seq_len + seq_len``), so that every token but the first is
    a label exactly once; a row's inputs are its first ``seq_len`` tokens, its
    labels the ``seq_len`` after them (the next token at each position).
    Tokens left over at the end (fewer than a row's worth) are dropped.
    ``vocab_size`` (optional) checks that every id is below it. Returns the path.
    """
    np = need("numpy", "writing an eval set")
    if isinstance(seq_len, bool) or not isinstance(seq_len, (int, np.integer)) or seq_len < 1:
        raise BitflipError(f"seq_len is {seq_len!r}; it is the number of input tokens per row, an int >= 1")
    seq_len = int(seq_len)
    if isinstance(token_ids, (str, bytes)):
        raise BitflipError("token_ids is text; tokenize it first: save_lm_eval_set takes token ids (ints)")
    t = to_numpy(token_ids, "token_ids")
    if t.ndim != 1:
        raise BitflipError(f"token_ids has shape {list(t.shape)}; give one 1-D sequence of token ids "
                           "(concatenate the documents first), save_lm_eval_set cuts it into rows")
    if t.size == 0:
        raise BitflipError(f"0 tokens do not fill one row of seq_len + 1 = {seq_len + 1} tokens; give token ids")
    if t.dtype.kind not in "iu":      # bool too: True is no token id
        whole = t.dtype.kind == "f" and bool(np.all(np.isfinite(t))) and bool(np.all(t == np.round(t)))
        raise BitflipError(f"token_ids has dtype {t.dtype.name}; token ids are integers"
                           + (" (these floats are whole numbers: convert them with .astype(int))" if whole else ""))
    t = t.astype(np.int64)
    if t.min() < 0:
        raise BitflipError(f"token_ids[{int(np.argmin(t))}] is {int(t.min())}: token ids are >= 0")
    if vocab_size is not None and t.max() >= vocab_size:
        raise BitflipError(f"token_ids[{int(np.argmax(t))}] is {int(t.max())}, not below vocab_size {vocab_size}")
    n = (len(t) - 1) // seq_len
    if max_samples:
        n = min(n, int(max_samples))
    if n < 1:
        raise BitflipError(f"{len(t)} tokens do not fill one row of seq_len + 1 = {seq_len + 1} tokens; "
                           "give more tokens or a shorter seq_len")
    idx = np.arange(n)[:, None] * seq_len + np.arange(seq_len + 1)[None, :]
    rows = t[idx]
    return write_safetensors(path, {"input_ids": rows[:, :-1].copy(), "labels": rows[:, 1:].copy()})
