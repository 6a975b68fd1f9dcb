#!/usr/bin/env bash
# The language_model task from the CLI: `bitflip eval` prints and --json
# gives perplexity, token_accuracy and (multiple choice) choice_accuracy;
# `bitflip help eval` explains the layout; a campaign with the task's
# metrics and a perplexity threshold, its records carrying both metrics,
# the differential engine's records the same as --exact's, gates on them.
# usage: test_lm_task.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
D=$2/lmtask
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"

check help 0 "$BF" help eval;   contains help_lm "perplexity";  contains help_mc "mc_item"
check eval 0 "$BF" eval "$D/tiny_lm.onnx" "$D/tiny_lm.eval.safetensors"
contains eval_task "task language_model";  contains eval_ppl "perplexity 4.17";  contains eval_tok "token_accuracy 0.6731"
check eval_json 0 "$BF" eval "$D/tiny_lm.onnx" "$D/tiny_lm_mc.eval.safetensors" --json
contains json_task '"task": "language_model"';  contains json_choice '"choice_accuracy": 0.75'
contains json_ppl '"perplexity": 12.14';  contains json_tok '"token_accuracy": 0.375'
check eval_flip 0 "$BF" eval "$D/tiny_lm.onnx" "$D/tiny_lm.eval.safetensors" --flip fc2.weight:3:30
contains eval_flip "perplexity"
# hostile: an eval set for another model's vocabulary
check eval_bad 3 "$BF" eval "$D/tiny_lm.onnx" "$D/metric_case_0.safetensors"
contains eval_bad "no tensor named 'input_ids'"

cat >"$tmp/lm.json" <<JSON
{
  "model": "$D/tiny_lm.onnx",
  "dataset": "$D/tiny_lm_mc.eval.safetensors",
  "seed": 5,
  "trials": 200,
  "batch": 4,
  "faults": {"target": "weights", "tensors": ["*"], "model": "bitflip", "bits": 1},
  "metrics": ["perplexity", "token_accuracy", "choice_accuracy", "top1_mismatch"],
  "critical": {"metric": "perplexity", "delta": 0.5}
}
JSON
check run 0 "$BF" run --local "$tmp/lm.json" --threads 2 --format json --out "$tmp/r.json" --trials-out "$tmp/t.jsonl"
contains run_golden '"perplexity"'
grep -q '"token_accuracy"' "$tmp/t.jsonl" && grep -q '"perplexity"' "$tmp/t.jsonl" && grep -q '"choice_accuracy"' "$tmp/t.jsonl" \
  && passes=$((passes+1)) || { echo "FAIL trial records lack the task's metrics"; head -2 "$tmp/t.jsonl"; fails=$((fails+1)); }
check run_exact 0 "$BF" run --local "$tmp/lm.json" --threads 2 --exact --format json --out "$tmp/x.json" --trials-out "$tmp/x.jsonl"
if cmp -s "$tmp/t.jsonl" "$tmp/x.jsonl"; then passes=$((passes+1)); else
  echo "FAIL differential and --exact trial records differ"; diff "$tmp/t.jsonl" "$tmp/x.jsonl" | head -6; fails=$((fails+1)); fi
check gate 0 "$BF" run --local "$tmp/lm.json" --gate 'golden_perplexity<13' --gate 'golden_choice_accuracy>=0.75'
check gate_fail 1 "$BF" run --local "$tmp/lm.json" --gate 'golden_perplexity<12'
# a metric of another task is refused when the campaign is made
sed 's/"metric": "perplexity"/"metric": "auc"/' "$tmp/lm.json" >"$tmp/auc.json"
check wrong_metric 3 "$BF" run --local "$tmp/auc.json"
contains wrong_metric "critical metric 'auc' does not apply to a language_model task"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
