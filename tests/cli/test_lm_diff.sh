#!/usr/bin/env bash
# The differential engine on language models (issue 30) gives the records
# of --exact bit for bit, on the LM fixtures (tests/fixtures/lm):
# - GPT-2 with tied embeddings: its logits MatMul reads the token table
#   through a Transpose, so a fault in wte.weight moves an embedding row
#   (the sequences that look it up) and one logit column in every batch,
#   which the engine recomputes alone (diffexec.c, try_matmul);
#   faults confined to wte.weight, single-bit and BER, and uniform weight
#   faults (MatMul weights take the same one-column path);
# - Llama (untied lm_head, a MatMul of a parameter) and a KV-cache export,
#   uniform weight faults;
# - transient activation faults (one token of one sequence) on GPT-2 and
#   Llama, and transient faults in the KV-cache exports' past_key_values
#   inputs (tests/unit/test_diff_lm.c checks the same fault by fault, with
#   the structure: rows before the fault's position not recomputed).
# The exact engine is the reference (checked against PyTorch by
# conformance_lm), never the differential engine's own output.
# usage: test_lm_diff.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
D=$2/lm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"

same() {   # same NAME MODEL FAULTS_JSON [COUNT_JSON] : differential and --exact records agree
  local name=$1 model=$2 faults=$3 count=${4:-'"seed": 30, "trials": 120'}
  cat >"$tmp/$name.json" <<JSON
{"model": "$D/$model.onnx", "dataset": "$D/$model.eval.safetensors", $count, "batch": 4,
 "faults": $faults, "metrics": ["perplexity", "token_accuracy"]}
JSON
  check "${name}_diff" 0 "$BF" run --local "$tmp/$name.json" --threads 2 --format json --trials-out "$tmp/$name.d.jsonl"
  # Under ThreadSanitizer (BF_TSAN=1: build-tsan's ctest) the differential
  # run alone: its golden pass runs every op of the model on both workers'
  # plans, as the exact run's full passes do, and the records' comparison is
  # behaviour, which the release build and ASan check (tests/README.md).
  [ -n "${BF_TSAN:-}" ] && return 0
  check "${name}_exact" 0 "$BF" run --local "$tmp/$name.json" --threads 2 --exact --format json --trials-out "$tmp/$name.x.jsonl"
  if [ -s "$tmp/$name.d.jsonl" ] && cmp -s "$tmp/$name.d.jsonl" "$tmp/$name.x.jsonl"; then passes=$((passes+1)); else
    echo "FAIL $name: differential and --exact trial records differ"
    diff "$tmp/$name.d.jsonl" "$tmp/$name.x.jsonl" | head -6; fails=$((fails+1)); fi
}

same gpt2_wte lm_gpt2_op14 '{"target": "weights", "tensors": ["wte.weight"], "model": "bitflip", "bits": 1}'
same gpt2_wte_ber lm_gpt2_op14 '{"target": "weights", "tensors": ["wte.weight"], "model": "ber", "rates": [2e-4, 1e-3], "repeats": 30}' '"seed": 30'
same gpt2_uniform lm_gpt2_op14 '{"target": "weights", "model": "bitflip", "bits": 1}'
same llama_uniform lm_llama_half_ri_triu_op15 '{"target": "weights", "model": "bitflip", "bits": 1}'
same gpt2_kv_uniform lm_gpt2_kv_op15 '{"target": "weights", "model": "bitflip", "bits": 1}'
# faults at a position (a transient activation fault hits one token of one
# sequence; a KV-cache entry one past position): row mode on the sequence,
# each MatMul downstream recomputing only its changed token rows
same gpt2_act lm_gpt2_op14 '{"target": "activations", "model": "bitflip", "bits": 1, "persistence": "transient"}'
same llama_act lm_llama_il_expand_buf_op16 '{"target": "activations", "model": "bitflip", "bits": 1, "persistence": "transient"}'
same gpt2_kv_inputs lm_gpt2_kv_op15 '{"target": "inputs", "tensors": ["past_key_values.*"], "model": "bitflip", "bits": 1, "persistence": "transient"}'
same llama_kv_inputs lm_llama_kv_op17 '{"target": "inputs", "tensors": ["past_key_values.*"], "model": "bitflip", "bits": 1, "persistence": "transient"}'

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
