#!/usr/bin/python3
"""Converts Criteo's click logs (Kaggle train.txt, Terabyte day_N[.gz]) into a bitflip
eval set for the DRS zoo's models (docs/STUDY.md, "Real Criteo data").

    /usr/bin/python3 study/drs/criteo_tsv.py train.txt --out eval.safetensors
        [--limit N] [--skip 0] [--cap 200000 | --rows MANIFEST.json]
        [--skip-bad] [--max-errors 20] [--max-line 65536]

Each line: a 0/1 label, 13 integers, 26 8-digit hex categoricals, tab-separated (40
fields); any feature may be empty.  As DLRM's loader does it:

    dense[n, i]  = log(max(I_i, 0) + 1); an empty integer is 0
    sparse[n, t] = int(C_t, 16) mod rows[t]; an empty categorical is 0 (row 0)

rows[t] is the table's row count: Criteo Kaggle's cardinality capped at --cap (the
zoo's default cap unless given), or read from a zoo's manifest.json (--rows), so the
ids index the tables of the model that will read them.  Hashing modulo the table size
is DLRM's `--max-ind-range` and needs no vocabulary pass; it folds distinct hashes onto
one row where a table is smaller than its vocabulary, as a capped model does anyway.

Streaming, bounded memory: rows are appended to three temporary files next to --out as
they are read, and the safetensors file is assembled from them at the end, so memory
does not grow with the input (a Terabyte day has about 195M lines; --limit takes the
first N samples).  A .gz input is decompressed on the fly.

A malformed line (not 40 fields, a label other than 0/1, a dense field that is not an
integer, a categorical that is not hex of at most 8 digits) is an error naming the file,
the line and the field, and nothing is written; with --skip-bad it is skipped and
counted instead, and the first --max-errors of them are printed.  An input with no
usable line is an error.

Standard library only: the converter must run where a lab's machine has no numpy.
"""
import argparse
import array
import gzip
import json
import math
import os
import shutil
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import criteo  # noqa: E402

_HEX = frozenset("0123456789abcdefABCDEF")
MAX_LINE = 65536   # a Criteo line has at most 40 short fields


class BadLine(ValueError):
    pass


def parse_line(line, rows):
    """(label, [13 floats], [26 ints]) of one TSV line (without its newline); BadLine."""
    f = line.split("\t")
    if len(f) != criteo.COLUMNS:
        raise BadLine(f"{len(f)} tab-separated fields, expected {criteo.COLUMNS} "
                      f"(label, I1..I13, C1..C26)")
    if f[0] not in ("0", "1"):
        raise BadLine(f"label {f[0]!r}: must be 0 or 1")
    dense = []
    for i in range(criteo.DENSE):
        s = f[1 + i]
        if s == "":
            v = 0
        else:
            # int() alone would also take " 5", "+5" and "1_0"
            digits = s[1:] if s[0] == "-" else s
            if not (digits.isdigit() and digits.isascii()):
                raise BadLine(f"I{i + 1} {s!r}: not an integer")
            v = int(s, 10)
        dense.append(math.log(max(v, 0) + 1.0))
    sparse = []
    for t in range(criteo.TABLES):
        s = f[1 + criteo.DENSE + t]
        if s == "":
            sparse.append(0)
            continue
        if len(s) > 8 or not _HEX.issuperset(s):
            raise BadLine(f"C{t + 1} {s!r}: not a hex hash of at most 8 digits")
        sparse.append(int(s, 16) % rows[t])
    return float(f[0]), dense, sparse


def open_text(path):
    if path == "-":
        return sys.stdin
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="ascii", errors="replace", newline="\n")
    return open(path, "r", encoding="ascii", errors="replace", newline="\n")


def rows_from_manifest(path):
    with open(path) as f:
        m = json.load(f)
    rows = m.get("table_rows")
    if not isinstance(rows, list) or len(rows) != criteo.TABLES or \
            not all(isinstance(r, int) and r > 0 for r in rows):
        raise ValueError(f"{path}: no \"table_rows\" list of {criteo.TABLES} positive "
                         f"integers (write it with study/drs/make_zoo.py)")
    return rows


