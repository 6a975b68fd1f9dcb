#!/usr/bin/env bash
# Golden eval of two builds of bitflip, ONNX Runtime and (TORCH=1) PyTorch on the
# real models, in one run: rounds alternate the peers, so a loaded machine slows
# them alike (docs/BENCHMARKS.md, "Convolutions against ONNX Runtime").
#   bench/ab_eval.sh OLD_BITFLIP NEW_BITFLIP
# Env: MODELS (default "mobilenet_v2 resnet18", made by bench/real_bench.py into
# bench/models/real/), ROUNDS (3), T (threads, 1), TORCH (set: one PyTorch run per model).
# Prints "model tT roundR bB peer samples/s", one line per run (each run the best of 2 passes).
set -euo pipefail
old=${1:?usage: ab_eval.sh OLD_BITFLIP NEW_BITFLIP}
new=${2:?usage: ab_eval.sh OLD_BITFLIP NEW_BITFLIP}
cd "$(dirname "$0")/.."
T=${T:-1}
export OMP_NUM_THREADS=$T OPENBLAS_NUM_THREADS=$T MKL_NUM_THREADS=$T OMP_WAIT_POLICY=PASSIVE
rate() { /usr/bin/python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["samples_per_s"])'; }
for m in ${MODELS:-mobilenet_v2 resnet18}; do
  S=bench/models/real/$m
  [ -f "$S.onnx" ] || { echo "ab_eval: $S.onnx missing: run bench/real_bench.py once to make it" >&2; exit 2; }
  for r in $(seq "${ROUNDS:-3}"); do
    for b in 4 32; do
      for who in old new; do
        bin=$old; [ $who = new ] && bin=$new
        echo "$m t$T round$r b$b $who $("$bin" eval "$S.onnx" "$S.eval.safetensors" --threads "$T" --batch $b --repeat 2 --json 2>/dev/null | rate)"
      done
      echo "$m t$T round$r b$b ort $(node bench/ort_eval.js "$S.onnx" "$S.eval.safetensors" --threads "$T" --batch $b --repeat 2 --ref "$S.ref.json" --json 2>/dev/null | rate)"
    done
  done
  if [ -n "${TORCH:-}" ]; then
    echo "$m t$T torch $(/usr/bin/python3 bench/real_bench.py --torch-peer "$m" --threads "$T" --batch 32 --repeat 2 2>/dev/null | rate)"
  fi
done
