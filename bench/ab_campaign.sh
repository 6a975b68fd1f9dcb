#!/usr/bin/env bash
# CPU seconds of a whole `bitflip run --local` campaign (load, golden pass, trials: setup
# counted), bitflip builds against each other in one run, alternated round by round, so
# that a loaded machine weighs on each alike (CPU time, not wall time: docs/BENCHMARKS.md).
#   bench/ab_campaign.sh STEM BITFLIP...     (STEM.onnx and STEM.eval.safetensors: e.g.
#                                             bench/models/real/mobilenet_v2 from real_bench.py,
#                                             bench/models/vision/lraspp_mobilenet_v3_large_16
#                                             from det_bench.py)
# Env: T (trials, 20), B (batch, 8), R (rounds, 2), SEED (7), TENSORS (a JSON list of tensor
# patterns, '["*"]'). 1 thread; uniform single-bit fp32 faults in every weight (BatchNorm
# statistics included) unless TENSORS narrows them, as the benchmarks' campaigns.
# Also prints the golden pass's CPU (--stats) and the share of the pass the trials re-ran.
# Prints per run: CPU seconds (user + sys), and the --stats trial rate and setup.
set -euo pipefail
stem=${1:?usage: ab_campaign.sh STEM BITFLIP...}
shift
T=${T:-20} B=${B:-8} R=${R:-2} SEED=${SEED:-7} TENSORS=${TENSORS:-'["*"]'}
[ -f "$stem.onnx" ] || { echo "ab_campaign: $stem.onnx missing" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/spec.json" <<JSON
{"model": "$(realpath "$stem.onnx")", "dataset": "$(realpath "$stem.eval.safetensors")", "seed": $SEED,
 "trials": $T, "batch": $B, "sampling": "uniform",
 "faults": {"target": "weights", "tensors": $TENSORS, "model": "bitflip", "bits": 1, "representation": "fp32"}}
JSON
for r in $(seq "$R"); do
  i=0
  for peer in "$@"; do
    i=$((i + 1))
    /usr/bin/time -f '%U %S' -o "$dir/time" "$peer" run --local "$dir/spec.json" --threads 1 --stats --format json \
      --trials-out "$dir/trials$i.jsonl" > /dev/null 2> "$dir/err"
    cpu=$(awk '{printf "%.2f", $1 + $2}' "$dir/time")
    st=$(grep -o '[0-9]* trials in [0-9.]* s ([0-9.]* trials/s)' "$dir/err" | tail -1)
    setup=$(grep -o 'setup [0-9.]* s before' "$dir/err" | tail -1)
    gold=$(grep -o 'golden pass filling the cache [0-9.]* s ([0-9.]* s of CPU)' "$dir/err" | grep -o '([0-9.]* s of CPU)' || true)
    share=$(grep -o 're-ran [0-9.]*%' "$dir/err" || true)
    echo "$(basename "$stem") round$r $peer cpu ${cpu}s; $st; $setup; golden pass $gold; $share"
  done
  # the builds' trial records must be the same bytes
  for j in $(seq 2 "$i"); do cmp -s "$dir/trials1.jsonl" "$dir/trials$j.jsonl" || echo "ab_campaign: records of peer $j differ from peer 1's" >&2; done
done
