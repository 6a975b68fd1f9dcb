#!/usr/bin/env bash
# A campaign that generates ("generate": {"new_tokens": M}, docs/LM.md) end to
# end: a listed-fault campaign on an LM fixture records, per trial, the
# generation_match, first_divergence and edit_distance that `bitflip generate`
# prints for the same fault (--flip P:I:B), in fp32 and in bf16 (against a copy
# rounded to bf16 by numpy, the stored bit k flipped as fp32 bit k + 16); the result document and the
# trial records carry them; bitflip report shows them; a spec past the limit
# (and the limit raised with --limit spec.new-tokens), a CTR model and target
# inputs are refused naming the field.
# usage: test_campaign_generate.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
FX=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
M=$FX/lm/lm_gpt2_op14.onnx
D=$FX/lm/lm_gpt2_op14.eval.safetensors

# three listed weight faults: exponent bits of an attention weight, the embedding and a bias-free MLP weight
cat >"$tmp/spec.json" <<JSON
{"model": "$M", "dataset": "$D", "faults": {},
 "sampling": {"list": [{"tensor": "h.0.c_attn.weight", "index": 37, "bit": 30},
                       {"tensor": "wte.weight", "index": 163, "bit": 29},
                       {"tensor": "h.1.c_fc.weight", "index": 5, "bit": 2}]},
 "generate": {"new_tokens": 5},
 "metrics": ["perplexity", "token_accuracy", "generation_match", "first_divergence", "edit_distance"]}
JSON
check run 0 "$BF" run --local --threads 2 --format json --out "$tmp/res.json" --trials-out "$tmp/trials.jsonl" "$tmp/spec.json"
for f in "h.0.c_attn.weight:37:30" "wte.weight:163:29" "h.1.c_fc.weight:5:2"; do
  check "generate $f" 0 "$BF" generate "$M" "$D" -n 5 --json --flip "$f"
  cp "$tmp/stdout" "$tmp/gen_${f%%:*}.json"
done
if $PY - "$tmp" <<'PYEOF'
import json, sys, glob
d = sys.argv[1]
recs = [json.loads(l) for l in open(d + "/trials.jsonl")]
res = json.load(open(d + "/res.json"))
assert len(recs) == 3, recs
names = ["h.0.c_attn.weight", "wte.weight", "h.1.c_fc.weight"]
for r, name in zip(recs, names):
    g = json.load(open("%s/gen_%s.json" % (d, name)))["faults"][0]
    for k in ("generation_match", "first_divergence", "edit_distance"):
        assert r["metrics"][k] == g[k], (name, k, r["metrics"][k], g[k])
    if g["generation_match"] < 1:
        assert r["outcome"] in ("critical", "due"), r
gold = res["golden"]
assert gold["generation_match"] == 1 and gold["first_divergence"] == 5 and gold["edit_distance"] == 0, gold
m = res["summary"]["metrics"]
for k in ("generation_match", "first_divergence", "edit_distance"):
    assert m[k]["n"] == 3 and abs(m[k]["mean"] - sum(r["metrics"][k] for r in recs) / 3) < 1e-12, (k, m[k])
assert any(r["metrics"]["generation_match"] < 1 for r in recs), "no listed fault changed a generation"
PYEOF
then passes=$((passes+1)); else echo "FAIL campaign metrics against bitflip generate"; fails=$((fails+1)); fi

# bf16 weights: the campaign decodes with the weights as bf16 stores them and flips stored bit k;
# bitflip generate on a copy rounded to bf16 (to nearest even, here in numpy) with fp32 bit k + 16
# flipped must give the same metrics
$PY - "$M" "$tmp/bf16.onnx" <<'PYEOF'
import sys
import numpy as np
import onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
for i, t in enumerate(m.graph.initializer):
    if t.data_type != onnx.TensorProto.FLOAT:
        continue
    u = numpy_helper.to_array(t).astype(np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    m.graph.initializer[i].CopyFrom(numpy_helper.from_array(u.view(np.float32), t.name))
onnx.save(m, sys.argv[2])
PYEOF
$PY - "$tmp/spec.json" "$tmp/bf16.json" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
s["faults"] = {"representation": "bf16"}
s["sampling"]["list"] = [{"tensor": "h.0.c_attn.weight", "index": 37, "bit": 14},
                         {"tensor": "wte.weight", "index": 163, "bit": 13},
                         {"tensor": "h.1.c_fc.weight", "index": 5, "bit": 7}]
json.dump(s, open(sys.argv[2], "w"))
PYEOF
check "run bf16" 0 "$BF" run --local --threads 1 --format json --out "$tmp/res16.json" --trials-out "$tmp/trials16.jsonl" "$tmp/bf16.json"
for f in "h.0.c_attn.weight:37:30" "wte.weight:163:29" "h.1.c_fc.weight:5:23"; do
  check "generate bf16 $f" 0 "$BF" generate "$tmp/bf16.onnx" "$D" -n 5 --json --flip "$f"
  cp "$tmp/stdout" "$tmp/gen16_${f%%:*}.json"
done
if $PY - "$tmp" <<'PYEOF'
import json, sys
d = sys.argv[1]
recs = [json.loads(l) for l in open(d + "/trials16.jsonl")]
changed = 0
for r, name in zip(recs, ["h.0.c_attn.weight", "wte.weight", "h.1.c_fc.weight"]):
    g = json.load(open("%s/gen16_%s.json" % (d, name)))["faults"][0]
    for k in ("generation_match", "first_divergence", "edit_distance"):
        assert r["metrics"][k] == g[k], (name, k, r["metrics"][k], g[k])
    changed += g["generation_match"] < 1
assert len(recs) == 3 and changed >= 1
PYEOF
then passes=$((passes+1)); else echo "FAIL bf16 campaign metrics against bitflip generate on a bf16-rounded copy"; fails=$((fails+1)); fi

check report 0 "$BF" report -o "$tmp/r.html" "$tmp/res.json"
if grep -q '<td>generation_match</td><td class="num">1</td>' "$tmp/r.html" && grep -q '<td>perplexity</td>' "$tmp/r.html"; then
  passes=$((passes+1)); else echo "FAIL report lacks the language-model metrics"; fails=$((fails+1)); fi

# refusals
sed 's/"new_tokens": 5/"new_tokens": 300/' "$tmp/spec.json" >"$tmp/big.json"
check "past the limit" 2 "$BF" run --local "$tmp/big.json"
contains "past the limit" "/generate/new_tokens: must be 1..256 (the limit spec.new-tokens), got 300"
check "limit raised" 2 "$BF" run --local --limit spec.new-tokens=2000 "$(sed 's/300/1100/' "$tmp/big.json" >"$tmp/big2.json"; echo "$tmp/big2.json")"
contains "limit raised" "must be 1..1024"
$PY - "$tmp/spec.json" "$tmp/inputs.json" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
s["faults"] = {"target": "inputs"}
s.pop("sampling"); s["trials"] = 2
json.dump(s, open(sys.argv[2], "w"))
PYEOF
check "target inputs" 2 "$BF" run --local "$tmp/inputs.json"
contains "target inputs" "not target 'inputs'"
cat >"$tmp/ctr.json" <<JSON
{"model": "$FX/real/deepfm.onnx", "dataset": "$FX/real/deepfm.eval.safetensors", "trials": 2, "faults": {},
 "generate": {"new_tokens": 4}}
JSON
check "not a language model" 3 "$BF" run --local "$tmp/ctr.json"
contains "not a language model" "generation applies to a language_model task"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
