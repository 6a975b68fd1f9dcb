#!/usr/bin/env bash
# The language_model task from the CLI: `bitflip eval` prints and --json
# gives perplexity, token_accuracy and (multiple choice) choice_accuracy;
# `bitflip help eval` explains the layout; a campaign with the task's
# metrics and a perplexity threshold, its records carrying both metrics,
# the differential engine's records the same as --exact's, shards that
# merge exactly, gates on them.
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
# the same bits on the scalar reference path as on the CPU's (AVX2) one
check run_ref 0 env BITFLIP_SIMD=ref "$BF" run --local "$tmp/lm.json" --threads 2 --format json --out "$tmp/ref_path.json" \
      --trials-out "$tmp/ref_path.jsonl"
if cmp -s "$tmp/t.jsonl" "$tmp/ref_path.jsonl"; then passes=$((passes+1)); else
  echo "FAIL BITFLIP_SIMD=ref trial records differ"; diff "$tmp/t.jsonl" "$tmp/ref_path.jsonl" | head -4; fails=$((fails+1)); fi
"$BF" eval "$D/tiny_lm.onnx" "$D/tiny_lm_mc.eval.safetensors" --json | grep -E '"(perplexity|token_accuracy|choice_accuracy)"' >"$tmp/e1"
BITFLIP_SIMD=ref "$BF" eval "$D/tiny_lm.onnx" "$D/tiny_lm_mc.eval.safetensors" --json | grep -E '"(perplexity|token_accuracy|choice_accuracy)"' >"$tmp/e2"
if [ -s "$tmp/e1" ] && cmp -s "$tmp/e1" "$tmp/e2"; then passes=$((passes+1)); else
  echo "FAIL eval metrics differ between SIMD paths"; cat "$tmp/e1" "$tmp/e2"; fails=$((fails+1)); fi

# shards merge into exactly the unsharded result: the perplexity sums too
check ref 0 "$BF" run --local "$tmp/lm.json" --threads 1 --format json --out "$tmp/ref.json"
for i in 0 1 2; do check "shard$i" 0 "$BF" run --local "$tmp/lm.json" --shard $i/3 --threads 2 --out-dir "$tmp/parts" --format json; done
check merge 0 "$BF" merge "$tmp/parts" --format json --out "$tmp/merged.json"
/usr/bin/python3 - "$tmp/ref.json" "$tmp/merged.json" <<'PY' && passes=$((passes+1)) || { echo "FAIL merged shards differ from the unsharded run"; fails=$((fails+1)); }
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert (a.pop("shards"), b.pop("shards")) == (1, 3)
assert a == b
m = a["summary"]["metrics"]
assert m["perplexity"]["n"] > 0 and m["token_accuracy"]["n"] > 0 and m["choice_accuracy"]["n"] > 0, m
assert a["golden"]["task"] == "language_model"
PY
# a metric of another task is refused when the campaign is made
sed 's/"metric": "perplexity"/"metric": "auc"/' "$tmp/lm.json" >"$tmp/auc.json"
check wrong_metric 3 "$BF" run --local "$tmp/auc.json"
contains wrong_metric "critical metric 'auc' does not apply to a language_model task"

# a model exported with a symbolic sequence axis: eval sizes it from the eval
# set (bf_model_bind_dims) and gives PyTorch's perplexity; info says how to
# size it for the plan memory, and --dims does
L=$2/lm
check info_sym 0 "$BF" info "$L/lm_gpt2_op14.onnx";  contains info_sym "symbolic dim 'sequence' (sized by the eval set"
check info_dims 0 "$BF" info "$L/lm_gpt2_op14.onnx" --dims sequence=16;  contains info_dims "batch 64 "
check info_dims_bad 2 "$BF" info "$L/lm_gpt2_op14.onnx" --dims seq=16
contains info_dims_bad "no graph input has a symbolic dimension 'seq'"
check info_dims_syntax 2 "$BF" info "$L/lm_gpt2_op14.onnx" --dims sequence
contains info_dims_syntax "--dims wants NAME=SIZE"
check eval_seq 0 "$BF" eval "$L/lm_gpt2_op14.onnx" "$L/lm_gpt2_op14.eval.safetensors" --json
/usr/bin/python3 - "$tmp/stdout" "$L/lm_gpt2_op14.ref.json" <<'PY' && passes=$((passes+1)) || { echo "FAIL eval_seq: not PyTorch's perplexity"; fails=$((fails+1)); }
import json, sys
got, ref = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert abs(got["perplexity"] / ref["golden_perplexity"] - 1) < 1e-4, (got["perplexity"], ref["golden_perplexity"])
assert abs(got["token_accuracy"] - ref["golden_token_accuracy"]) < 1e-9
PY

