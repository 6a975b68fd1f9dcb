#!/usr/bin/env bash
# bitflip's golden pass step by step and ONNX Runtime's node by node, alternated round by
# round so both see the same load, then the per-node table of bench/node_table.py (medians
# over the rounds; docs/perf/conv.md, h21-eval).
#   bench/node_rounds.sh MODEL OUTDIR [STEPS_BIN (build/bitflip-bench-steps)]
# Env: B (batch, 32), R (rounds, 3), N (bitflip runs a round, 3), REP (ORT passes, 3). 1 thread.
set -euo pipefail
cd "$(dirname "$0")/.."
m=${1:?usage: node_rounds.sh MODEL OUTDIR [STEPS_BIN]}
out=${2:?usage: node_rounds.sh MODEL OUTDIR [STEPS_BIN]}
bin=${3:-build/bitflip-bench-steps}
B=${B:-32} R=${R:-3} N=${N:-3} REP=${REP:-3}
S=bench/models/real/$m
mkdir -p "$out"
steps=() orts=()
for r in $(seq "$R"); do
  echo "round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)" >&2
  "$bin" "$S.onnx" "$B" "$N" > "$out/${m}_b${B}_steps$r.md"
  steps+=("$out/${m}_b${B}_steps$r.md")
  rm -f "$out/${m}_b${B}_ort${r}"_*.json
  node bench/ort_eval.js "$S.onnx" "$S.eval.safetensors" --threads 1 --batch "$B" --repeat "$REP" \
       --ref "$S.ref.json" --profile "$out/${m}_b${B}_ort$r" --cpu-runs "$out/${m}_b${B}_ort$r.cpu" >&2
  orts+=("$(ls "$out/${m}_b${B}_ort${r}"_*.json):$out/${m}_b${B}_ort$r.cpu")
done
echo "end $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)" >&2
/usr/bin/python3 bench/node_table.py "$S.onnx" --steps "${steps[@]}" --ort "${orts[@]}" --by-op
