#!/usr/bin/env bash
# Error maps as uploads (POST /v1/error-maps): a chip's .bfmap is stored by
# its sha256 (checked by sha256sum here), checked by the engine's parser (a bad
# map is a 422 naming the byte and the rule), listed, fetched and deleted like
# models; a profiled campaign names it "sha256:ID" and gives the same result
# as 'bitflip run --local' on the same map, and so does 'bitflip run --server'
# with the map's path (the CLI uploads it; a missing file is its usage error);
# a path, an unknown id or another tenant's map is a 422 at /faults/error_map,
# and a map in use is not deleted.
# usage: test_error_maps.sh BITFLIPD BITFLIP FIXTURES_DIR
set -u
BFD=$1 BF=$2 FIX=$3
. "$(dirname "$0")/lib.sh"
FX=$FIX/stutz
OCT=(-H 'Content-Type: application/octet-stream')
JSON=(-H 'Content-Type: application/json')

# mkmap FILE HEADER_JSON CELL...: a .bfmap by hand (docs/CAMPAIGNS.md), not by bitflip
mkmap() {
  $PY - "$@" <<'PYEOF'
import struct, sys
out, head, cells = sys.argv[1], sys.argv[2].encode(), [int(c) for c in sys.argv[3:]]
open(out, "wb").write(b"BFERRMAP" + struct.pack("<Q", len(head)) + head + struct.pack(f"<{len(cells)}Q", *cells))
PYEOF
}
mkmap "$tmp/ok.bfmap" '{"format": 1, "rows": 4, "cols": 5, "flip": 2, "stuck_at_0": 1, "stuck_at_1": 1, "chip": "c7", "voltage": 0.8}' 1 7 12 18
mkmap "$tmp/unsorted.bfmap" '{"format": 1, "rows": 4, "cols": 5, "flip": 2, "stuck_at_0": 0, "stuck_at_1": 0}' 7 1
mkmap "$tmp/big.bfmap" '{"format": 1, "rows": 4, "cols": 5, "flip": 5, "stuck_at_0": 0, "stuck_at_1": 0}' 1 2 3 4 5
printf 'BFERRMAP\x10\x00' >"$tmp/short.bfmap"
EID=$(sha256sum "$tmp/ok.bfmap" | cut -c1-64)

mkdir -p "$tmp/data"
TA=$("$BFD" token create --tenant alice --data-dir "$tmp/data" 2>/dev/null)
A=(-H "Authorization: Bearer $TA")
B=(-H "Authorization: Bearer $("$BFD" token create --tenant bob --data-dir "$tmp/data" 2>/dev/null)")
start_daemon "$tmp/data" --limit errmap.cells=4 || exit 1
AUTH=("${A[@]}")

# --- upload, inspect, list
req upload 201 "${A[@]}" "${OCT[@]}" --data-binary @"$tmp/ok.bfmap" "$URL/v1/error-maps?name=chip_0.80V.bfmap"
eq upload_id "$(jget "j['id']")" "$EID"
eq upload_summary "$(jget "[j[k] for k in ('rows', 'cols', 'bits', 'flip', 'stuck_at_0', 'stuck_at_1', 'cells', 'chip', 'voltage', 'name', 'size')]")" \
  "[4, 5, 20, 2, 1, 1, 4, 'c7', 0.8, 'chip_0.80V.bfmap', $(stat -c %s "$tmp/ok.bfmap")]"
header_has upload_location "Location: /v1/error-maps/$EID"
req upload_again 200 "${A[@]}" "${OCT[@]}" --data-binary @"$tmp/ok.bfmap" "$URL/v1/error-maps"
req get 200 "${A[@]}" "$URL/v1/error-maps/$EID";  eq get_cells "$(jget "j['cells']")" 4
req list 200 "${A[@]}" "$URL/v1/error-maps";  eq list_ids "$(jget "[i['id'] for i in j['items']]")" "['$EID']"
req not_a_model 404 "${A[@]}" "$URL/v1/models/$EID";  is_problem not_a_model 404
req bob_sees_none 404 "${B[@]}" "$URL/v1/error-maps/$EID"
req bob_lists_none 200 "${B[@]}" "$URL/v1/error-maps";  eq bob_list "$(jget "len(j['items'])")" 0