# named fault sites (docs/LM.md): "attn_probs.*" selects each block's attention
# Softmax output (the exporter names block K's /h.K/Softmax); results and
# records carry the site beside the ONNX name; both engines agree
cat >"$tmp/sites.json" <<JSON
{
  "model": "$L/lm_gpt2_op14.onnx",
  "dataset": "$L/lm_gpt2_op14.eval.safetensors",
  "seed": 7,
  "trials": 60,
  "batch": 4,
  "faults": {"target": "activations", "tensors": ["attn_probs.*"], "persistence": "transient"}
}
JSON
check sites_plan 0 "$BF" plan "$tmp/sites.json"
contains sites_plan "attn_probs.1"
check sites_run 0 "$BF" run --local "$tmp/sites.json" --threads 2 --format json --out "$tmp/s.json" --trials-out "$tmp/s.jsonl"
check sites_exact 0 "$BF" run --local "$tmp/sites.json" --threads 2 --exact --format json --out "$tmp/sx.json" --trials-out "$tmp/sx.jsonl"
if cmp -s "$tmp/s.jsonl" "$tmp/sx.jsonl"; then passes=$((passes+1)); else
  echo "FAIL named sites: differential and --exact trial records differ"; diff "$tmp/s.jsonl" "$tmp/sx.jsonl" | head -6; fails=$((fails+1)); fi
/usr/bin/python3 - "$tmp/s.json" "$tmp/s.jsonl" <<'PY' && passes=$((passes+1)) || { echo "FAIL named sites in results"; fails=$((fails+1)); }
import json, sys
r = json.load(open(sys.argv[1]))
truth = {"/h.%d/Softmax_output_0" % k: "attn_probs.%d" % k for k in range(2)}
sites = r["campaign"]["sites"]
assert {s["name"]: s.get("site") for s in sites} == truth, sites
assert all(g["site"] == truth[g["tensor"]] for g in r["by_tensor"]), r["by_tensor"]
n = 0
for line in open(sys.argv[2]):
    for f in json.loads(line)["faults"]:
        assert f["site"] == truth[f["tensor"]], f
        n += 1
assert n == 60, n
PY
sed 's/"attn_probs\.\*"/"router_logits.*"/' "$tmp/sites.json" >"$tmp/nosite.json"
check sites_none 3 "$BF" run --local "$tmp/nosite.json"
contains sites_none "tensor pattern 'router_logits.*' matches no node output"
contains sites_none_hint "this model's named fault sites: attn_scores.0, attn_probs.0, attn_scores.1, attn_probs.1"

# a KV-cache export's cache entries through target "inputs" (docs/LM.md): each
# fault's old value is the eval set's cache tensor at [sample, head, pos, dim]
# of the record's index; both engines agree
cat >"$tmp/kv.json" <<JSON
{
  "model": "$L/lm_gpt2_kv_op15.onnx",
  "dataset": "$L/lm_gpt2_kv_op15.eval.safetensors",
  "seed": 3, "trials": 40, "batch": 4,
  "faults": {"target": "inputs", "tensors": ["past_key_values.1.*"], "persistence": "transient"}
}
JSON
check kv_run 0 "$BF" run --local "$tmp/kv.json" --threads 2 --format json --out "$tmp/kv.out.json" --trials-out "$tmp/kv.jsonl"
check kv_exact 0 "$BF" run --local "$tmp/kv.json" --threads 2 --exact --format json --out "$tmp/kvx.out.json" --trials-out "$tmp/kvx.jsonl"
if cmp -s "$tmp/kv.jsonl" "$tmp/kvx.jsonl"; then passes=$((passes+1)); else
  echo "FAIL KV cache: differential and --exact trial records differ"; diff "$tmp/kv.jsonl" "$tmp/kvx.jsonl" | head -6; fails=$((fails+1)); fi
/usr/bin/python3 - "$L/lm_gpt2_kv_op15.eval.safetensors" "$tmp/kv.jsonl" <<'PY' && passes=$((passes+1)) || { echo "FAIL KV cache faults"; fails=$((fails+1)); }
import json, struct, sys
import numpy as np
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
def cache(k):
    s, e = h[k]["data_offsets"]
    return np.frombuffer(b[8 + n + s:8 + n + e], dtype=np.float32).reshape(h[k]["shape"])
