#!/bin/sh
# Runs every campaign spec in docs/experiments/*.json with the bitflip CLI and
# rewrites the generated tables of docs/EXPERIMENTS.md from the result JSON.
#
#   docs/experiments/run.sh            run everything, then rewrite the tables
#   docs/experiments/run.sh --render   only rewrite the tables from docs/experiments/out/
#   docs/experiments/run.sh --print    run, then print the tables instead of writing
#   BITFLIP=path/to/bitflip docs/experiments/run.sh    use another binary
#
# Results go to docs/experiments/out/ (gitignored): NAME.json, the result document
# of NAME.json exactly as `bitflip run --out` writes it, and timings.tsv (wall
# seconds per campaign). The tables are rendered only from those files; the prose
# in docs/EXPERIMENTS.md between the generated blocks is written by hand.
# Campaigns are deterministic (seeded), so a rerun gives the same numbers; only
# the wall times change. About a minute on 2 cores.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"                      # spec paths are relative to the repository root

BITFLIP=${BITFLIP:-build/bitflip}
out=docs/experiments/out
mode=run-write
case "${1:-}" in
    "") ;;
    --render) mode=render ;;
    --print) mode=run-print ;;
    *) echo "usage: $0 [--render | --print]" >&2; exit 2 ;;
esac