def convert(src, out, rows, limit=None, skip=0, skip_bad=False, max_errors=20, log=sys.stderr,
            max_line=MAX_LINE):
    """Converts; returns {"samples", "skipped_bad", "lines"}.  Raises BadLine (with the
    place) on a malformed line unless skip_bad, ValueError on an empty result."""
    tmp = [out + s for s in (".dense.tmp", ".sparse.tmp", ".labels.tmp")]
    n = bad = lineno = 0
    ok = False
    try:
        with open_text(src) as fin, open(tmp[0], "wb") as fd, open(tmp[1], "wb") as fs, \
                open(tmp[2], "wb") as fl:
            bd, bs, bl = array.array("f"), array.array("q"), array.array("f")
            while True:
                # readline with a bound: one line without a newline must not fill memory
                raw = fin.readline(max_line + 1)
                if not raw:
                    break
                lineno += 1
                if len(raw) > max_line:
                    raise BadLine(f"{src}:{lineno}: longer than {max_line} characters: not a Criteo "
                                  f"TSV line (about 200 characters; --max-line raises the limit)")
                if lineno <= skip:
                    continue
                if limit is not None and n >= limit:
                    break
                line = raw[:-1] if raw.endswith("\n") else raw
                if line.endswith("\r"):
                    line = line[:-1]
                try:
                    label, dense, sparse = parse_line(line, rows)
                except BadLine as e:
                    where = f"{src}:{lineno}: {e}"
                    if not skip_bad:
                        raise BadLine(where + " (--skip-bad skips such lines)") from None
                    bad += 1
                    if bad <= max_errors:
                        print(f"criteo_tsv: skipped {where}", file=log)
                    continue
                bl.append(label)
                bd.extend(dense)
                bs.extend(sparse)
                n += 1
                if len(bl) >= 65536:   # bounded memory: flush every 64Ki samples
                    _flush(bd, fd), _flush(bs, fs), _flush(bl, fl)
            _flush(bd, fd), _flush(bs, fs), _flush(bl, fl)
        if n == 0:
            raise ValueError(f"{src}: no sample converted ({lineno} lines read, {bad} malformed"
                             f"{', ' + str(skip) + ' skipped by --skip' if skip else ''})")
        header = criteo.safetensors_header([
            ("dense", "F32", [n, criteo.DENSE], n * criteo.DENSE * 4),
            ("sparse", "I64", [n, criteo.TABLES], n * criteo.TABLES * 8),
            ("labels", "F32", [n], n * 4)])
        part = out + ".part"
        with open(part, "wb") as fo:
            fo.write(header)
            for t in tmp:
                with open(t, "rb") as fi:
                    shutil.copyfileobj(fi, fo, 1 << 20)
        os.replace(part, out)
        ok = True
    finally:
        for t in tmp:
            if os.path.exists(t):
                os.remove(t)
        if not ok and os.path.exists(out + ".part"):
            os.remove(out + ".part")
    if bad > max_errors:
        print(f"criteo_tsv: ... {bad - max_errors} more malformed lines skipped", file=log)
    return {"samples": n, "skipped_bad": bad, "lines": lineno}


def _flush(buf, f):
    if sys.byteorder != "little":
        buf.byteswap()
    buf.tofile(f)
    del buf[:]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", help="Criteo TSV (train.txt, day_N, day_N.gz; - for stdin)")
    ap.add_argument("--out", required=True, help="the eval set to write (.safetensors)")
    ap.add_argument("--limit", type=int, help="convert at most this many samples")
    ap.add_argument("--skip", type=int, default=0, help="skip this many lines first")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--cap", type=int, help=f"table rows: Kaggle's cardinalities capped at this "
                   f"(default {criteo.DEFAULT_CAP}, the zoo's)")
    g.add_argument("--rows", metavar="MANIFEST", help="table rows from a zoo's manifest.json")
    ap.add_argument("--skip-bad", action="store_true", help="skip malformed lines (counted)")
    ap.add_argument("--max-errors", type=int, default=20, help="malformed lines printed (--skip-bad)")
    ap.add_argument("--max-line", type=int, default=MAX_LINE,
                    help=f"longest line accepted, in characters (default {MAX_LINE})")
    a = ap.parse_args(argv)
    for flag in ("limit", "cap", "max_line"):
        v = getattr(a, flag)
        if v is not None and v < 1:
            ap.error(f"--{flag.replace('_', '-')} must be at least 1, got {v}")
    if a.skip < 0:
        ap.error(f"--skip must be 0 or more, got {a.skip}")
    try:
        rows = rows_from_manifest(a.rows) if a.rows else \
            criteo.table_rows(a.cap if a.cap is not None else criteo.DEFAULT_CAP)
        r = convert(a.input, a.out, rows, a.limit, a.skip, a.skip_bad, a.max_errors, max_line=a.max_line)
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        print(f"criteo_tsv: {a.input}: {e} (a truncated or corrupt .gz file)", file=sys.stderr)
        return 1
    except (BadLine, ValueError, OSError) as e:
        print(f"criteo_tsv: {e}", file=sys.stderr)
        return 1
    print(f"criteo_tsv: {a.out}: {r['samples']} samples from {r['lines']} lines"
          f"{', ' + str(r['skipped_bad']) + ' malformed skipped' if r['skipped_bad'] else ''}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
