#!/usr/bin/env bash
# make demo: the main job on a built-in model and eval set. Shows what the
# model is made of and what single-bit faults in its weights do; then starts
# the service (bitflipd) on loopback, uploads the model and eval set with
# curl, runs a 3,200-fault campaign on it with live progress from the
# daemon's event stream, prints the result (which layers and bits matter),
# and stops the daemon; compares protections on a DLRM, and ends with
# `bitflip report`: the figures of both campaigns in one HTML file.
set -euo pipefail
BITFLIP=${1:-build/bitflip}
BITFLIPD=${2:-$(dirname "$BITFLIP")/bitflipd}
cd "$(dirname "$0")/.."
fx=tests/fixtures/conformance
# the campaigns' results and their report stay here after the demo
report_dir=$(cd "$(dirname "$BITFLIP")" && pwd)/demo-report
mkdir -p "$report_dir"
# a small CNN trained on scikit-learn's handwritten digits (tests/fixtures/make_fixtures.py)
model=$fx/demo_digits.onnx
data=$fx/demo_digits.eval.safetensors

echo "== bitflip info $model"
"$BITFLIP" info "$model"
echo
echo "== bitflip eval (golden, then single-bit faults in the weights)"
# the first parameter tensor listed by `info` (the line after the table header)
param=$("$BITFLIP" info "$model" | awk '/^  name +shape/ {getline; print $1; exit}')
flips=()
if [ -n "$param" ]; then
  flips=(--flip "$param:0:31" --flip "$param:0:3" --flip "$param:0:30")
fi
"$BITFLIP" eval "$model" "$data" "${flips[@]}" --random-flips 5 --seed 7

echo
echo "== bitflipd: the service, on loopback with a throw-away data directory"
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
"$BITFLIPD" --listen 127.0.0.1:0 --port-file "$dir/port" --data-dir "$dir/data" 2>"$dir/log" &
pid=$!
for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
[ -s "$dir/port" ] || { echo "bitflipd did not start:"; cat "$dir/log"; exit 1; }
url=http://127.0.0.1:$(cat "$dir/port")
until curl -fsS "$url/v2/health/ready" >/dev/null 2>&1; do sleep 0.05; done
head -1 "$dir/log"
echo
echo "\$ curl --data-binary @$model -H 'Content-Type: application/octet-stream' $url/v1/models"
curl -fsS --data-binary @"$model" -H 'Content-Type: application/octet-stream' "$url/v1/models?name=demo_digits" |
  /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); print("  model %s: %s nodes, %s parameters, inputs %s" % (j["id"][:16] + "...", j["nodes"], j["param_elements"], [i["name"] for i in j["inputs"]]))'
echo "\$ curl --data-binary @$data -H 'Content-Type: application/octet-stream' $url/v1/datasets"
curl -fsS --data-binary @"$data" -H 'Content-Type: application/octet-stream' "$url/v1/datasets?name=demo_digits" |
  /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); print("  dataset %s: %s samples, labels: %s" % (j["id"][:16] + "...", j["samples"], j["labels"]))'

echo
echo "== bitflip run --server $url tests/fixtures/specs/demo_campaign.json"
echo "   (3200 single-bit weight faults, 100 per bit position, on the daemon's workers;"
echo "    progress from its event stream: GET /v1/campaigns/{id}/events)"
"$BITFLIP" run --server "$url" tests/fixtures/specs/demo_campaign.json --format table --out "$report_dir/demo_digits.json"
echo
echo "== stopping bitflipd (SIGTERM)"
kill -TERM "$pid"; wait "$pid"; pid=
echo "   stopped; the same with curl alone is in docs/SERVICE.md"

echo
echo "== which protection to ship: bitflip run --local tests/fixtures/specs/demo_mitigations.json"
echo "   (a BER sweep on a DLRM, 200 trials at each of 3 rates, run unprotected and with"
echo "    clipping, selective bit protection and ABFT, each on exactly the same faults:"
echo "    docs/MITIGATIONS.md)"
"$BITFLIP" run --local tests/fixtures/specs/demo_mitigations.json --format table --out "$report_dir/dlrm_mitigations.json" |
  sed -n '/^mitigations/,$p'

echo
echo "== the pictures: bitflip report (one HTML file, figures inline, nothing fetched; docs/REPORT.md)"
"$BITFLIP" report "$report_dir/demo_digits.json" "$report_dir/dlrm_mitigations.json" \
  --title "bitflip demo: a digits CNN and a DLRM under bit flips" -o "$report_dir/report.html"
echo "   open it:  xdg-open $report_dir/report.html   (or any browser; Markdown for a PR:"
echo "   bitflip report RESULT.json --format md -o report.md)"

# --- the web page (docs/UI.md); the report's lines, if any, stay above this block
echo
echo "== to see it in a browser: bitflipd's web page"
echo "   $BITFLIPD --listen 127.0.0.1:8080 --data-dir ~/bitflip-data"
echo "   then open http://127.0.0.1:8080/ : upload a model and an eval set, submit a"
echo "   campaign from the form, watch it move, read its figures (docs/UI.md)"
