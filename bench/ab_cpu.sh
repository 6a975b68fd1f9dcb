#!/usr/bin/env bash
# CPU seconds of one golden pass, bitflip builds against each other and ONNX Runtime, in
# one run: each peer runs `--repeat 1` and `--repeat 1+P`, alternated round by round, and
# the difference over P is the CPU of a pass without loading and warm-up, which a loaded
# machine distorts less than wall time (docs/BENCHMARKS.md, "Where the kernel's time goes").
#   bench/ab_cpu.sh MODEL BITFLIP... [ort]      (MODEL from bench/real_bench.py's bench/models/real)
# Env: P (extra passes, 3), R (rounds, 2), B (batch, 32). 1 thread.
set -euo pipefail
cd "$(dirname "$0")/.."
m=${1:?usage: ab_cpu.sh MODEL BITFLIP... [ort]}
shift
P=${P:-3} R=${R:-2} B=${B:-32}
S=bench/models/real/$m
[ -f "$S.onnx" ] || { echo "ab_cpu: $S.onnx missing: run bench/real_bench.py once to make it" >&2; exit 2; }
cpu() { /usr/bin/time -f '%U %S' "$@" 2>&1 >/dev/null | tail -1 | awk '{printf "%.3f", $1 + $2}'; }
for r in $(seq "$R"); do
  for peer in "$@"; do
    if [ "$peer" = ort ]; then
      run=(node bench/ort_eval.js "$S.onnx" "$S.eval.safetensors" --threads 1 --batch "$B" --ref "$S.ref.json" --json --repeat)
    else
      run=("$peer" eval "$S.onnx" "$S.eval.safetensors" --threads 1 --batch "$B" --json --repeat)
    fi
    a=$(cpu "${run[@]}" 1)
    b=$(cpu "${run[@]}" $((1 + P)))
    echo "$m b$B round$r $peer repeat1 $a repeat$((1 + P)) $b per-pass $(awk -v a="$a" -v b="$b" -v p="$P" 'BEGIN { printf "%.3f", (b - a) / p }')"
  done
done
