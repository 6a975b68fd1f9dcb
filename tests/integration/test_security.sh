#!/usr/bin/env bash
# Tenants and hostile input: tokens, isolation (another tenant's things are
# 404), the loopback rule, and bad uploads and requests, each answered with
# the right status and a problem+json body, the daemon healthy afterwards.
# usage: test_security.sh BITFLIPD BITFLIP FIXTURES_DIR
set -u
BFD=$1 BF=$2 FIX=$3
. "$(dirname "$0")/lib.sh"
M=$FIX/conformance/demo_digits.onnx
D=$FIX/conformance/demo_digits.eval.safetensors
OCT=(-H 'Content-Type: application/octet-stream')
JSON=(-H 'Content-Type: application/json')

# --- the loopback rule ---------------------------------------------------------
"$BFD" --listen 0.0.0.0:0 --data-dir "$tmp/open" >"$tmp/out" 2>&1
eq refuse_public_without_tokens "$?" 2
grep -q "refusing to serve 0.0.0.0 without tokens" "$tmp/out" && ok || bad "no reason given for refusing: $(cat "$tmp/out")"

# --- tokens and tenants ----------------------------------------------------------
ALICE=$("$BFD" token create --tenant alice --data-dir "$tmp/data" 2>"$tmp/out")
eq token_shape "$(echo "$ALICE" | grep -cE '^bft_[0-9a-f]{64}$')" 1
grep -q "shown only this once" "$tmp/out" && ok || bad "token create says nothing about keeping it"
if grep -rqF "$ALICE" "$tmp/data" 2>/dev/null; then bad "the token is stored in clear"; else ok; fi
"$BFD" token create --tenant 'no/slash' --data-dir "$tmp/data" >/dev/null 2>&1
eq bad_tenant_name "$?" 2
BOB=bft_$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '# lab tokens\nbob:%s\n' "$BOB" >"$tmp/tokens"
cat >"$tmp/config.json" <<JSONEOF
{"max_upload_bytes": 200000, "max_json_bytes": 4096, "max_trials": 100000, "tenant_queued": 3,
 "max_connections": 12}
JSONEOF
start_daemon "$tmp/data" --tokens-file "$tmp/tokens" --config "$tmp/config.json" || exit 1
A=(-H "Authorization: Bearer $ALICE")
B=(-H "Authorization: Bearer $BOB")

req no_token 401 "$URL/v1/models";  is_problem no_token 401;  header_has no_token_www "WWW-Authenticate: Bearer"
req wrong_token 401 -H "Authorization: Bearer bft_0000000000000000000000000000000000000000000000000000000000000000" "$URL/v1/models"
is_problem wrong_token 401
req not_bearer 401 -H "Authorization: Basic YWxpY2U6eA==" "$URL/v1/models"
req open_version 200 "$URL/v1"
req open_metrics 200 "$URL/metrics"
req open_ready 200 "$URL/v2/health/ready"

req alice_model 201 "${A[@]}" "${OCT[@]}" --data-binary @"$M" "$URL/v1/models"
MID=$(jget "j['id']")
req alice_data 201 "${A[@]}" "${OCT[@]}" --data-binary @"$D" "$URL/v1/datasets"
DID=$(jget "j['id']")
req bob_sees_no_model 404 "${B[@]}" "$URL/v1/models/$MID";  is_problem bob_sees_no_model 404
req bob_list_empty 200 "${B[@]}" "$URL/v1/models";  eq bob_list_empty_items "$(jget "len(j['items'])")" 0
req bob_cannot_delete 404 "${B[@]}" -X DELETE "$URL/v1/models/$MID"
$PY -c "import json,sys; s=json.load(open(sys.argv[1])); s['model']=sys.argv[2]; s['dataset']=sys.argv[3]; print(json.dumps(s))" \
  "$FIX/specs/digits_weights.json" "$MID" "$DID" >"$tmp/spec.json"
req bob_uses_alices_model 422 "${B[@]}" "${JSON[@]}" --data-binary @"$tmp/spec.json" "$URL/v1/campaigns"
is_problem bob_uses_alices_model 422;  eq unknown_model_pointer "$(jget "j['errors'][0]['pointer']")" "/model"
$PY -c "import json,sys; s=json.load(open(sys.argv[1])); s['mitigations']=['clip']; print(json.dumps(s))" \
  "$tmp/spec.json" >"$tmp/mit.json"