# --- bad maps: 422 naming what is wrong; nothing kept
req unsorted 422 "${A[@]}" "${OCT[@]}" --data-binary @"$tmp/unsorted.bfmap" "$URL/v1/error-maps";  is_problem unsorted 422
body_has unsorted_names "bitflip can use: upload $(sha256sum "$tmp/unsorted.bfmap" | cut -c1-64): flip cell 1 (byte";  body_has unsorted_why "cells ascend";  body_has unsorted_kind "not a valid error map"
req short 422 "${A[@]}" "${OCT[@]}" --data-binary @"$tmp/short.bfmap" "$URL/v1/error-maps";  body_has short "not a bitflip error map"
req over_limit 422 "${A[@]}" "${OCT[@]}" --data-binary @"$tmp/big.bfmap" "$URL/v1/error-maps";  body_has over_limit "errmap.cells"
req onnx_is_no_map 422 "${A[@]}" "${OCT[@]}" --data-binary @"$FX/linear.onnx" "$URL/v1/error-maps";  is_problem onnx_is_no_map 422
req empty 400 "${A[@]}" "${OCT[@]}" --data-binary '' "$URL/v1/error-maps"
req wrong_type 415 "${A[@]}" -H 'Content-Type: text/plain' --data-binary @"$tmp/ok.bfmap" "$URL/v1/error-maps"
req still_one 200 "${A[@]}" "$URL/v1/error-maps";  eq still_one "$(jget "len(j['items'])")" 1
bad_sha=$(sha256sum "$tmp/unsorted.bfmap" | cut -c1-64)
[ ! -e "$tmp/data/blobs/${bad_sha:0:2}/$bad_sha" ] && ok || bad "a refused map's blob was kept"

# --- a profiled campaign on the uploaded map = bitflip run --local on the file
req model 201 "${A[@]}" "${OCT[@]}" --data-binary @"$FX/linear.onnx" "$URL/v1/models";  MID=$(jget "j['id']")
req dataset 201 "${A[@]}" "${OCT[@]}" --data-binary @"$FX/linear.eval.safetensors" "$URL/v1/datasets";  DID=$(jget "j['id']")
spec() {  # spec FILE MODEL DATASET MAP
  cat >"$1" <<JSON
{"model": "$2", "dataset": "$3", "seed": 4, "metrics": ["mse"],
 "faults": {"model": "profiled", "error_map": "$4", "repeats": 600, "representation": "uint4", "w_max": 1.5}}
JSON
}
spec "$tmp/daemon.json" "$MID" "$DID" "sha256:$EID"
req submit 202 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/daemon.json" "$URL/v1/campaigns";  CID=$(jget "j['id']")
wait_state "$CID" succeeded 120 && ok || bad "the profiled campaign did not succeed"
req results 200 "${A[@]}" "$URL/v1/campaigns/$CID/results";  cp "$tmp/body" "$tmp/daemon_result.json"
req trials 200 "${A[@]}" "$URL/v1/campaigns/$CID/results?trials=true";  cp "$tmp/body" "$tmp/daemon_trials.jsonl"
cp "$tmp/ok.bfmap" "$tmp/cli.bfmap"
spec "$tmp/cli.json" "$FX/linear.onnx" "$FX/linear.eval.safetensors" "$tmp/cli.bfmap"
"$BF" run --local "$tmp/cli.json" --threads 2 --format json --out "$tmp/cli_result.json" --trials-out "$tmp/cli_trials.jsonl" >/dev/null 2>&1
$PY - "$tmp/cli_result.json" "$tmp/daemon_result.json" "$tmp/cli_trials.jsonl" "$tmp/daemon_trials.jsonl" "$EID" <<'PYEOF' && ok || bad "the daemon's profiled result differs from bitflip run --local"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k in ("summary", "by_tensor", "by_bit", "by_fault_model", "golden"):
    assert a[k] == b[k], k
