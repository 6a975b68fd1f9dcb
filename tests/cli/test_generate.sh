#!/usr/bin/env bash
# bitflip generate end to end: the tokens PyTorch decoded (tests/fixtures/gen/
# reference.json, made by make_gen.py), golden and under a KV-cache fault and
# an attention-probability fault named by its site; the metrics recomputed
# from the token lists; the text report; bitflip info's KV cache and sites;
# hostile arguments refused with exit 2 or 3 and a message naming them.
# usage: test_generate.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
FX=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"
G=$FX/gen
PY=/usr/bin/python3

# golden, a KV fault and attn_probs.0 at step 2 (reference: gpt's first kv and probs cases)
check json 0 "$BF" generate "$G/gpt_kv.onnx" "$G/prompts.safetensors" -n 8 --json \
  --kv-flip 0:k:1:2:3:30 --act-flip attn_probs.0:2:10:30
cp "$tmp/stdout" "$tmp/gen.json"
if $PY - "$tmp/gen.json" "$G/reference.json" <<'PYEOF'
import json, sys
got, ref = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
cases = ref["models"][0]["cases"]
gold = cases[0]["tokens_kv"]
assert got["golden"] == gold, "golden tokens differ from PyTorch's"
kv = next(c for c in cases if c["kind"] == "kv" and (c["layer"], c["kv"], c["head"], c["pos"], c["dim"], c["bit"]) == (0, "k", 1, 2, 3, 30))
pr = next(c for c in cases if c["kind"] == "probs" and (c["layer"], c["step"], c["index_kv"], c["bit"]) == (0, 2, 10, 30))
assert [f["kind"] for f in got["faults"]] == ["kv", "activation"]
assert got["faults"][1]["value"] == "/blocks.0/Softmax_output_0", got["faults"][1]
def lev(a, b):
    p = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        c = [i]
        for j, y in enumerate(b, 1):
            c.append(min(p[j - 1] + (x != y), p[j] + 1, c[j - 1] + 1))
        p = c
    return p[-1]
for f, want in zip(got["faults"], (kv, pr)):
    assert f["tokens"] == want["tokens_kv"], (f["kind"], "tokens differ from PyTorch's")
    n, m = len(gold), len(gold[0])
    first = [next((k for k in range(m) if g[k] != t[k]), m) for g, t in zip(gold, f["tokens"])]
    assert abs(f["generation_match"] - sum(x == m for x in first) / n) < 1e-12
    assert abs(f["first_divergence"] - sum(first) / n) < 1e-12
    assert abs(f["edit_distance"] - sum(lev(g, t) for g, t in zip(gold, f["tokens"])) / n) < 1e-12
assert got["kv_cache"] == {"layers": 2, "heads": 4, "head_dim": 8}
PYEOF
then passes=$((passes+1)); else echo "FAIL json: tokens or metrics"; fails=$((fails+1)); fi

# the re-run prefix (no cache) and a weight fault, as text; --together
check text 0 "$BF" generate "$G/gpt.onnx" "$G/prompts.safetensors" -n 8 --flip gpt.blocks.0.w_k:37:30 --show 1
contains text "no KV cache: the prefix re-run each step"
contains text "weight gpt.blocks.0.w_k[37] bit 30"
contains text "generation_match 0.0000"
check together 0 "$BF" generate "$G/llama_kv.onnx" "$G/prompts.safetensors" -n 4 --together --json \
  --kv-flip 0:v:1:0:7:31 --act-flip logits:1:8:31 --prompt 2
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); f=d["faults"]; assert len(f)==1 and f[0]["kind"]=="together" and len(f[0]["faults"])==2 and f[0]["faults"][0]["prompt"]==2' \
  "$tmp/stdout" && passes=$((passes+1)) || { echo "FAIL together"; fails=$((fails+1)); }

# bitflip info: the KV cache's entries and the named sites
check info 0 "$BF" info "$G/gpt_kv.onnx"
contains info "layer 1   k: past_key_values.1.key -> present.1.key"
contains info "attn_probs.1       /blocks.1/Softmax_output_0"
contains info "k_cache.1          present.1.key"
check info_json 0 "$BF" info --json "$FX/lm/lm_moe_scatter_op14.onnx"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["kv_cache"] is None; assert [s["name"] for s in d["sites"]][4:]==["router_logits.0","router_logits.1","k_cache.0","v_cache.0","k_cache.1","v_cache.1"]' \
  "$tmp/stdout" && passes=$((passes+1)) || { echo "FAIL info_json sites"; fails=$((fails+1)); }

# hostile arguments
check n0 2 "$BF" generate "$G/gpt_kv.onnx" "$G/prompts.safetensors" -n 0
contains n0 "--new-tokens must be an integer from 1 to 1024"
check nhuge 2 "$BF" generate "$G/gpt_kv.onnx" "$G/prompts.safetensors" -n 99999999999
check kv_syntax 2 "$BF" generate "$G/gpt_kv.onnx" "$G/prompts.safetensors" --kv-flip 0:x:1:2:3:30
contains kv_syntax "--kv-flip wants LAYER:k|v:HEAD:POS:DIM:BIT"
check kv_layer 2 "$BF" generate "$G/gpt_kv.onnx" "$G/prompts.safetensors" -n 4 --kv-flip 5:k:0:0:0:1
contains kv_layer "layer 5 does not exist (the cache has layers 0 .. 1)"
check kv_unwritten 2 "$BF" generate "$G/gpt_kv.onnx" "$G/prompts.safetensors" -n 4 --kv-flip 0:k:0:8:0:1
contains kv_unwritten "position 8 is never written"
check kv_nocache 2 "$BF" generate "$G/gpt.onnx" "$G/prompts.safetensors" -n 4 --kv-flip 0:k:0:1:0:1
contains kv_nocache "this export has no KV cache"
check kv_forced_off 2 "$BF" generate "$G/gpt_kv.onnx" "$G/prompts.safetensors" -n 4 --no-cache --kv-flip 0:k:0:1:0:1
contains kv_forced_off "re-runs the prefix"
check act_name 2 "$BF" generate "$G/gpt_kv.onnx" "$G/prompts.safetensors" -n 4 --act-flip nosuch:0:0:1
contains act_name "no value or fault site 'nosuch'"
check act_step 2 "$BF" generate "$G/gpt_kv.onnx" "$G/prompts.safetensors" -n 4 --act-flip attn_probs.0:4:0:1
contains act_step "step 4 does not exist (0 .. 3)"
check prompt 2 "$BF" generate "$G/gpt_kv.onnx" "$G/prompts.safetensors" --prompt 6 --kv-flip 0:k:0:1:0:1
contains prompt "--prompt 6"
check no_ids 3 "$BF" generate "$G/gpt_kv.onnx" "$FX/conformance/demo_digits.eval.safetensors"
contains no_ids "no tensor 'input_ids'"
check broken_cache 3 "$BF" generate "$G/kv_no_present.onnx" "$G/prompts.safetensors"
contains broken_cache "graph output 'present.0.value' is missing"
check help 0 "$BF" help generate
contains help "usage: bitflip generate"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