req mitigations_not_here_yet 422 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/mit.json" "$URL/v1/campaigns"
is_problem mitigations_not_here_yet 422;  eq mitigations_pointer "$(jget "j['errors'][0]['pointer']")" "/mitigations"
# a profiled error map is a path of the client's: it must not reach the daemon's disk
$PY -c "import json,sys; s=json.load(open(sys.argv[1])); s.pop('trials', None); s['faults']={'model': 'profiled', 'error_map': '/etc/passwd', 'repeats': 2}; print(json.dumps(s))" \
  "$tmp/spec.json" >"$tmp/map.json"
req profiled_path_refused 422 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/map.json" "$URL/v1/campaigns"
is_problem profiled_path_refused 422;  body_has profiled_path_named "POST /v1/error-maps";  eq profiled_pointer "$(jget "j['errors'][0]['pointer']")" "/faults/error_map"
req alice_campaign 202 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/spec.json" "$URL/v1/campaigns"
CID=$(jget "j['id']")
req bob_sees_no_campaign 404 "${B[@]}" "$URL/v1/campaigns/$CID"
req bob_no_events 404 "${B[@]}" "$URL/v1/campaigns/$CID/events"
req bob_cannot_cancel 404 "${B[@]}" -X POST "$URL/v1/campaigns/$CID/cancel"
req bob_campaigns_empty 200 "${B[@]}" "$URL/v1/campaigns";  eq bob_campaigns_items "$(jget "len(j['items'])")" 0
req alice_sees_it 200 "${A[@]}" "$URL/v1/campaigns/$CID"
AUTH=("${A[@]}"); wait_state "$CID" succeeded 120 && ok || bad "alice's campaign did not finish"

# --- bad input, each a clear 4xx -------------------------------------------------
head -c 300 "$M" >"$tmp/trunc.onnx"
req truncated_onnx 422 "${A[@]}" "${OCT[@]}" --data-binary @"$tmp/trunc.onnx" "$URL/v1/models";  is_problem truncated_onnx 422
head -c 5000 /dev/urandom >"$tmp/random.bin"
req random_bytes 422 "${A[@]}" "${OCT[@]}" --data-binary @"$tmp/random.bin" "$URL/v1/models";  is_problem random_bytes 422
# a safetensors header whose tensor claims bytes past the end of the file
$PY - "$tmp/past.safetensors" <<'PYEOF'
import json, struct, sys
h = json.dumps({"x": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]},
                "labels": {"dtype": "I64", "shape": [4], "data_offsets": [64, 96]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + b"\0" * 40)
PYEOF
req safetensors_past_end 422 "${A[@]}" "${OCT[@]}" --data-binary @"$tmp/past.safetensors" "$URL/v1/datasets"
is_problem safetensors_past_end 422
req wrong_content_type 415 "${A[@]}" -H 'Content-Type: application/json' --data-binary @"$M" "$URL/v1/models"
is_problem wrong_content_type 415
req spec_not_json_type 415 "${A[@]}" "${OCT[@]}" --data-binary @"$tmp/spec.json" "$URL/v1/campaigns"
head -c 300000 /dev/zero >"$tmp/big.bin"
# Expect: 100-continue, as a client streaming a large body should: curl then waits for the
# reply to the headers (here the 413) before sending the body. Without it, it may still be
# writing when the daemon answers and closes, and fail on a broken pipe with no reply
# (HTTP 000), as it did once under ASan.
req oversized_upload 413 "${A[@]}" "${OCT[@]}" -H 'Expect: 100-continue' --data-binary @"$tmp/big.bin" "$URL/v1/models"
is_problem oversized_upload 413
# 413 comes from the headers alone: a declared terabyte is refused before any body is sent
$PY - "$PORT" "$ALICE" <<'PYEOF' && ok || bad "a huge Content-Length was not refused before the body"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(("POST /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
           "Content-Type: application/octet-stream\r\nContent-Length: 1000000000000\r\n\r\n" % sys.argv[2]).encode())