assert b["summary"]["trials"] == 600, b["summary"]
em = b["campaign"]["error_map"]
assert em["path"] == "sha256:" + sys.argv[5] and (em["rows"], em["cols"], em["chip"]) == (4, 5, "c7"), em
ta, tb = ([json.loads(l) for l in open(p) if l.strip()] for p in sys.argv[3:5])
key = lambda t: t["trial"]
assert sorted(ta, key=key) == sorted(tb, key=key), "per-trial records differ"
assert all("offset" in t for t in tb)
PYEOF

# --- bitflip run --server with the map as a path (beside the spec, as --local reads it):
# the CLI uploads it (the same bytes: the same id, no second map) and sends "sha256:ID"
mkdir -p "$tmp/sub"
cp "$tmp/ok.bfmap" "$tmp/sub/chip.bfmap"
spec "$tmp/sub/remote.json" "$FX/linear.onnx" "$FX/linear.eval.safetensors" "chip.bfmap"
"$BF" run --server "$URL" --token "$TA" --format json --out "$tmp/remote_result.json" \
  --trials-out "$tmp/remote_trials.jsonl" "$tmp/sub/remote.json" >/dev/null 2>"$tmp/remote_err"
rc=$?; eq cli_path_upload_rc $rc 0; [ $rc = 0 ] || cat "$tmp/remote_err"
$PY - "$tmp/cli_result.json" "$tmp/remote_result.json" "$tmp/cli_trials.jsonl" "$tmp/remote_trials.jsonl" "$EID" <<'PYEOF' && ok || bad "bitflip run --server with a map path differs from bitflip run --local"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k in ("summary", "by_tensor", "by_bit", "by_fault_model", "golden"):
    assert a[k] == b[k], k
assert b["campaign"]["error_map"]["path"] == "sha256:" + sys.argv[5], b["campaign"]["error_map"]
ta, tb = ([json.loads(l) for l in open(p) if l.strip()] for p in sys.argv[3:5])
key = lambda t: t["trial"]
assert sorted(ta, key=key) == sorted(tb, key=key), "per-trial records differ"
PYEOF
req cli_no_second_map 200 "${A[@]}" "$URL/v1/error-maps";  eq cli_no_second_map "$(jget "[i['id'] for i in j['items']]")" "['$EID']"
# "sha256:ID" is sent as it is (nothing read here)
spec "$tmp/sub/by_id.json" "$FX/linear.onnx" "$FX/linear.eval.safetensors" "sha256:$EID"
"$BF" run --server "$URL" --token "$TA" --format json --out "$tmp/by_id_result.json" "$tmp/sub/by_id.json" >/dev/null 2>"$tmp/by_id_err"
rc=$?; eq cli_by_id_rc $rc 0; [ $rc = 0 ] || cat "$tmp/by_id_err"
eq cli_by_id_same "$($PY -c "import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); print(a['summary']==b['summary'])" \
  "$tmp/cli_result.json" "$tmp/by_id_result.json")" True
# a missing map: a usage error (2) naming the field and the file, before any upload or campaign
req campaigns_before 200 "${A[@]}" "$URL/v1/campaigns";  n_before=$(jget "len(j['items'])")
spec "$tmp/sub/missing.json" "$FX/linear.onnx" "$FX/linear.eval.safetensors" "nochip.bfmap"
"$BF" run --server "$URL" --token "$TA" "$tmp/sub/missing.json" >/dev/null 2>"$tmp/missing_err"
eq cli_missing_rc $? 2
grep -qF "faults.error_map 'nochip.bfmap': cannot read nochip.bfmap: No such file or directory" "$tmp/missing_err" && ok ||
  { bad "cli_missing: stderr does not name the field and the file"; cat "$tmp/missing_err"; }
