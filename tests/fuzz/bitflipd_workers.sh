#!/usr/bin/env bash
# The fuzz build's bitflipd (ASan + UBSan, clang) starts its workers and
# upload checks: the digits model and eval set are uploaded (each checked in
# a child) and a 20-trial campaign runs to `succeeded` in a worker. Before
# issue 34 the children set RLIMIT_AS under ASan (clang 14 does not define
# __SANITIZE_ADDRESS__) and died at start. Test `fuzz_bitflipd_workers` of
# build-fuzz (tests/fuzz/fuzz_http.cmake).
# usage: bitflipd_workers.sh BITFLIPD FIXTURES_DIR
set -u
BFD=$1 FIX=$2
. "$(dirname "$0")/../integration/lib.sh"
OCT=(-H 'Content-Type: application/octet-stream')
JSON=(-H 'Content-Type: application/json')
start_daemon "$tmp/data" || exit 1
req model 201 "${OCT[@]}" --data-binary @"$FIX/conformance/demo_digits.onnx" "$URL/v1/models";  MID=$(jget "j['id']")
req dataset 201 "${OCT[@]}" --data-binary @"$FIX/conformance/demo_digits.eval.safetensors" "$URL/v1/datasets";  DID=$(jget "j['id']")
$PY -c "import json,sys; s=json.load(open(sys.argv[1])); s['model']=sys.argv[2]; s['dataset']=sys.argv[3]; s['trials']=20; print(json.dumps(s))" \
  "$FIX/specs/digits_weights.json" "$MID" "$DID" >"$tmp/spec.json"
req campaign 202 "${JSON[@]}" --data-binary @"$tmp/spec.json" "$URL/v1/campaigns";  CID=$(jget "j['id']")
wait_state "$CID" succeeded 300 && ok || { bad "the campaign did not succeed"; tail -20 "$tmp/daemon.log"; }
stop_daemon
finish