reply = s.recv(4096).decode(errors="replace")
assert reply.startswith("HTTP/1.1 413"), reply[:200]
PYEOF
head -c 5000 /dev/zero | tr '\0' ' ' >"$tmp/big.json"
req oversized_json 413 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/big.json" "$URL/v1/campaigns"
printf '{"model": "%s", "seed": ' "$MID" >"$tmp/malformed.json"
req malformed_json 400 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/malformed.json" "$URL/v1/campaigns"
is_problem malformed_json 400;  body_has malformed_json_where "line 1"
printf '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]' >"$tmp/deep.json"
req deep_json 422 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/deep.json" "$URL/v1/campaigns"
$PY -c "import json,sys; s=json.load(open(sys.argv[1])); s['faults']['bits']=40; s['trails']=3; print(json.dumps(s))" \
  "$tmp/spec.json" >"$tmp/invalid.json"
req invalid_spec 422 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/invalid.json" "$URL/v1/campaigns"
is_problem invalid_spec 422
eq invalid_spec_pointers "$(jget "sorted(e['pointer'] for e in j['errors'])")" "['/faults/bits', '/trails']"
body_has invalid_spec_hint "trials"
$PY -c "import json,sys; s=json.load(open(sys.argv[1])); s['trials']=100001; print(json.dumps(s))" "$tmp/spec.json" >"$tmp/toomany.json"
req too_many_trials 422 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/toomany.json" "$URL/v1/campaigns"
eq too_many_trials_pointer "$(jget "j['errors'][0]['pointer']")" "/trials"
$PY -c "import json,sys; s=json.load(open(sys.argv[1])); s['gates']=['frobs<=1', 'critical_rate', 'rate<=1', 'critical_rate_upper<=0.9', 'golden_accuracy>=0.1'];  print(json.dumps(s))" "$tmp/spec.json" >"$tmp/gates.json"
req bad_gates 422 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/gates.json" "$URL/v1/campaigns"
eq bad_gates_pointers "$(jget "[e['pointer'] for e in j['errors']]")" "['/gates/0', '/gates/1', '/gates/2']"
# hostile request targets: each is a 400 naming the byte, never a 404 that
# hides it nor a silent match (before, "$MID%00junk" reached the handler as
# "$MID", and "/v1//models" was a 404)
req encoded_slashes 400 "${A[@]}" "$URL/v1/models/..%2F..%2Fetc%2Fpasswd";  is_problem encoded_slashes 400
body_has encoded_slashes_names "encoded slash (%2F) at byte 13"
req nul_after_id 400 "${A[@]}" "$URL/v1/models/$MID%00junk";  is_problem nul_after_id 400
body_has nul_after_id_names "encoded control byte (%00) at byte 75"
req slash_into_id 400 "${A[@]}" "$URL/v1/models%2F$MID";  body_has slash_into_id "encoded slash (%2F)"
req empty_segment 400 "${A[@]}" --path-as-is "$URL/v1//models";  is_problem empty_segment 400
body_has empty_segment_names "empty segment ('//') at byte 3"
req leading_empty 400 "${A[@]}" --path-as-is "$URL//v1/models";  body_has leading_empty "empty segment"
req trailing_empty 400 "${A[@]}" --path-as-is "$URL/v1/models//";  body_has trailing_empty "empty segment"
req control_in_query 400 "${A[@]}" "$URL/v1/models?limit=5%0A";  body_has control_in_query "the query has an encoded control byte (%0A)"
req del_in_path 400 "${A[@]}" "$URL/v1/campaigns/%7F/events";  body_has del_in_path "(%7F)"
req trailing_slash_ok 200 "${A[@]}" "$URL/v1/models/$MID/"
req encoded_letters_ok 200 "${A[@]}" "$URL/v1/models/%$(printf %x "'${MID:0:1}")${MID:1}"
req not_a_campaign_id 404 "${A[@]}" "$URL/v1/campaigns/12345";  body_has not_a_campaign_id "not a campaign id"
req unknown_route 404 "${A[@]}" "$URL/v1/frobs";  is_problem unknown_route 404
req wrong_method 405 "${A[@]}" -X PUT "$URL/v1/models";  header_has wrong_method_allow "Allow: POST, GET"
req empty_body 400 "${A[@]}" "${OCT[@]}" --data-binary '' "$URL/v1/models"
req bad_limit 400 "${A[@]}" "$URL/v1/models?limit=0"
# queue limit per tenant: 3 queued at most (alice's slots: 2 running)
$PY -c "import json,sys; s=json.load(open(sys.argv[1])); s['trials']=100000; print(json.dumps(s))" "$tmp/spec.json" >"$tmp/long.json"
for i in 1 2 3 4 5; do curl -sS -o /dev/null "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/long.json" "$URL/v1/campaigns"; done
req queue_full 429 "${A[@]}" "${JSON[@]}" --data-binary @"$tmp/long.json" "$URL/v1/campaigns";  is_problem queue_full 429
# bob's own copies of the same files have the same ids; alice's full queue is not his
req bob_model 201 "${B[@]}" "${OCT[@]}" --data-binary @"$M" "$URL/v1/models";  eq same_bytes_same_id "$(jget "j['id']")" "$MID"
req bob_data 201 "${B[@]}" "${OCT[@]}" --data-binary @"$D" "$URL/v1/datasets"
req bob_not_limited_by_alice 202 "${B[@]}" "${JSON[@]}" --data-binary @"$tmp/long.json" "$URL/v1/campaigns"
req bob_cancel 202 "${B[@]}" -X POST "$URL/v1/campaigns/$(jget "j['id']")/cancel"
req alice_delete_while_used 409 "${A[@]}" -X DELETE "$URL/v1/models/$MID";  is_problem alice_delete_while_used 409

