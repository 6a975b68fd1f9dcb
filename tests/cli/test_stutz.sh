#!/usr/bin/env bash
# Fixed point and profiled error maps from the CLI: a profiled campaign runs and
# reports its map and offsets, is deterministic across thread counts, and a bad,
# missing or too large map is refused naming the file and what is wrong (the
# values themselves are checked against numpy in tests/conformance/stutz_check.py).
# usage: test_stutz.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
FX=$2/stutz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"

le64() { local v=$1 i; for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(( (v >> (8 * i)) & 255 )))"; done; }
mkmap() {   # mkmap FILE HEADER CELL... : a .bfmap written byte by byte
  local f=$1 h=$2; shift 2
  { printf 'BFERRMAP'; le64 ${#h}; printf '%s' "$h"; for c in "$@"; do le64 "$c"; done; } >"$f"
}
spec() {    # spec FILE MAP REPR [EXTRA]
  cat >"$1" <<JSON
{"model": "$FX/linear.onnx", "dataset": "$FX/linear.eval.safetensors", "seed": 4,
 "faults": {"model": "profiled", "error_map": "$2", "repeats": 6, "representation": "$3"${4:-}},
 "metrics": ["mse"]}
JSON
}

mkmap "$tmp/ok.bfmap" '{"format": 1, "rows": 4, "cols": 5, "flip": 2, "stuck_at_0": 1, "stuck_at_1": 1, "chip": "c7"}' 1 7 12 18
spec "$tmp/ok.json" ok.bfmap uint4 ', "w_max": 1.5'
check run 0 "$BF" run --local "$tmp/ok.json" --threads 1 --format json --out "$tmp/r1.json" --trials-out "$tmp/t1.jsonl"
contains run_map '"error_map"'
contains run_chip '"chip": "c7"'
contains run_wmax '"w_max": 1.5'
grep -q '"offset"' "$tmp/t1.jsonl" && passes=$((passes+1)) || { echo "FAIL trials name no offset"; fails=$((fails+1)); }
check run_t2 0 "$BF" run --local "$tmp/ok.json" --threads 2 --format json --trials-out "$tmp/t2.jsonl"
if cmp -s "$tmp/t1.jsonl" "$tmp/t2.jsonl"; then passes=$((passes+1)); else echo "FAIL threads change trials"; fails=$((fails+1)); fi

check limit 3 "$BF" run --local "$tmp/ok.json" --limit errmap.cells=3
contains limit "the limit is 3 (errmap.cells)"
contains limit_file "ok.bfmap"
check bad_key 2 "$BF" run --local "$tmp/ok.json" --limit errmap.rows=3
contains bad_key "errmap.cells"

mkmap "$tmp/unsorted.bfmap" '{"format": 1, "rows": 4, "cols": 5, "flip": 2, "stuck_at_0": 0, "stuck_at_1": 0}' 7 1
spec "$tmp/unsorted.json" unsorted.bfmap int4
check unsorted 3 "$BF" run --local "$tmp/unsorted.json"
contains unsorted "unsorted.bfmap: flip cell 1 (byte"
contains unsorted_why "cells ascend"
printf 'BFERRMAP\x10\x00' >"$tmp/short.bfmap"
spec "$tmp/short.json" short.bfmap int4
check short 3 "$BF" run --local "$tmp/short.json"
contains short "not a bitflip error map"
spec "$tmp/missing.json" nowhere.bfmap int4
check missing 3 "$BF" run --local "$tmp/missing.json"
contains missing "nowhere.bfmap: cannot open the error map"

# the differential engine and the full re-execution agree on every trial, and
# protections run paired on the same map offsets (CNN, uint4, a map that wraps)
mkmap "$tmp/cnn.bfmap" '{"format": 1, "rows": 16, "cols": 16, "flip": 3, "stuck_at_0": 2, "stuck_at_1": 2}' 3 40 201 7 99 150 255
cat >"$tmp/cnn.json" <<JSON
{"model": "$FX/cnn.onnx", "dataset": "$FX/cnn.eval.safetensors", "seed": 9,
 "faults": {"model": "profiled", "error_map": "cnn.bfmap", "repeats": 20, "representation": "uint4"},
 "metrics": ["accuracy"]}
JSON
check cnn 0 "$BF" run --local "$tmp/cnn.json" --threads 2 --format json --trials-out "$tmp/fast.jsonl"
check cnn_exact 0 "$BF" run --local "$tmp/cnn.json" --threads 2 --exact --format json --trials-out "$tmp/exact.jsonl"
outcomes() { sed 's/.*"outcome": *"\([a-z]*\)".*/\1/' "$1"; }
outcomes "$tmp/fast.jsonl" >"$tmp/o_fast"; outcomes "$tmp/exact.jsonl" >"$tmp/o_exact"
if cmp -s "$tmp/o_fast" "$tmp/o_exact" && [ "$(grep -c critical "$tmp/o_fast")" -gt 0 ]; then passes=$((passes+1)); else
  echo "FAIL exact and differential outcomes differ (or nothing was critical)"; paste "$tmp/o_fast" "$tmp/o_exact" | head; fails=$((fails+1)); fi
sed 's/"metrics": \["accuracy"\]}/"metrics": ["accuracy"], "mitigations": ["sbp", "range"]}/' "$tmp/cnn.json" >"$tmp/cnn_mit.json"
check cnn_mit 0 "$BF" run --local "$tmp/cnn_mit.json" --threads 2 --format json
contains cnn_mit '"mitigations"'
contains cnn_mit_sbp '"sbp"'

# spec rules: fixed point below 8 bits is for weights; a map needs model 'profiled'
cat >"$tmp/act.json" <<JSON
{"model": "$FX/linear.onnx", "dataset": "$FX/linear.eval.safetensors", "trials": 2,
 "faults": {"target": "activations", "representation": "int4"}}
JSON
check act 2 "$BF" run --local "$tmp/act.json"
contains act "/faults/representation"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
