#!/usr/bin/env bash
# IVMOD per tensor and per bit in detection and segmentation results, and
# the pictures of `bitflip report`: the IVMOD bars, and a trial's golden and
# faulty detections or masks (--spec --trial --image). The sums are checked
# against the trial records grouped by hand, the pictures against PyTorch's
# outputs in the fixtures' references (report_pictures_check.py), and the
# hostile cases (trial or image out of range, a classification result, a
# spec that did not make the result) get errors that say so.
# usage: test_report_pictures.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
FIX=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
OS=$FIX/onesample

# a detection campaign (one-image graph, the onesample_det eval set), a
# segmentation one (the U-Net), a classification one (no IVMOD)
cat >"$tmp/det.json" <<JSON
{"model": "$OS/onesample_dyn.onnx", "dataset": "$OS/onesample_det.eval.safetensors", "trials": 60, "seed": 5,
 "faults": {"target": "weights", "model": "bitflip"}}
JSON
cat >"$tmp/seg.json" <<JSON
{"model": "$FIX/det/unet.onnx", "dataset": "$FIX/det/unet.eval.safetensors", "trials": 24, "seed": 3,
 "faults": {"target": "weights", "model": "bitflip", "positions": [22, 26, 30]}}
JSON
cat >"$tmp/cls.json" <<JSON
{"model": "$OS/onesample_cls.onnx", "dataset": "$OS/onesample_cls.eval.safetensors", "trials": 10, "seed": 5,
 "faults": {"target": "weights", "model": "bitflip"}}
JSON
for k in det seg cls; do
  check "run_$k" 0 "$BF" run "$tmp/$k.json" --local --out "$tmp/$k.res.json" --trials-out "$tmp/$k.jsonl" --format json
done
# shards merge IVMOD exactly
check shard0 0 "$BF" run "$tmp/det.json" --local --shard 0/2 --out "$tmp/part0.json" --format json
check shard1 0 "$BF" run "$tmp/det.json" --local --shard 1/2 --out "$tmp/part1.json" --format json
check merge 0 "$BF" merge "$tmp/part0.json" "$tmp/part1.json" --out "$tmp/merged.json" --format json

# the faults of the references, as list campaigns: trial k is the
# reference's fault k, whose outputs PyTorch computed
$PY - "$OS/onesample_det.ref.json" "$FIX/det/unet.ref.json" "$tmp" "$OS" "$FIX/det" <<'PYEOF'
import json, sys
det, seg, tmp, os_dir, det_dir = sys.argv[1:]
for name, ref, model, data in (("detlist", det, os_dir + "/onesample_dyn.onnx", os_dir + "/onesample_det.eval.safetensors"),
                               ("seglist", seg, det_dir + "/unet.onnx", det_dir + "/unet.eval.safetensors")):
    faults = json.load(open(ref))["faults"]
    spec = {"model": model, "dataset": data, "seed": 1, "faults": {"target": "weights", "model": "bitflip"},
            "sampling": {"list": [{"tensor": f["param"], "index": f["index"], "bit": f["bit"]} for f in faults]}}
    json.dump(spec, open(f"{tmp}/{name}.json", "w"))
PYEOF
check run_detlist 0 "$BF" run "$tmp/detlist.json" --local --out "$tmp/detlist.res.json" --format json
check run_seglist 0 "$BF" run "$tmp/seglist.json" --local --out "$tmp/seglist.res.json" --format json

# the reports: IVMOD bars, and pictures of the trials the checker picks
check report_det 0 "$BF" report "$tmp/det.res.json" -o "$tmp/det.html"
check report_cls 0 "$BF" report "$tmp/cls.res.json" -o "$tmp/cls.html"
echo "== report_pictures_check.py"
$PY "$(dirname "$0")/report_pictures_check.py" "$BF" "$FIX" "$tmp"
rc=$?
[ "$rc" -eq 0 ] && passes=$((passes+1)) || fails=$((fails+1))

# hostile: indices out of range, a result without detections, options alone,
# a spec that did not make the result
pic() { "$BF" report "$@" -o "$tmp/p.html"; }
check trial_range 2 pic "$tmp/det.res.json" --spec "$tmp/det.json" --trial 60 --image 0
contains trial_range "trial 60 is out of range: the campaign has 60 trials (0 to 59)"
check image_range 2 pic "$tmp/det.res.json" --spec "$tmp/det.json" --trial 3 --image 10
contains image_range "image 10 is out of range: the eval set has 10 images (0 to 9)"
check trial_neg 2 pic "$tmp/det.res.json" --spec "$tmp/det.json" --trial -1 --image 0
contains trial_neg "--trial"
check cls_pic 2 pic "$tmp/cls.res.json" --spec "$tmp/cls.json" --trial 0 --image 0
contains cls_pic "--trial draws detections or masks, but $tmp/cls.res.json is a result of a classification campaign"
check alone 2 pic "$tmp/det.res.json" --trial 0 --image 0
contains alone "a trial's picture needs --spec, --trial and --image together"
check wrong_spec 2 pic "$tmp/det.res.json" --spec "$tmp/detlist.json" --trial 0 --image 0
contains wrong_spec "give the spec that made the result"
[ ! -e "$tmp/p.html" ] && passes=$((passes+1)) || { echo "FAIL a refused picture left a report"; fails=$((fails+1)); }
check help 0 "$BF" report --help
contains help "--trial K"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