req alice_cancels_queue 200 "${A[@]}" "$URL/v1/campaigns?state=queued&limit=1000"
for c in $(jget "' '.join(c['id'] for c in j['items'])"); do curl -sS -o /dev/null "${A[@]}" -X POST "$URL/v1/campaigns/$c/cancel"; done

# fairness: with alice's two long campaigns on both workers, bob's small one
# gets the next free worker and finishes while hers still run
# (a tenant's started campaign takes the free workers before its next one starts)
req alice_running 200 "${A[@]}" "$URL/v1/campaigns?state=running&limit=1000"
eq alice_running_one "$(jget "len(j['items'])")" 1
RC=$(jget "j['items'][0]['id']")
req bob_small 202 "${B[@]}" "${JSON[@]}" --data-binary @"$tmp/spec.json" "$URL/v1/campaigns"
BC=$(jget "j['id']")
AUTH=("${B[@]}"); wait_state "$BC" succeeded 120 && ok || bad "bob's campaign was starved by alice's"
req alice_still_running 200 "${A[@]}" "$URL/v1/campaigns?state=running&limit=1000"
eq alice_still_running "$(jget "[c['id'] for c in j['items']]")" "['$RC']"

# connections: past max_connections a request gets a 503 with a reason, not a closed socket
pids=()
for i in $(seq 1 12); do curl -sSN "${A[@]}" "$URL/v1/campaigns/$RC/events" -o /dev/null --max-time 30 & pids+=($!); done
sleep 1
req too_many_connections 503 "$URL/v2/health/live";  is_problem too_many_connections 503
body_has too_many_connections_why "too many connections"
kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
# a suspended stream's closed socket is noticed at its next event (progress, 4 a second)
for _ in $(seq 1 50); do curl -fsS -o /dev/null "$URL/v2/health/ready" 2>/dev/null && break; sleep 0.1; done

# still healthy, and a good request still works
req healthy_after 200 "$URL/v2/health/ready"
req good_after 200 "${A[@]}" "${OCT[@]}" --data-binary @"$M" "$URL/v1/models"
stop_daemon TERM
eq clean_exit "$STOP_RC" 0
# the tokens file is read at every start: the second start is as good as the first
start_daemon "$tmp/data" --tokens-file "$tmp/tokens" --config "$tmp/config.json" --log-format json || exit 1
req bob_after_restart 200 "${B[@]}" "$URL/v1/models"
sleep 0.2
$PY - "$tmp/daemon.log" <<'PYEOF' && ok || bad "--log-format json: no JSON line for bob's request"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
assert any(l.get("method") == "GET" and l.get("path") == "/v1/models" and l.get("status") == 200
           and l.get("tenant") == "bob" and "ms" in l for l in lines), lines[-3:]
PYEOF
stop_daemon TERM
finish
