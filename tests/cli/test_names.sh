#!/usr/bin/env bash
# PyTorch names (docs/EXPORT.md) as a user meets them: `bitflip info` shows
# the name recovered for each parameter of a torch export, campaign specs
# select by it, and results and trial records carry it; a model from another
# exporter shows none. Expected names come from the module structure of
# tests/fixtures/names/make_names.py (written out below) and from
# names.json, where the generator matched each initializer by VALUE to the
# PyTorch tensor it holds: never from bitflip's own output.
# usage: test_names.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
FX=$(cd "$2" && pwd)
NM=$FX/names
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"

ok() {   # ok NAME CMD... : passes when CMD succeeds
  local name=$1; shift
  if "$@" >"$tmp/py.out" 2>&1; then passes=$((passes+1)); else
    echo "FAIL $name"; sed 's/^/    /' "$tmp/py.out" | head -20; fails=$((fails+1)); fi
}

model=$NM/tiny_resnet.onnx
data=$NM/tiny_resnet.eval.safetensors
spec() {   # spec FILE TENSORS_JSON [EXTRA_JSON]: a weight campaign on the tiny ResNet
  printf '{"model": "%s", "dataset": "%s", "seed": 5, %s "faults": {"tensors": %s, "bits": 1}}\n' \
    "$model" "$data" "${3:-\"trials\": 24, \"sampling\": \"per_tensor\",}" "$2" >"$1"
}

# (a) bitflip info: a column of PyTorch names, with how each tensor differs
check info 0 "$BF" info "$model"
contains info_header "pytorch name"
contains info_folded "layer1.0.conv1.weight (a BatchNorm folded in)"
contains info_transposed "proj.weight (transposed)"
contains info_kept "emb.weight"
cp "$tmp/out" "$tmp/info.txt"
check info_json 0 "$BF" info --json "$model"
cp "$tmp/out" "$tmp/info.json"
ok info_names_by_value $PY - "$tmp/info.json" "$NM/tiny_resnet.names.json" "$tmp/info.txt" <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
truth = json.load(open(sys.argv[2]))["tiny_resnet.onnx"]
text = open(sys.argv[3]).read().splitlines()
# the module structure of TinyNet, by hand: every Conv with its BN folded in
folded = ["conv1", "layer1.0.conv1", "layer1.0.conv2", "layer2.0.conv1", "layer2.0.conv2", "layer2.0.downsample.0"]
want = {c + "." + k: "a BatchNorm folded in" for c in folded for k in ("weight", "bias")}
want.update({"proj.weight": "transposed", "emb.weight": None, "proj.bias": None, "fc.weight": None, "fc.bias": None})
params = info["params"]
assert len(params) == len(truth) == len(want), (len(params), len(truth), len(want))
for p in params:
    torch = truth[p["name"]]["torch"]          # what the tensor is, by value
    assert p.get("torch_name") == torch, (p["name"], p.get("torch_name"), torch)
    assert p.get("torch_note") == want[torch], (p["name"], p.get("torch_note"), want[torch])
    row = [l for l in text if l.split() and l.split()[0] == p["name"]]
    assert len(row) == 1 and row[0].rstrip().endswith(torch + (f" ({want[torch]})" if want[torch] else "")), row
PY

# the same module exported with TrainingMode.PRESERVE keeps its BatchNorms
check info_bn 0 "$BF" info "$NM/tiny_resnet_bn.onnx"
contains info_bn_kept "layer1.0.bn1.running_var"
contains info_bn_conv "layer1.0.conv1.weight"

# (b) selectors: "layer1.*" selects exactly layer1's tensors, by their PyTorch names
spec "$tmp/layer1.json" '["layer1.*"]'
check run_layer1 0 "$BF" run --local "$tmp/layer1.json" --format json --out "$tmp/layer1.out.json" \
      --trials-out "$tmp/layer1.jsonl"
ok layer1_selects_by_value $PY - "$tmp/layer1.out.json" "$tmp/layer1.jsonl" "$NM/tiny_resnet.names.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
truth = json.load(open(sys.argv[3]))["tiny_resnet.onnx"]
# by hand: layer1 = [BasicBlock(8, 8)], its conv1 and conv2 with BNs folded in
want_torch = {"layer1.0.conv1.weight", "layer1.0.conv1.bias", "layer1.0.conv2.weight", "layer1.0.conv2.bias"}
want_onnx = {k for k, v in truth.items() if v["torch"] in want_torch}
assert len(want_onnx) == 4, want_onnx
sites = doc["campaign"]["sites"]
assert {s["name"] for s in sites} == want_onnx, sites
for s in sites:
    assert s["torch_name"] == truth[s["name"]]["torch"] and s["torch_note"] == "a BatchNorm folded in", s
