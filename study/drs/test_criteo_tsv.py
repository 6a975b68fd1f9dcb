#!/usr/bin/python3
"""ctest drs_criteo_tsv: the Criteo TSV converter on hand-checkable lines, malformed
lines, gzip input and hostile input.  Standard library only (runs everywhere).

    /usr/bin/python3 study/drs/test_criteo_tsv.py WORKDIR

Expected values are worked out by hand in the comments, not by the converter's code.
"""
import gzip
import json
import math
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONV = os.path.join(HERE, "criteo_tsv.py")
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print(f"FAIL {what}", file=sys.stderr)
    else:
        print(f"ok   {what}")


def read_st(path):
    """A minimal independent safetensors reader: {name: (dtype, shape, values)}."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in h.items():
        a, b = t["data_offsets"]
        fmt = {"F32": "f", "I64": "q"}[t["dtype"]]
        cnt = (b - a) // struct.calcsize(fmt)
        out[name] = (t["dtype"], t["shape"], list(struct.unpack(f"<{cnt}{fmt}", data[a:b])))
    return out


def conv(args):
    p = subprocess.run([sys.executable, CONV] + args, capture_output=True, text=True)
    return p.returncode, p.stderr


def line(label, ints, cats):
    return "\t".join([label] + ints + cats)


def main():
    work = sys.argv[1] if len(sys.argv) > 1 else "/tmp/drs_tsv_test"
    os.makedirs(work, exist_ok=True)
    ints0 = ["0", "1", "", "-5", "3", "0", "0", "0", "0", "0", "0", "0", "10"]
    cats0 = ["00000010"] * 26
    cats0[1] = ""                 # C2 empty -> row 0
    cats0[2] = "ffffffff"         # C3: 4294967295 mod 200000 = 4294967295 - 21474 * 200000 = 167295
    cats0[8] = "0000000B"         # C9 (3 rows): 11 mod 3 = 2; upper-case hex
    good = [line("1", ints0, cats0),
            line("0", [""] * 13, [""] * 26)]   # everything missing: dense 0, rows 0
    src = os.path.join(work, "good.tsv")
    with open(src, "w") as f:
        f.write("\n".join(good) + "\n")
    out = os.path.join(work, "good.safetensors")
    rc, err = conv([src, "--out", out])
    check(rc == 0, f"converts two good lines (rc {rc}: {err.strip()})")
    st = read_st(out)
    check(st["dense"][:2] == ("F32", [2, 13]) and st["sparse"][:2] == ("I64", [2, 26])
          and st["labels"][:2] == ("F32", [2]), "tensors dense [2,13] F32, sparse [2,26] I64, labels [2] F32")
    d, s, lab = st["dense"][2], st["sparse"][2], st["labels"][2]
    check(lab == [1.0, 0.0], "labels 1, 0")
    # dense: log(max(x,0)+1): 0 -> 0, 1 -> ln 2, "" -> 0, -5 -> 0, 3 -> ln 4, 10 -> ln 11
    exp = [0, math.log(2), 0, 0, math.log(4)] + [0] * 7 + [math.log(11)]
    check(all(abs(a - b) < 1e-6 for a, b in zip(d[:13], exp)), f"dense row 0 = log(x+1) by hand: {d[:13]}")
    check(d[13:] == [0.0] * 13, "dense row 1: empty fields are 0")
    # sparse: 0x10 = 16, mod rows: C1 1460 -> 16; C2 empty -> 0; C3 -> 167295; C9 -> 2;
    # C20 (4 rows): 16 mod 4 = 0; C17 (10 rows): 6
    check(s[0] == 16 and s[1] == 0 and s[2] == 167295 and s[8] == 2 and s[19] == 0 and s[16] == 6,
          f"sparse row 0 = hex mod rows by hand: {s[:26]}")
    check(s[26:] == [0] * 26, "sparse row 1: empty categoricals are row 0")

    # --cap 1000: C3 -> 4294967295 mod 1000 = 295; C1 stays 1460 -> capped to 1000: 16
    rc, _ = conv([src, "--out", out, "--cap", "1000"])
    s = read_st(out)["sparse"][2]
    check(rc == 0 and s[2] == 295 and s[0] == 16, "--cap 1000: C3 row 295")

    # --rows from a manifest: every table 7 rows: 16 mod 7 = 2, 4294967295 mod 7 = 3
    # (2^32 = 4 mod 7, so 2^32 - 1 = 3)
    man = os.path.join(work, "manifest.json")
    with open(man, "w") as f:
        json.dump({"table_rows": [7] * 26}, f)
    rc, _ = conv([src, "--out", out, "--rows", man])
    s = read_st(out)["sparse"][2]
    check(rc == 0 and s[0] == 2 and s[2] == 3 and s[8] == 11 % 7, "--rows MANIFEST: ids mod 7")
    with open(man, "w") as f:
        json.dump({"table_rows": [7] * 25}, f)
    rc, err = conv([src, "--out", out, "--rows", man])
    check(rc == 1 and "table_rows" in err, f"a manifest with 25 tables is refused: {err.strip()}")

    # gzip input and --limit
    gz = os.path.join(work, "good.tsv.gz")
    with gzip.open(gz, "wt") as f:
        f.write("\n".join(good * 5) + "\n")
    rc, err = conv([gz, "--out", out, "--limit", "3"])
    st = read_st(out)
    check(rc == 0 and st["labels"][1] == [3] and st["labels"][2] == [1.0, 0.0, 1.0], "gzip input, --limit 3")
    rc, err = conv([gz, "--out", out, "--skip", "1", "--limit", "2"])
    check(rc == 0 and read_st(out)["labels"][2] == [0.0, 1.0], "--skip 1 --limit 2")
    # a truncated gzip file: an error, not a traceback
    with open(gz, "rb") as f:
        blob = f.read()
    with open(gz, "wb") as f:
        f.write(blob[:len(blob) // 2])
    rc, err = conv([gz, "--out", out])
    check(rc == 1 and "Traceback" not in err and gz in err, f"truncated gzip: clean error naming it: {err.strip()[:160]}")
    # one enormous line without a newline: refused after 64 KiB, not read whole
    p = os.path.join(work, "bomb.tsv")
    with open(p, "w") as f:
        f.write("1\t" + "9" * (4 << 20))
    rc, err = conv([p, "--out", out])
    check(rc == 1 and f"{p}:1:" in err and "longer than" in err, f"a 4 MiB line: {err.strip()[:160]}")

    # malformed lines: each an error naming file:line and the field, nothing written
    bad = {
        "columns": (line("1", ints0[:12], cats0), "39 tab-separated fields"),
        "hex": (line("1", ints0, cats0[:4] + ["zz12"] + cats0[5:]), "C5 'zz12'"),
        "longhex": (line("1", ints0, ["123456789"] + cats0[1:]), "C1 '123456789'"),
        "label": (line("2", ints0, cats0), "label '2'"),
        "dense": (line("0", ints0[:6] + ["1.5"] + ints0[7:], cats0), "I7 '1.5'"),
        "dense_us": (line("0", ["1_0"] + ints0[1:], cats0), "I1 '1_0'"),
        "binary": ("\x00\xff\xfe garbage", "fields"),
    }
    for name, (text, want) in bad.items():
        p = os.path.join(work, f"bad_{name}.tsv")
        with open(p, "w", encoding="latin-1") as f:
            f.write(good[0] + "\n" + text + "\n" + good[1] + "\n")
        o = os.path.join(work, f"bad_{name}.safetensors")
        if os.path.exists(o):
            os.remove(o)
        rc, err = conv([p, "--out", o])
        check(rc == 1 and f"{p}:2:" in err and want in err and not os.path.exists(o)
              and "Traceback" not in err, f"malformed ({name}): error names line 2 and {want!r}: {err.strip()}")
        rc, err = conv([p, "--out", o, "--skip-bad"])
        st = read_st(o) if rc == 0 else None
        check(rc == 0 and st["labels"][2] == [1.0, 0.0] and "skipped" in err,
              f"malformed ({name}) with --skip-bad: 2 samples, 1 skipped")
    leftovers = [f for f in os.listdir(work) if f.endswith(".tmp") or f.endswith(".part")]
    check(not leftovers, f"no temporary files left behind: {leftovers}")

    # CRLF line ends are accepted; an empty file and a missing file are errors
    p = os.path.join(work, "crlf.tsv")
    with open(p, "w", newline="") as f:
        f.write(good[0] + "\r\n")
    rc, _ = conv([p, "--out", out])
    check(rc == 0 and read_st(out)["sparse"][2][0] == 16, "CRLF line ends")
    p = os.path.join(work, "empty.tsv")
    open(p, "w").close()
    rc, err = conv([p, "--out", out])
    check(rc == 1 and "no sample converted" in err, f"empty input: {err.strip()}")
    rc, err = conv([os.path.join(work, "missing.tsv"), "--out", out])
    check(rc == 1 and "missing.tsv" in err and "Traceback" not in err, f"missing input: {err.strip()}")
    rc, err = conv([src, "--out", out, "--limit", "0"])
    check(rc == 2 and "--limit" in err, "--limit 0 is refused")

    if FAILS:
        print(f"{len(FAILS)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