req campaigns_after 200 "${A[@]}" "$URL/v1/campaigns";  eq cli_missing_no_campaign "$(jget "len(j['items'])")" "$n_before"
# a map the daemon refuses: its 422 (the byte and the rule) comes back, exit 2
cp "$tmp/unsorted.bfmap" "$tmp/sub/bad.bfmap"
spec "$tmp/sub/bad.json" "$FX/linear.onnx" "$FX/linear.eval.safetensors" "bad.bfmap"
"$BF" run --server "$URL" --token "$TA" "$tmp/sub/bad.json" >/dev/null 2>"$tmp/bad_err"
eq cli_bad_map_rc $? 2
grep -qF "uploading $tmp/sub/bad.bfmap: HTTP 422" "$tmp/bad_err" && grep -qF "cells ascend" "$tmp/bad_err" && ok ||
  { bad "cli_bad_map: the daemon's reason is not shown"; cat "$tmp/bad_err"; }

# --- what a daemon's spec may not name: 422 at /faults/error_map
spec "$tmp/path.json" "$MID" "$DID" "$tmp/ok.bfmap"
req path_refused 422 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/path.json" "$URL/v1/campaigns"
eq path_pointer "$(jget "j['errors'][0]['pointer']")" "/faults/error_map";  body_has path_hint "POST /v1/error-maps"
spec "$tmp/unknown.json" "$MID" "$DID" "sha256:$bad_sha"
req unknown_map 422 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/unknown.json" "$URL/v1/campaigns"
eq unknown_pointer "$(jget "j['errors'][0]['pointer']")" "/faults/error_map";  body_has unknown_map "no error map with id '$bad_sha'"
spec "$tmp/upper.json" "$MID" "$DID" "sha256:${EID^^}"
req upper_hex 422 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/upper.json" "$URL/v1/campaigns"
# bob has his own model and dataset (the same bytes), but not alice's map
req bob_model 201 "${B[@]}" "${OCT[@]}" --data-binary @"$FX/linear.onnx" "$URL/v1/models"
req bob_dataset 201 "${B[@]}" "${OCT[@]}" --data-binary @"$FX/linear.eval.safetensors" "$URL/v1/datasets"
req bob_uses_alices_map 422 "${B[@]}" "${JSON[@]}" --data-binary @"$tmp/daemon.json" "$URL/v1/campaigns"
eq bob_pointer "$(jget "j['errors'][0]['pointer']")" "/faults/error_map"

# --- delete: not while a campaign uses it; then gone, blob and all
$PY -c "import json,sys; s=json.load(open(sys.argv[1])); s['faults']['repeats']=1000000; print(json.dumps(s))" \
  "$tmp/daemon.json" >"$tmp/long.json"
req long 202 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/long.json" "$URL/v1/campaigns";  LID=$(jget "j['id']")
req in_use 409 "${A[@]}" -X DELETE "$URL/v1/error-maps/$EID";  body_has in_use "campaign uses this error map"
req cancel_long 202 "${A[@]}" -X POST "$URL/v1/campaigns/$LID/cancel"
wait_state "$LID" canceled 30 && ok || bad "the long campaign did not cancel"
req delete 204 "${A[@]}" -X DELETE "$URL/v1/error-maps/$EID"
req gone 404 "${A[@]}" "$URL/v1/error-maps/$EID"
[ ! -e "$tmp/data/blobs/${EID:0:2}/$EID" ] && ok || bad "the deleted map's blob is still there"
"$BFD" --check --data-dir "$tmp/data" >"$tmp/check" 2>&1 && ok || { bad "bitflipd --check after error maps"; cat "$tmp/check"; }

stop_daemon TERM; PID=
finish