seen = set()
for line in open(sys.argv[2]):
    for f in json.loads(line)["faults"]:
        assert f["tensor"] in ("past_key_values.1.key", "past_key_values.1.value"), f
        t = cache(f["tensor"])
        head, rest = divmod(f["index"], t.shape[2] * t.shape[3])
        pos, dim = divmod(rest, t.shape[3])
        assert t[f["sample"], head, pos, dim] == np.float32(f["old"]), (f, t[f["sample"], head, pos, dim])
        seen.add(f["tensor"])
assert len(seen) == 2, seen
PY

# target kv_cache (docs/LM.md): the same cache by layer, kind, head and
# position; over the past positions (0..7) a fault's old value is the eval
# set's cache at [sample, head, position, dim] as the record names them, the
# record's index is that entry in present.K ([N, H, P+T, D]); both engines agree
cat >"$tmp/kvc.json" <<JSON
{
  "model": "$L/lm_gpt2_kv_op15.onnx",
  "dataset": "$L/lm_gpt2_kv_op15.eval.safetensors",
  "seed": 4, "trials": 40, "batch": 4,
  "faults": {"target": "kv_cache", "kv": {"layers": [1], "heads": [0, 2], "positions": [0, 3, 7]}}
}
JSON
check kvc_run 0 "$BF" run --local "$tmp/kvc.json" --threads 2 --format json --out "$tmp/kvc.out.json" --trials-out "$tmp/kvc.jsonl"
check kvc_exact 0 "$BF" run --local "$tmp/kvc.json" --threads 2 --exact --format json --out "$tmp/kvcx.out.json" --trials-out "$tmp/kvcx.jsonl"
if cmp -s "$tmp/kvc.jsonl" "$tmp/kvcx.jsonl"; then passes=$((passes+1)); else
  echo "FAIL kv_cache: differential and --exact trial records differ"; diff "$tmp/kvc.jsonl" "$tmp/kvcx.jsonl" | head -6; fails=$((fails+1)); fi
/usr/bin/python3 - "$L/lm_gpt2_kv_op15.eval.safetensors" "$tmp/kvc.jsonl" "$tmp/kvc.out.json" <<'PY' && passes=$((passes+1)) || { echo "FAIL kv_cache faults"; fails=$((fails+1)); }
import json, struct, sys
import numpy as np
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
def cache(k):
    s, e = h[k]["data_offsets"]
    return np.frombuffer(b[8 + n + s:8 + n + e], dtype=np.float32).reshape(h[k]["shape"])
seen = set()
for line in open(sys.argv[2]):
    for f in json.loads(line)["faults"]:
        assert f["site"] == "%s_cache.1" % f["kind"] and f["layer"] == 1, f
        assert f["tensor"] == "present.1.%s" % ("key" if f["kind"] == "k" else "value"), f
        assert f["head"] in (0, 2) and f["position"] in (0, 3, 7), f
        t = cache("past_key_values.1.%s" % ("key" if f["kind"] == "k" else "value"))
        D, S = t.shape[3], t.shape[2] + 8
        assert f["index"] == (f["head"] * S + f["position"]) * D + f["dim"], f
        assert t[f["sample"], f["head"], f["position"], f["dim"]] == np.float32(f["old"]), f
        seen.add(f["kind"])
assert seen == {"k", "v"}, seen
sites = json.load(open(sys.argv[3]))["campaign"]["sites"]
assert [(s["site"], s["elements"]) for s in sites] == [("k_cache.1", 2 * 3 * 8), ("v_cache.1", 2 * 3 * 8)], sites
assert sites[0]["kv"] == {"layer": 1, "kind": "k", "heads": 4, "positions": 16, "dim": 8}, sites[0]
PY
sed 's/"heads": \[0, 2\]/"heads": [0, 9]/' "$tmp/kvc.json" >"$tmp/kvc_bad.json"
check kvc_head 3 "$BF" run --local "$tmp/kvc_bad.json"
contains kvc_head "faults.kv.heads.1: head 9 does not exist (k_cache.1 has 4: 0..3)"
sed 's/"target": "kv_cache"/"target": "activations"/' "$tmp/kvc.json" >"$tmp/kvc_target.json"
check kvc_target 2 "$BF" run --local "$tmp/kvc_target.json"
contains kvc_target "/faults/kv"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
