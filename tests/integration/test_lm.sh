#!/usr/bin/env bash
# A language model through the daemon: upload tiny_lm and its multiple-choice
# eval set, see the dataset's layout in its summary, run a campaign with the
# language_model metrics and a perplexity threshold on the workers, and get
# the same results and trial records as `bitflip run --local`; a campaign
# whose critical metric belongs to another task fails, saying why.
# usage: test_lm.sh BITFLIPD BITFLIP FIXTURES_DIR
set -u
BFD=$1 BF=$2 FIX=$3
. "$(dirname "$0")/lib.sh"
M=$FIX/lmtask/tiny_lm.onnx
D=$FIX/lmtask/tiny_lm_mc.eval.safetensors
OCT=(-H 'Content-Type: application/octet-stream')
JSON=(-H 'Content-Type: application/json')

start_daemon "$tmp/data" || exit 1
req upload_model 201 "${OCT[@]}" --data-binary @"$M" "$URL/v1/models?name=tiny_lm"
MID=$(jget "j['id']")
req upload_dataset 201 "${OCT[@]}" --data-binary @"$D" "$URL/v1/datasets?name=tiny_lm_mc"
DID=$(jget "j['id']")
eq dataset_summary "$(jget "j['samples'], j['labels'], sorted(t['name'] for t in j['tensors'])")" \
   "12 True ['input_ids', 'labels', 'mc_answer', 'mc_item']"

spec() {  # spec FILE MODEL DATASET CRITICAL_METRIC
  cat >"$1" <<JSON
{"model": "$2", "dataset": "$3", "seed": 9, "trials": 120, "batch": 4,
 "faults": {"target": "weights", "tensors": ["*"], "model": "bitflip", "bits": 1},
 "metrics": ["perplexity", "token_accuracy", "choice_accuracy", "top1_mismatch"],
 "critical": {"metric": "$4", "delta": 0.5}}
JSON
}
spec "$tmp/remote.json" "$MID" "$DID" perplexity
spec "$tmp/local.json" "$M" "$D" perplexity
req submit 202 "${JSON[@]}" --data-binary @"$tmp/remote.json" "$URL/v1/campaigns"
CID=$(jget "j['id']")
wait_state "$CID" succeeded 120 && ok || bad "the LM campaign did not succeed"
req results_json 200 "$URL/v1/campaigns/$CID/results"
cp "$tmp/body" "$tmp/remote_result.json"
"$BF" run --local "$tmp/local.json" --format json --trials-out "$tmp/local_trials.jsonl" >"$tmp/local_result.json" 2>/dev/null
$PY - "$tmp/local_result.json" "$tmp/remote_result.json" <<'PYEOF' && ok || bad "daemon LM result differs from the CLI's"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for k in ("summary", "by_tensor", "by_bit", "golden"):
    assert a[k] == b[k], (k, a[k], b[k])
g = b["golden"]
assert g["task"] == "language_model" and g["choice_accuracy"] == 0.75, g
m = b["summary"]["metrics"]
assert all(m[k]["n"] > 0 for k in ("perplexity", "token_accuracy", "choice_accuracy")), m
PYEOF
req results_trials 200 "$URL/v1/campaigns/$CID/results?trials=true"
$PY - "$tmp/local_trials.jsonl" "$tmp/body" <<'PYEOF' && ok || bad "per-trial records differ from the CLI's --trials-out"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = json.load(open(sys.argv[2])) if open(sys.argv[2]).read(1) == "[" else [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 120, (len(a), len(b))
assert a == b, next((x, y) for x, y in zip(a, b) if x != y)
assert all("perplexity" in t["metrics"] for t in b), b[0]
PYEOF

# a metric of another task: the campaign fails, saying why
spec "$tmp/auc.json" "$MID" "$DID" auc
req submit_auc 202 "${JSON[@]}" --data-binary @"$tmp/auc.json" "$URL/v1/campaigns"
AID=$(jget "j['id']")
wait_state "$AID" failed 60 && ok || bad "the campaign with a critical metric of another task did not fail"
req failed_state 200 "$URL/v1/campaigns/$AID"
body_has failed_reason "does not apply to a language_model task"
finish
