"""Criteo's shape, shared by the DRS study's generator, converter and tests.

Criteo's click logs (the Kaggle Display Advertising Challenge's train.txt and the
Terabyte set's day_0 .. day_23) have one sample per line: a 0/1 label, 13 integer
("dense") features I1..I13 and 26 categorical features C1..C26 as 8-digit hex hashes,
tab-separated, any feature possibly empty.  Every model of the zoo takes the same two
graph inputs, so an eval set made by the converter (criteo_tsv.py) and one made by the
generator (make_zoo.py) are interchangeable:

    dense   float32 [N, 13]   log(max(x, 0) + 1), as DLRM's data loader does
    sparse  int64   [N, 26]   the row of table t that sample n looks up
    labels  float32 [N]       0 or 1

The converter's safetensors header is made by hand here (the format is an 8-byte header
length, a JSON header, raw little-endian data: docs/GUIDE.md): it streams columns larger
than memory into the file after it, which the Python package's writer (clients/python,
whole arrays) does not, and it must run with the standard library alone. The generator
writes its eval set with the package's writer.
"""
import json
import struct

DENSE = 13
TABLES = 26
COLUMNS = 1 + DENSE + TABLES

# Rows per categorical feature in Criteo Kaggle (the counts DLRM's loader finds,
# `--data-set=kaggle`): C1 .. C26.
KAGGLE_CARDINALITIES = [
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
    27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
]
DEFAULT_CAP = 200_000   # 1,482,930 rows in all: 23.7M parameters at dim 16

TABLE_NAMES = [f"C{t + 1}" for t in range(TABLES)]


def table_rows(cap):
    """Rows of each of the 26 tables: Criteo Kaggle's cardinality, at most `cap`."""
    if cap is not None and cap < 1:
        raise ValueError(f"cap must be at least 1, got {cap}")
    return [c if cap is None else min(c, cap) for c in KAGGLE_CARDINALITIES]


_ST_DTYPES = {"f4": "F32", "i8": "I64"}


def safetensors_header(tensors):
    """Header bytes (length prefix included) for [(name, st_dtype, shape, nbytes)]."""
    header, off = {}, 0
    for name, dtype, shape, nbytes in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h


def read_safetensors_numpy(path):
    """{name: numpy array} of a safetensors file of F32 / I64 tensors (for the tests)."""
    import numpy as np
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        dt = {"F32": "<f4", "I64": "<i8"}[h["dtype"]]
        a, b = h["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=dt).reshape(h["shape"])
    return out
