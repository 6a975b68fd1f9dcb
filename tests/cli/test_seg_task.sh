#!/usr/bin/env bash
# The segmentation task from the CLI: `bitflip eval` prints and --json gives
# miou and pixel_accuracy (the reference values of tests/fixtures/segtask,
# made by make_segtask.py from torch.argmax and sklearn); `bitflip help eval`
# explains the layout; a flip reports changed pixels; a label out of range
# is refused with the pixel named; a campaign with critical.pixels carries
# the task's metrics in its records, its outcomes the same in the
# differential engine and --exact; a gate on golden_miou.
# usage: test_seg_task.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
D=$2/segtask
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"

check help 0 "$BF" help eval;   contains help_seg "mIoU"
check eval 0 "$BF" eval "$D/tiny_seg.onnx" "$D/tiny_seg.eval.safetensors"
contains eval_task "task segmentation";  contains eval_miou "miou 0.3440";  contains eval_pa "pixel_accuracy 0.7341"
check eval_json 0 "$BF" eval "$D/tiny_seg.onnx" "$D/tiny_seg.eval.safetensors" --json
contains json_task '"task": "segmentation"';  contains json_miou '"miou": 0.3440';  contains json_pa '"pixel_accuracy": 0.7340'
check eval_flip 0 "$BF" eval "$D/tiny_seg.onnx" "$D/tiny_seg.eval.safetensors" --flip c2.weight:3:30 --json
contains eval_flip '"miou"';  contains eval_flip_changed '"changed_predictions"'
# hostile: metric_case_2 has 6 classes' labels; against this 5-class model's input it lacks 'input'
check eval_bad 3 "$BF" eval "$D/tiny_seg.onnx" "$D/metric_case_2.safetensors"
contains eval_bad "no tensor named 'input'"

cat >"$tmp/seg.json" <<JSON
{
  "model": "$D/tiny_seg.onnx",
  "dataset": "$D/tiny_seg.eval.safetensors",
  "seed": 7,
  "trials": 120,
  "batch": 4,
  "faults": {"target": "weights", "tensors": ["*"], "model": "bitflip", "bits": 1},
  "metrics": ["miou", "pixel_accuracy", "top1_mismatch"],
  "critical": {"pixels": 0.05}
}
JSON
check run 0 "$BF" run --local "$tmp/seg.json" --threads 2 --format json --out "$tmp/r.json" --trials-out "$tmp/t.jsonl"
contains run_golden '"miou"'
grep -q '"miou"' "$tmp/t.jsonl" && grep -q '"pixel_accuracy"' "$tmp/t.jsonl" \
  && passes=$((passes+1)) || { echo "FAIL trial records lack the task's metrics"; head -2 "$tmp/t.jsonl"; fails=$((fails+1)); }
check run_exact 0 "$BF" run --local "$tmp/seg.json" --threads 2 --exact --format json --out "$tmp/x.json" --trials-out "$tmp/x.jsonl"
grep -o '"outcome": *"[a-z]*"' "$tmp/t.jsonl" >"$tmp/o1"
grep -o '"outcome": *"[a-z]*"' "$tmp/x.jsonl" >"$tmp/o2"
if [ -s "$tmp/o1" ] && cmp -s "$tmp/o1" "$tmp/o2"; then passes=$((passes+1)); else
  echo "FAIL differential and --exact outcomes differ"; diff "$tmp/o1" "$tmp/o2" | head -6; fails=$((fails+1)); fi
# every record byte for byte, and the golden metrics: the differential
# engine's golden pass keeps each image's arg-max for its trials' scorer and
# judge (campaign_golden.c), the exact engine's run computes its own
if cmp -s "$tmp/t.jsonl" "$tmp/x.jsonl"; then passes=$((passes+1)); else
  echo "FAIL differential and --exact trial records differ"; cmp "$tmp/t.jsonl" "$tmp/x.jsonl"; fails=$((fails+1)); fi
sed -n '/"golden": {/,/}/p' "$tmp/r.json" >"$tmp/g1"
sed -n '/"golden": {/,/}/p' "$tmp/x.json" >"$tmp/g2"
if grep -q miou "$tmp/g1" && cmp -s "$tmp/g1" "$tmp/g2"; then passes=$((passes+1)); else
  echo "FAIL differential and --exact golden metrics differ"; diff "$tmp/g1" "$tmp/g2" | head -6; fails=$((fails+1)); fi
check gate 0 "$BF" run --local "$tmp/seg.json" --gate 'golden_miou>0.34'
check gate_fail 1 "$BF" run --local "$tmp/seg.json" --gate 'golden_miou>0.35'
# critical.pixels is a segmentation rule: refused on another task's spec
sed 's/"pixels": 0.05/"pixels": 1.5/' "$tmp/seg.json" >"$tmp/bad.json"
check spec_bad 2 "$BF" run --local "$tmp/bad.json"
contains spec_bad "/critical/pixels"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
