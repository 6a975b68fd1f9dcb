#!/usr/bin/env bash
# bitflipd --limit KEY=VALUE: the CLI's parser limits, held to by the upload
# checks, the campaign workers and the daemon's own spec parse. A limit set
# lower than a file needs is a 422 naming the limit, where the default daemon
# gets past it (and refuses or accepts the file on its merits); a bad key or
# value stops the start with exit 2 and says what the keys are.
# usage: test_limits.sh BITFLIPD BITFLIP FIXTURES_DIR
set -u
BFD=$1 BF=$2 FIX=$3
. "$(dirname "$0")/lib.sh"
M=$FIX/conformance/demo_digits.onnx
D=$FIX/conformance/demo_digits.eval.safetensors
OCT=(-H 'Content-Type: application/octet-stream')
JSON=(-H 'Content-Type: application/json')
$PY "$(dirname "$0")/../fixtures/make_hostile.py" "$tmp" >/dev/null || { echo "FAIL making the hostile files"; exit 1; }

# upload_pair: the digits model and eval set; sets MID, DID
upload_pair() {
  req "$1 model" 201 "${OCT[@]}" --data-binary @"$M" "$URL/v1/models";  MID=$(jget "j['id']")
  req "$1 dataset" 201 "${OCT[@]}" --data-binary @"$D" "$URL/v1/datasets";  DID=$(jget "j['id']")
}
# a spec 4 deep (root, sampling, list, an entry) that the default limits pass
list_spec() {
  $PY -c "import json,sys; print(json.dumps({'model': sys.argv[1], 'dataset': sys.argv[2], 'seed': 1,
    'faults': {'model': 'bitflip', 'representation': 'fp32'},
    'sampling': {'list': [{'tensor': 'fc.weight', 'index': 12, 'bit': 14}]}}))" "$MID" "$DID" >"$tmp/list.json"
}

# --- the defaults ---------------------------------------------------------------
start_daemon "$tmp/d0" || exit 1
# if3.onnx nests Ifs 3 deep: within the default 64, so the ordinary checks judge it
req default_if3 422 "${OCT[@]}" --data-binary @"$tmp/if3.onnx" "$URL/v1/models"
body_has default_if3_reason "the graph has no inputs to feed"
if grep -qF "max_graph_depth" "$tmp/body"; then bad "default_if3: refused for a limit"; else ok; fi
upload_pair default
list_spec
req default_deep_spec 202 "${JSON[@]}" --data-binary @"$tmp/list.json" "$URL/v1/campaigns"
stop_daemon

# --- a model limit: the upload check child holds the file to it -------------------
start_daemon "$tmp/d1" --limit model.graph-depth=2 || exit 1
req if3_limit 422 "${OCT[@]}" --data-binary @"$tmp/if3.onnx" "$URL/v1/models";  is_problem if3_limit 422
body_has if3_limit_named "the limit is 2 (max_graph_depth)"
# a model within it still goes through, and a campaign on it runs to the end
# in a worker that loads under the same limits
upload_pair d1
$PY -c "import json,sys; s=json.load(open(sys.argv[1])); s['model']=sys.argv[2]; s['dataset']=sys.argv[3]; s['trials']=20; print(json.dumps(s))" \
  "$FIX/specs/digits_weights.json" "$MID" "$DID" >"$tmp/spec.json"
req d1_campaign 202 "${JSON[@]}" --data-binary @"$tmp/spec.json" "$URL/v1/campaigns";  CID=$(jget "j['id']")
wait_state "$CID" succeeded 120 && ok || bad "d1_campaign did not finish"
stop_daemon

# --- a data limit: the upload check of an eval set -------------------------------------
# data.tensors=1 refuses the digits eval set (inputs and labels)
start_daemon "$tmp/d2" --limit data.tensors=1 || exit 1
req data_limit 422 "${OCT[@]}" --data-binary @"$D" "$URL/v1/datasets"
body_has data_limit_named "(max_tensors)"
stop_daemon

# --- a spec limit: the daemon's own parse at submission ------------------------------
start_daemon "$tmp/d3" --limit spec.depth=3 || exit 1
upload_pair d3
list_spec
req spec_depth 422 "${JSON[@]}" --data-binary @"$tmp/list.json" "$URL/v1/campaigns";  is_problem spec_depth 422
eq spec_depth_pointer "$(jget "[e['pointer'] for e in j['errors']]")" "['']"
body_has spec_depth_named "nested deeper than 3 levels"
body_has spec_depth_limit "(max_depth)"
stop_daemon

# --- the config file: "limit" as an object ---------------------------------------------
printf '{"limit": {"model.graph-depth": 2}}\n' >"$tmp/config.json"
start_daemon "$tmp/d4" --config "$tmp/config.json" || exit 1
req config_limit 422 "${OCT[@]}" --data-binary @"$tmp/if3.onnx" "$URL/v1/models"
body_has config_limit_named "(max_graph_depth)"
stop_daemon

# --- bad limits stop the start -------------------------------------------------------
"$BFD" --data-dir "$tmp/bad" --limit nosuch=1 >"$tmp/out" 2>&1
eq bad_key_exit "$?" 2
grep -qF "no limit 'nosuch'; the limits are model.graph-depth, model.type-depth" "$tmp/out" && ok || bad "bad_key: $(cat "$tmp/out")"
grep -qF "spec.string" "$tmp/out" && ok || bad "bad_key lists not every key: $(cat "$tmp/out")"
"$BFD" --data-dir "$tmp/bad" --limit model.graph-depth=zero >"$tmp/out" 2>&1
eq bad_value_exit "$?" 2
grep -qF "model.graph-depth must be an integer from 1 to 1000000000, got 'zero'" "$tmp/out" && ok || bad "bad_value: $(cat "$tmp/out")"
"$BFD" --data-dir "$tmp/bad" --limit data.bytes=lots >"$tmp/out" 2>&1
eq bad_size_exit "$?" 2
grep -qF "data.bytes wants a size such as 4096, 64M or 2G, got 'lots'" "$tmp/out" && ok || bad "bad_size: $(cat "$tmp/out")"
printf '{"limit": {"nosuch": 1}}\n' >"$tmp/bad.json"
"$BFD" --data-dir "$tmp/bad" --config "$tmp/bad.json" >"$tmp/out" 2>&1
eq bad_config_exit "$?" 2
grep -qF "no limit 'nosuch'" "$tmp/out" && ok || bad "bad_config: $(cat "$tmp/out")"
"$BFD" --help >"$tmp/out" 2>&1
grep -qF -- "--limit KEY=VALUE" "$tmp/out" && ok || bad "--help says nothing of --limit"

finish