if [ "$mode" != render ]; then
    if [ ! -x "$BITFLIP" ]; then
        echo "building $BITFLIP" >&2
        cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
        cmake --build build -j2 --target bitflip >/dev/null
    fi
    mkdir -p "$out"
    printf 'name\tseconds\tthreads\n' > "$out/timings.tsv.tmp"
    threads=$(nproc 2>/dev/null || echo 1)
    {
        echo "date	$(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "load_start	$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo ?)"
    } > "$out/meta.tsv.tmp"
    for spec in docs/experiments/*.json; do
        name=$(basename "$spec" .json)
        t0=$(date +%s%N)
        # stdout is the same document as --out; exit 2/3 stop the script (set -e)
        if ! "$BITFLIP" run --local "$spec" --out "$out/$name.json" --format json >/dev/null; then
            echo "run.sh: '$BITFLIP run --local $spec' failed" >&2
            exit 1
        fi
        t1=$(date +%s%N)
        secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
        printf '%s\t%s\t%s\n' "$name" "$secs" "$threads" >> "$out/timings.tsv.tmp"
        printf '%-32s %7s s\n' "$name" "$secs" >&2
    done
    echo "load_end	$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo ?)" >> "$out/meta.tsv.tmp"
    mv "$out/timings.tsv.tmp" "$out/timings.tsv"
    mv "$out/meta.tsv.tmp" "$out/meta.tsv"
fi

[ "$mode" = run-print ] && print=1 || print=0

/usr/bin/python3 - "$out" docs/EXPERIMENTS.md "$print" "$BITFLIP" <<'PY'
import json, math, os, re, subprocess, sys

out, doc_path, print_only, bitflip = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]

def load(name):
    with open(os.path.join(out, name + ".json")) as f:
        return json.load(f)

timings = {}
with open(os.path.join(out, "timings.tsv")) as f:
    next(f)
    for line in f:
        name, secs, threads = line.rstrip("\n").split("\t")
        timings[name] = (float(secs), int(threads))

def pct(x):
    return "–" if x is None else f"{100 * x:.1f}%"

def rate_str(r):
    return f"{r:.0e}".replace("e-0", "e-")

def fnum(x, d=4):
    return "–" if x is None else f"{x:.{d}f}"

def flips(x):
    if x >= 10: return f"{x:.0f}"
    if x >= 0.1: return f"{x:.2f}"
    return f"{x:.1e}".replace("e-0", "e-")

def command(name):
    return (f"`build/bitflip run --local docs/experiments/{name}.json "
            f"--out docs/experiments/out/{name}.json`")

def header(name, r):
    c, g = r["campaign"], r["golden"]
    secs, threads = timings[name]
    n = r["summary"]["trials"]
    gold = ", ".join(f"{m} {g[m]:.4f}" for m in ("auc", "logloss", "accuracy") if m in g)
    what = f"{c['fault_model']} faults in {c['representation']}"
    if c["fault_model"] == "ber":
        what += f", {len(c['rates'])} rates × {c['repeats']} repeats"
    tensors = sorted(s["name"] for s in c["sites"])
    return (f"Command: {command(name)}  \n"
            f"{what} = {n} trials over {len(tensors)} tensors "
            f"({c['population']:.0f} bits); golden ({c['representation']}): {gold}; "
            f"wall time {secs:.2f} s on {threads} threads ({n / secs:.0f} trials/s).")

def metric_cells(m, name, n_trials):
    """mean, std, [lo, hi] of a per-rate metric; n if it was not computed for every trial."""
    a = m.get(name)
    if a is None or a["n"] == 0:
        return "–", "–", "–", ""
    note = "" if a["n"] == n_trials else f" (n={a['n']})"
    return (fnum(a["mean"]), fnum(a["std"]), f"[{fnum(a['ci'][0])}, {fnum(a['ci'][1])}]", note)

def ber_table(name):
    r = load(name)
    c = r["campaign"]
    binary = r["golden"]["task"] == "binary"
    main = "auc" if binary else "accuracy"
    second = "logloss" if binary else "top1_mismatch"
    lines = [header(name, r), "",
             f"| rate | expected flips per trial | mean {main} | std | 95% interval of the mean "
             f"| mean {second} | critical | DUE |",
             "| ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for row in r["by_rate"]:
        n = row["trials"]
        mean, std, ci, note = metric_cells(row["metrics"], main, n)
        s_mean, _, _, s_note = metric_cells(row["metrics"], second, n)
        lines.append(f"| {rate_str(row['rate'])} | {flips(row['rate'] * c['population'])} "
                     f"| {mean}{note} | {std} | {ci} | {s_mean}{s_note} "
                     f"| {pct(row['critical']['rate'])} | {pct(row['due']['rate'])} |")
    return "\n".join(lines) + "\n"

def compare_table(names, labels):
    runs = [load(n) for n in names]
    binary = runs[0]["golden"]["task"] == "binary"
    main = "auc" if binary else "accuracy"
    lines = []
    for n, lab, r in zip(names, labels, runs):
        secs, threads = timings[n]
        g = r["golden"][main]
        lines.append(f"- {lab}: {command(n)}, {r['summary']['trials']} trials, "
                     f"population {r['campaign']['population']:.0f} bits, golden {main} {g:.4f}, "
                     f"{secs:.2f} s")
    lines.append("")
    head = "| rate | " + " | ".join(f"{lab}: mean {main} [95% interval]" for lab in labels) \
        + " | " + " | ".join(f"{lab}: critical / DUE" for lab in labels) + " |"
    lines += [head, "| ---: |" + " --- |" * (2 * len(labels))]
    for i, row0 in enumerate(runs[0]["by_rate"]):
        cells, outc = [], []
        for r in runs:
            row = r["by_rate"][i]
            assert row["rate"] == row0["rate"]
            a = row["metrics"][main]
            cells.append(f"{a['mean']:.4f} [{a['ci'][0]:.4f}, {a['ci'][1]:.4f}]")
            outc.append(f"{pct(row['critical']['rate'])} / {pct(row['due']['rate'])}")
        lines.append(f"| {rate_str(row0['rate'])} | " + " | ".join(cells) + " | "
                     + " | ".join(outc) + " |")
    return "\n".join(lines) + "\n"

def field(bit, repr_):
    if repr_ == "fp32":
        return "sign" if bit == 31 else "exponent" if bit >= 23 else "mantissa"
    if repr_ == "bf16":
        return "sign" if bit == 15 else "exponent" if bit >= 7 else "mantissa"
    if repr_ == "fp16":
        return "sign" if bit == 15 else "exponent" if bit >= 10 else "mantissa"
    return "sign (q)" if bit == 7 else "magnitude"

def bit_table(name):
    r = load(name)
    repr_ = r["campaign"]["representation"]
    lines = [header(name, r), "",
             "| bit | field | trials | masked | tolerable | critical | DUE | critical rate [95% Wilson] |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for row in sorted(r["by_bit"], key=lambda b: -b["bit"]):
        o, cr = row["outcomes"], row["critical"]
        lines.append(f"| {row['bit']} | {field(row['bit'], repr_)} | {row['trials']} | {o['masked']} "
                     f"| {o['tolerable']} | {o['critical']} | {o['due']} "
                     f"| {pct(cr['rate'])} [{pct(cr['ci'][0])}, {pct(cr['ci'][1])}] |")
    s = r["summary"]
    lines.append("")
    lines.append("By tensor (same campaign): " + "; ".join(
        f"{t['tensor']} {pct(t['critical']['rate'])} of {t['trials']}"
        for t in sorted(r["by_tensor"], key=lambda t: -(t['critical']['rate'] or 0))) + ".")
    lines.append(f"Overall: {s['outcomes']['critical']} critical and {s['outcomes']['due']} DUE of "
                 f"{s['trials']} trials ({pct(s['rates']['critical']['rate'])} critical).")
    return "\n".join(lines) + "\n"

def timing_table():
    lines = ["| campaign | trials | wall time (s) | trials/s |", "| --- | ---: | ---: | ---: |"]
    total = 0.0
    for name in sorted(timings):
        secs, threads = timings[name]
        total += secs
        n = load(name)["summary"]["trials"]
        lines.append(f"| {name} | {n} | {secs:.2f} | {n / secs:.0f} |")
    threads = next(iter(timings.values()))[1]
    try:
        version = subprocess.run([bitflip, "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        version = "bitflip (version unknown)"
    meta = {}
    try:
        with open(os.path.join(out, "meta.tsv")) as f:
            meta = dict(line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)
    except OSError:
        pass
    lines.append(f"| **total** | | **{total:.1f}** | |")
    lines.append("")
    lines.append(f"{version}, {threads} threads (`--threads` default: all cores), run "
                 f"{meta.get('date', '?')}; 1-minute load average at start / end "
                 f"{meta.get('load_start', '?')} / {meta.get('load_end', '?')} "
                 f"(the machine is shared: a load above {threads} means other processes "
                 f"took cores and the times are pessimistic).")
    return "\n".join(lines) + "\n"

blocks = {}
for n in ["dlrm_ber_all_fp32", "dlrm_ber_emb_fp32", "dlrm_ber_all_bf16", "dlrm_ber_emb_bf16",
          "dlrm_ber_all_int8", "dlrm_ber_emb_int8",
          "digits_ber_fp32", "digits_ber_bf16", "digits_ber_int8"]:
    blocks[n] = ber_table(n)
reprs = ["fp32", "bf16", "int8"]
blocks["dlrm_all_r1000"] = compare_table([f"dlrm_ber_all_{x}_r1000" for x in reprs], reprs)
blocks["dlrm_emb_r1000"] = compare_table([f"dlrm_ber_emb_{x}_r1000" for x in reprs], reprs)
blocks["digits_r100"] = compare_table([f"digits_ber_{x}_r100" for x in reprs], reprs)
blocks["digits_bits_fp32"] = bit_table("digits_bits_fp32")
blocks["digits_bits_int8"] = bit_table("digits_bits_int8")
blocks["timings"] = timing_table()

if print_only:
    for k, v in blocks.items():
        print(f"<!-- BEGIN generated: {k} -->\n{v}<!-- END generated: {k} -->\n")
    sys.exit(0)

with open(doc_path) as f:
    doc = f.read()
for k, v in blocks.items():
    pat = re.compile(r"(<!-- BEGIN generated: %s -->\n).*?(<!-- END generated: %s -->)"
                     % (re.escape(k), re.escape(k)), re.S)
    if not pat.search(doc):
        sys.exit(f"run.sh: {doc_path} has no block 'generated: {k}'")
    doc = pat.sub(lambda m: m.group(1) + v + m.group(2), doc)
with open(doc_path + ".tmp", "w") as f:
    f.write(doc)
os.replace(doc_path + ".tmp", doc_path)
print(f"wrote {doc_path}", file=sys.stderr)
PY
