#!/usr/bin/env bash
# One-sample graphs (an input without the batch dim, as a torchvision
# detector's `images` [3, H, W]): eval runs the eval set a sample at a time,
# --outputs writes every output per sample, campaigns run on the exact
# engine and say why, and eval sets that fit neither layout get an error
# naming the input. usage: test_onesample.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
FX=$2/onesample
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
model=$FX/onesample_cls.onnx
data=$FX/onesample_cls.eval.safetensors

# --outputs: JSON is the conformance format's golden (an object per sample);
# the values are PyTorch's within the conformance tolerance
check eval_json 0 "$BF" eval "$model" "$data" --outputs "$tmp/o.json" --json
contains eval_json '"accuracy": 0.75'
if $PY - "$tmp/o.json" "$FX/onesample_cls.ref.json" <<'PYEOF'
import json, sys
import numpy as np
ours, ref = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["golden"]
assert len(ours) == len(ref) == 12
for o, r in zip(ours, ref):
    assert sorted(o) == ["feat", "logits"], sorted(o)
    for k in o:
        a, b = np.array(o[k], dtype=float), np.array(r[k], dtype=float)
        assert a.shape == b.shape, (k, a.shape, b.shape)
        assert np.all(np.abs(a - b) <= np.maximum(1e-5, 1e-4 * np.abs(b))), k
PYEOF
then passes=$((passes+1)); else echo "FAIL --outputs JSON differs from PyTorch's golden"; fails=$((fails+1)); fi
# CSV: a line per row, sample,output,row,values: 12 samples x (5 logits rows of one value, [5] being 1-D, + 4 feat rows), and the header
check eval_csv 0 "$BF" eval "$model" "$data" --outputs "$tmp/o.csv"
lines=$(wc -l <"$tmp/o.csv")
[ "$lines" = 109 ] && passes=$((passes+1)) || { echo "FAIL CSV has $lines lines, want 109"; fails=$((fails+1)); }
grep -q '^3,feat,2,' "$tmp/o.csv" && passes=$((passes+1)) || { echo "FAIL CSV lacks sample 3's feat row 2"; fails=$((fails+1)); }
# the same outputs on two threads
check eval_threads 0 "$BF" eval "$model" "$data" --threads 2 --outputs "$tmp/o2.json"
cmp -s "$tmp/o.json" "$tmp/o2.json" && passes=$((passes+1)) || { echo "FAIL outputs differ on two threads"; fails=$((fails+1)); }

# campaigns: activations (every value is the sample's) and weights, each
# image resumed from the golden checkpoints (--stats says so), the same
# records as --exact
# (weights: 100 trials, so that the checkpoints pay at either price of a
# recorded byte, the dear one where this host's fresh pages measure dear:
# at 30 they did not there, docs/perf/detectors.md, h18-ssd)
for target in activations weights; do
  trials=30
  [ "$target" = weights ] && trials=100
  cat >"$tmp/$target.json" <<JSON
{"model": "$model", "dataset": "$data", "trials": $trials, "seed": 5, "faults": {"target": "$target", "model": "bitflip"}}
JSON
  check "run_$target" 0 "$BF" run "$tmp/$target.json" --local --stats --trials-out "$tmp/$target.1.jsonl"
  # weights: checkpoints pay; a 30-trial activation campaign on this tiny
  # graph saves less than recording them costs (docs/ENGINE.md), so it may run
  # every image in full, and --stats must say which
  if [ "$target" = weights ]; then
    contains "run_$target" "checkpoints (one image per call): each trial resumed each image from the golden pass"
    # the batch engine's counters are all zero here: one short line, no channel-local line
    contains "run_$target" "differential engine, one image per call: each trial resumes from the golden pass's checkpoints"
    if grep -qF "channel-local:" "$tmp/out" || grep -qF "trials in chain mode" "$tmp/out"; then
      echo "FAIL run_$target: --stats prints the batch engine's zero lines for a one-image graph"; fails=$((fails+1))
    else
      passes=$((passes+1))
    fi
  elif grep -qF "checkpoints (one image per call): each trial resumed" "$tmp/out" || grep -qF "every trial runs in full" "$tmp/out"; then
    passes=$((passes+1))
  else
    echo "FAIL run_$target: --stats says neither checkpoints nor full runs"; fails=$((fails+1))
  fi
  check "run_${target}_exact" 0 "$BF" run "$tmp/$target.json" --local --exact --threads 2 --trials-out "$tmp/$target.2.jsonl"
  cmp -s "$tmp/$target.1.jsonl" "$tmp/$target.2.jsonl" && passes=$((passes+1)) || { echo "FAIL $target records differ"; fails=$((fails+1)); }
done
grep -q '"outcome":"critical"' "$tmp/activations.1.jsonl" && passes=$((passes+1)) || { echo "FAIL no activation fault was critical"; fails=$((fails+1)); }

