#!/usr/bin/env bash
# make demo: the main job on a built-in model and eval set. Shows what the
# model is made of, its golden metrics, what single-bit faults in its weights
# do (a sign flip, a low mantissa bit, a high exponent bit), then a campaign:
# thousands of faults, outcome rates with intervals, the layers and bits that
# matter most.
set -euo pipefail
BITFLIP=${1:-build/bitflip}
cd "$(dirname "$0")/.."
fx=tests/fixtures/conformance
# a small CNN trained on scikit-learn's handwritten digits (tests/fixtures/make_fixtures.py)
model=$fx/demo_digits.onnx
data=$fx/demo_digits.eval.safetensors

echo "== bitflip info $model"
"$BITFLIP" info "$model"
echo
echo "== bitflip eval (golden, then single-bit faults in the weights)"
# the first parameter tensor listed by `info` (the line after the table header)
param=$("$BITFLIP" info "$model" | awk '/^  name +shape/ {getline; print $1; exit}')
flips=()
if [ -n "$param" ]; then
  flips=(--flip "$param:0:31" --flip "$param:0:3" --flip "$param:0:30")
fi
"$BITFLIP" eval "$model" "$data" "${flips[@]}" --random-flips 5 --seed 7

echo
echo "== bitflip run --local tests/fixtures/specs/demo_campaign.json"
echo "   (3200 single-bit weight faults, 100 per bit position; which layers and bits matter)"
"$BITFLIP" run --local tests/fixtures/specs/demo_campaign.json --format table --stats