# (c) results: per-tensor rows and every trial record carry the name
for row in doc["by_tensor"]:
    assert row["torch_name"] == truth[row["tensor"]]["torch"], row
n = 0
for line in open(sys.argv[2]):
    for f in json.loads(line)["faults"]:
        assert f["torch_name"] == truth[f["tensor"]]["torch"], f
        n += 1
assert n == doc["summary"]["trials"] == 24, n
PY

# ONNX names select what they always did; torch names are not prefixes of them
spec "$tmp/onnx_glob.json" '["onnx::Conv_7*"]'
check run_onnx_glob 0 "$BF" run --local "$tmp/onnx_glob.json" --format json --out "$tmp/onnx_glob.out.json"
ok onnx_glob_unchanged $PY - "$tmp/onnx_glob.out.json" <<'PY'
import json, sys
names = sorted(s["name"] for s in json.load(open(sys.argv[1]))["campaign"]["sites"])
assert names == ["onnx::Conv_72", "onnx::Conv_73", "onnx::Conv_75", "onnx::Conv_76", "onnx::Conv_78", "onnx::Conv_79"], names
PY
spec "$tmp/mixed.json" '["fc.*", "proj.weight", "op:Gather"]'
check run_mixed 0 "$BF" plan "$tmp/mixed.json"
contains plan_names "proj.weight"
contains plan_onnx "onnx::MatMul_89"
contains plan_count "(4 tensors)"

# an explicit list may name a tensor by its PyTorch name
printf '{"model": "%s", "dataset": "%s", "faults": {}, "sampling": {"list": [%s]}}\n' "$model" "$data" \
  '{"tensor": "layer2.0.downsample.0.weight", "index": 3, "bit": 30}' >"$tmp/list.json"
check run_list 0 "$BF" run --local "$tmp/list.json" --format json --trials-out "$tmp/list.jsonl"
ok list_by_torch_name $PY - "$tmp/list.jsonl" "$NM/tiny_resnet.names.json" <<'PY'
import json, sys
truth = json.load(open(sys.argv[2]))["tiny_resnet.onnx"]
(f,) = json.loads(open(sys.argv[1]).readline())["faults"]
assert truth[f["tensor"]]["torch"] == "layer2.0.downsample.0.weight" and f["index"] == 3 and f["bits"] == [30], f
PY

# a pattern that matches nothing lists both names of what there is
spec "$tmp/none.json" '["layer9.*"]'
check run_none 3 "$BF" run --local "$tmp/none.json"
contains none_lists_both "(conv1.weight)"

# the text report names the PyTorch tensors
check run_table 0 "$BF" run --local "$tmp/layer1.json" --format table
contains table_header "pytorch name"
contains table_name "layer1.0.conv2.weight"

# bitflip eval --flip takes either name, and says which PyTorch tensor it hit
onnx75=$($PY -c 'import json,sys; t=json.load(open(sys.argv[1]))["tiny_resnet.onnx"]; print([k for k,v in t.items() if v["torch"]=="layer1.0.conv1.weight"][0])' "$NM/tiny_resnet.names.json")
check eval_torch_flip 0 "$BF" eval "$model" "$data" --flip layer1.0.conv1.weight:3:30
contains eval_torch_flip_names "$onnx75[3] bit 30"
contains eval_torch_flip_shows "(layer1.0.conv1.weight)"
check eval_onnx_flip 0 "$BF" eval --json "$model" "$data" --flip "$onnx75:3:30"
contains eval_onnx_flip_json '"torch_name": "layer1.0.conv1.weight"'

# (d) a model built with onnx.helper (no PyTorch scopes): no names invented
plain=$FX/conformance/misc_norm_op17.onnx
check plain_info 0 "$BF" info "$plain"
if grep -q "pytorch name" "$tmp/out"; then echo "FAIL plain_info shows a pytorch column"; fails=$((fails+1)); else passes=$((passes+1)); fi
check plain_json 0 "$BF" info --json "$plain"
if grep -q "torch_" "$tmp/out"; then echo "FAIL plain_json has torch names"; fails=$((fails+1)); else passes=$((passes+1)); fi
plain=$FX/conformance/misc_conv_pool_op13
printf '{"model": "%s.onnx", "dataset": "%s.eval.safetensors", "trials": 8, "faults": {"bits": 1}}\n' "$plain" "$plain" >"$tmp/plain.json"
check plain_run 0 "$BF" run --local "$tmp/plain.json" --format json --out "$tmp/plain.out.json" --trials-out "$tmp/plain.jsonl"
if grep -q "torch_" "$tmp/plain.out.json" "$tmp/plain.jsonl"; then echo "FAIL plain_run invents torch names"; fails=$((fails+1)); else passes=$((passes+1)); fi

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
