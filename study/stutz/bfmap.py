"""Profiled bit-error maps (.bfmap): write, read, generate, and lay over weights.

The format is bitflip's (core/include/bitflip/errmap.h, docs/CAMPAIGNS.md):
"BFERRMAP", a little-endian u64 header length, a flat JSON header
{"format": 1, "rows", "cols", "flip", "stuck_at_0", "stuck_at_1", "voltage"?,
"chip"?, "note"?}, then the flip, stuck-at-0 and stuck-at-1 cells as ascending
little-endian u64 cell numbers (row * cols + col).

As a command, makes a map with a spatial pattern, standing in for a chip
profiled at a low voltage (no measured maps ship with bitflip):

    /usr/bin/python3 study/stutz/bfmap.py OUT.bfmap --rows 1024 --cols 1024 \
        --rate 0.01 --pattern columns --seed 1

Patterns: `uniform` (each cell fails with probability `rate`), `columns` and
`rows` (weak columns or rows, as SRAM arrays show them: 10% of the columns fail
at 8x the rate of the others, the total rate still `rate`). A failing cell is a
flip, stuck-at-0 or stuck-at-1 cell in the proportions of --kinds (default
0.5,0.25,0.25).
"""
import argparse
import json
import struct

import numpy as np

MAGIC = b"BFERRMAP"
KINDS = ("flip", "stuck_at_0", "stuck_at_1")


def write(path, rows, cols, cells, voltage=None, chip=None, note=None):
    """cells: dict kind -> iterable of cell numbers (any order, distinct)."""
    lists = [np.unique(np.asarray(cells.get(k, []), dtype=np.uint64)) for k in KINDS]
    header = {"format": 1, "rows": int(rows), "cols": int(cols)}
    for k, c in zip(KINDS, lists):
        header[k] = int(c.size)
    if voltage is not None:
        header["voltage"] = float(voltage)
    if chip is not None:
        header["chip"] = chip
    if note is not None:
        header["note"] = note
    h = json.dumps(header).encode()
    with open(path, "wb") as fh:
        fh.write(MAGIC + struct.pack("<Q", len(h)) + h)
        for c in lists:
            fh.write(c.astype("<u8").tobytes())


def read(path):
    with open(path, "rb") as fh:
        data = fh.read()
    assert data[:8] == MAGIC, "not a .bfmap"
    (hl,) = struct.unpack("<Q", data[8:16])
    header = json.loads(data[16:16 + hl])
    at = 16 + hl
    cells = {}
    for k in KINDS:
        n = header[k]
        cells[k] = np.frombuffer(data[at:at + 8 * n], dtype="<u8").astype(np.uint64)
        at += 8 * n
    return header, cells


def generate(rows, cols, rate, pattern="uniform", kinds=(0.5, 0.25, 0.25), seed=0):
    """A map: each cell fails with probability `rate` on average, spatially
    patterned; the kind of each failing cell drawn by `kinds`."""
    rng = np.random.default_rng(seed)
    n = rows * cols
    if pattern == "uniform":
        p = np.full(n, rate)
    else:
        # 10% weak lines at 8x the rate of the rest: 0.1 * 8r' + 0.9 r' = r
        lines = cols if pattern == "columns" else rows
        weak = rng.random(lines) < 0.1
        base = rate / (0.1 * 8 + 0.9)
        line_p = np.where(weak, 8 * base, base)
        grid = np.broadcast_to(line_p[None, :], (rows, cols)) if pattern == "columns" else \
            np.broadcast_to(line_p[:, None], (rows, cols))
        p = np.minimum(grid.reshape(-1), 1.0)
    fail = np.nonzero(rng.random(n) < p)[0].astype(np.uint64)
    kind = rng.choice(3, size=fail.size, p=np.asarray(kinds) / np.sum(kinds))
    return {k: fail[kind == i] for i, k in enumerate(KINDS)}


def lay_over(n_bits, rows, cols, cells, offset):
    """Which of n_bits weight bits (memory order, errmap.h) sit in failing
    cells at `offset`: an int8 array per bit, -1 healthy, else the kind index
    (0 flip, 1 stuck-at-0, 2 stuck-at-1). Bit j sits in cell (j + offset) % N."""
    n = rows * cols
    cell_kind = np.full(n, -1, dtype=np.int8)
    for i, k in enumerate(KINDS):
        cell_kind[np.asarray(cells[k], dtype=np.int64)] = i
    j = np.arange(n_bits, dtype=np.int64)
    return cell_kind[(j + offset) % n]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--rate", type=float, required=True, help="fraction of failing cells")
    ap.add_argument("--pattern", choices=("uniform", "columns", "rows"), default="columns")
    ap.add_argument("--kinds", default="0.5,0.25,0.25", help="flip,stuck_at_0,stuck_at_1 proportions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--voltage", type=float)
    ap.add_argument("--chip", default="generated")
    a = ap.parse_args()
    kinds = tuple(float(x) for x in a.kinds.split(","))
    cells = generate(a.rows, a.cols, a.rate, a.pattern, kinds, a.seed)
    write(a.out, a.rows, a.cols, cells, voltage=a.voltage, chip=a.chip,
          note="bfmap.py --rate %g --pattern %s --seed %d" % (a.rate, a.pattern, a.seed))
    total = sum(c.size for c in cells.values())
    print("%s: %d x %d cells, %d failing (%.4f%%)" % (a.out, a.rows, a.cols, total, 100.0 * total / (a.rows * a.cols)))


if __name__ == "__main__":
    main()
