#!/usr/bin/env bash
# Fused patterns (docs/OPS.md) as a user meets them: `bitflip info` says what
# was fused and by which rule (no exporter record here: by pattern),
# --no-fuse shows the graph as exported, and a campaign naming an
# intermediate of a fused pattern is refused with the node that computes it,
# while --no-fuse makes it a site again. The model is tests/fixtures/real/vit
# (opset 13: five LayerNorms of 9 nodes, two GELUs of 5).
# usage: test_fuse.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
FX=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"

model=$FX/real/vit.onnx
check info 0 "$BF" info "$model"
contains info "fused: 5 LayerNorm (9 nodes each), 2 GELU (5 nodes each)"
contains info "LayerNormalization x5"
contains info "fusion: by pattern (no exporter record"
check info_raw 0 "$BF" info --no-fuse "$model"
contains info_raw "ReduceMean x10"
contains info_raw "fusion: off (--no-fuse)"
if grep -q "fused:" "$tmp/out"; then echo "FAIL info_raw says fused"; fails=$((fails+1)); else passes=$((passes+1)); fi
check info_json 0 "$BF" info --json "$model"
contains info_json '"pattern": "LayerNorm"'
contains info_json '"rule": "pattern"'

pow=/encoder/layers/encoder_layer_0/ln_1/Pow_output_0
printf '{"model": "%s", "dataset": "%s", "seed": 5, "trials": 8, "batch": 8, "faults": {"target": "activations", "tensors": ["%s"], "bits": 1}}\n' \
  "$model" "$FX/real/vit.eval.safetensors" "$pow" >"$tmp/spec.json"
check fused_site 3 "$BF" run --local "$tmp/spec.json" --threads 1
contains fused_site "intermediate of an exported pattern"
contains fused_site "node '/encoder/layers/encoder_layer_0/ln_1/Add_1' (LayerNormalization)"
check unfused_site 0 "$BF" run --local --no-fuse "$tmp/spec.json" --threads 1 --format json --out "$tmp/raw.json"
check remote_no_fuse 2 "$BF" run --server http://127.0.0.1:9 --no-fuse "$tmp/spec.json"
contains remote_no_fuse "--no-fuse"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