# --run-memory: the cap on a run's memory for shapes that are data; a tiny
# one fails naming the step and the flag (eval, run, plan), a usable one runs
dmodel=$FX/onesample_dyn.onnx
ddata=$FX/onesample_det.eval.safetensors
check run_memory_eval 3 "$BF" eval "$dmodel" "$ddata" --run-memory 1K
contains run_memory_eval "node '"
contains run_memory_eval "over the run-time limit of 1.0 KiB (--run-memory"
check run_memory_zero 2 "$BF" eval "$dmodel" "$ddata" --run-memory 0
contains run_memory_zero "--run-memory must be more than 0"
check run_memory_ok 0 "$BF" eval "$dmodel" "$ddata" --run-memory 1M
cat >"$tmp/dyn.json" <<JSON
{"model": "$dmodel", "dataset": "$ddata", "trials": 4, "seed": 5, "faults": {"target": "activations"}}
JSON
check run_memory_run 3 "$BF" run "$tmp/dyn.json" --local --run-memory 1K
contains run_memory_run "over the run-time limit of 1.0 KiB (--run-memory"
check run_memory_plan 3 "$BF" plan "$tmp/dyn.json" --run-memory 1K
contains run_memory_plan "(--run-memory"
check run_memory_server 2 "$BF" run "$tmp/dyn.json" --server http://127.0.0.1:9 --run-memory 1M
contains run_memory_server "--run-memory are for --local runs"
check run_memory_help 0 "$BF" help eval
contains run_memory_help "--run-memory SIZE"

# faults after NMS (docs/CAMPAIGNS.md): a list fault in the image with no
# detection strikes nothing, and its record says so; one in an image with
# boxes names the element and the run's count; the site is marked dynamic
DS=$2/dynsite
value=$($PY -c "import json; print(json.load(open('$DS/postnms.ref.json'))['value'])")
cat >"$tmp/nms.json" <<JSON
{"model": "$DS/postnms.onnx", "dataset": "$DS/postnms.eval.safetensors", "faults": {"target": "activations",
 "persistence": "transient"}, "sampling": {"list": [{"tensor": "$value", "index": 0, "bit": 30, "sample": 3},
 {"tensor": "$value", "index": 2, "bit": 30, "sample": 0}]}}
JSON
check nms_list 0 "$BF" run "$tmp/nms.json" --local --trials-out "$tmp/nms.jsonl" --out "$tmp/nms.out.json"
grep -q '"index":-1,"bits":\[30\],"old":null,"new":null,"sample":3,"run_elements":0' "$tmp/nms.jsonl" && grep -q '"outcome":"masked"' "$tmp/nms.jsonl" \
  && passes=$((passes+1)) || { echo "FAIL a fault on an empty value: record"; cat "$tmp/nms.jsonl"; fails=$((fails+1)); }
grep -q '"index":2,.*"sample":0,"run_elements":16' "$tmp/nms.jsonl" && passes=$((passes+1)) || { echo "FAIL a fault after NMS: record"; fails=$((fails+1)); }
grep -q '"dynamic": *true' "$tmp/nms.out.json" && passes=$((passes+1)) || { echo "FAIL the site is not marked dynamic"; fails=$((fails+1)); }

# eval sets that fit neither layout
$PY -c "
import sys, numpy as np
sys.path.insert(0, '$(dirname "$0")/../../clients/python')
from bitflip.safetensors import write_safetensors
write_safetensors('$tmp/wide.safetensors', {'images': np.zeros((4, 3, 9, 8), np.float32)})
write_safetensors('$tmp/flat.safetensors', {'images': np.zeros((4, 192), np.float32)})
write_safetensors('$tmp/empty.safetensors', {'images': np.zeros((0, 3, 8, 8), np.float32)})
"
check wide 3 "$BF" eval "$model" "$tmp/wide.safetensors"
contains wide "graph input 'images' wants [3, 8, 8]"
check flat 3 "$BF" eval "$model" "$tmp/flat.safetensors"
contains flat "eval tensor 'images' has shape [4, 192]"
check empty 3 "$BF" eval "$model" "$tmp/empty.safetensors"
contains empty "no samples"

# the runner's per-sample comparison can fail: references made wrong on
# purpose (a fault's outputs replaced by golden's, one image's boxes one row
# short, a fault's critical-image count off by one, a fault's map off) each
# make it exit 1 naming what differs
CONF=$(dirname "$BF")/tests/bitflip-conformance
if [ -x "$CONF" ]; then
  mkdir -p "$tmp/bad"
  cp "$FX/onesample_dyn.onnx" "$FX/onesample_det.eval.safetensors" "$tmp/bad/"
  $PY - "$FX/onesample_det.ref.json" "$tmp/bad/onesample_det.ref.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
r["faults"][0]["outputs"] = r["golden"]
r["faults"][1]["outputs"][3]["boxes"] = r["faults"][1]["outputs"][3]["boxes"][:-1]
r["faults"][2]["map"] = r["faults"][2]["map"] + 0.01
json.dump(r, open(sys.argv[2], "w"))
PYEOF
  check bad_refs 1 "$CONF" "$tmp/bad"
  contains bad_refs "faults differ, first fault #0"
  contains bad_refs "has another number of rows of 'boxes'"
  contains bad_refs "map       ours"
  # outputs right, a critical-image count wrong: only the campaign path's records show it
  $PY - "$FX/onesample_det.ref.json" "$tmp/bad/onesample_det.ref.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
r["faults"][8]["critical_images"] += 1
json.dump(r, open(sys.argv[2], "w"))
PYEOF
  check bad_count 1 "$CONF" "$tmp/bad"
  contains bad_count "critical images (IVMOD's count) differ, first fault #8"
else
  echo "FAIL no bitflip-conformance beside $BF"; fails=$((fails+1))
fi

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
