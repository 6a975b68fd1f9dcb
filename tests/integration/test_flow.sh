#!/usr/bin/env bash
# The whole flow with curl, as a user meets it: upload a model and an eval set,
# submit a campaign, follow its events to the end, fetch the results, and
# check they equal `bitflip run --local` on the same spec; then list, page,
# metrics, the contract, delete.
# usage: test_flow.sh BITFLIPD BITFLIP FIXTURES_DIR
set -u
BFD=$1 BF=$2 FIX=$3
. "$(dirname "$0")/lib.sh"
M=$FIX/conformance/demo_digits.onnx
D=$FIX/conformance/demo_digits.eval.safetensors
OCT=(-H 'Content-Type: application/octet-stream')
JSON=(-H 'Content-Type: application/json')

start_daemon "$tmp/data" || exit 1
req version 200 "$URL/v1";  body_has version '"bitflip"'
req live 200 "$URL/v2/health/live"
req ready 200 "$URL/v2/health/ready";  body_has ready '"ready"'

req upload_model 201 "${OCT[@]}" --data-binary @"$M" "$URL/v1/models?name=digits"
MID=$(jget "j['id']")
eq model_id_is_sha256 "$MID" "$(sha256sum "$M" | cut -d' ' -f1)"
header_has model_location "Location: /v1/models/$MID"
eq model_summary "$(jget "j['name'], j['size'], len(j['params']) > 0, j['inputs'][0]['name'] != ''")" "digits $(stat -c %s "$M") True True"
req upload_model_again 200 "${OCT[@]}" --data-binary @"$M" "$URL/v1/models?name=digits"
# a PyTorch export's parameters carry the PyTorch names recovered from it (docs/EXPORT.md)
req upload_torch_model 201 "${OCT[@]}" --data-binary @"$FIX/names/tiny_resnet.onnx" "$URL/v1/models?name=tiny"
TID=$(jget "j['id']")
eq torch_names "$(jget "sorted(p['torch_name'] for p in j['params'] if p.get('torch_note') == 'a BatchNorm folded in')[:3]")" \
   "['conv1.bias', 'conv1.weight', 'layer1.0.conv1.bias']"
req delete_torch_model 204 -X DELETE "$URL/v1/models/$TID"
req upload_dataset 201 "${OCT[@]}" --data-binary @"$D" "$URL/v1/datasets?name=digits-eval"
DID=$(jget "j['id']")
N=$($PY -c "import json,struct,sys; f=open(sys.argv[1],'rb'); n=struct.unpack('<Q',f.read(8))[0]; print(json.loads(f.read(n))['labels']['shape'][0])" "$D")
eq dataset_summary "$(jget "j['samples'], j['labels']")" "$N True"
req get_model 200 "$URL/v1/models/$MID";  body_has get_model '"layers"'

# the CLI's spec, with the uploads' ids for model and dataset
$PY - "$FIX/specs/digits_weights.json" "$MID" "$DID" >"$tmp/spec.json" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1])); s["model"] = sys.argv[2]; s["dataset"] = sys.argv[3]
s["gates"] = ["critical_rate<=1", "masked_rate>=1.01"]
print(json.dumps(s))
PYEOF
req submit 202 "${JSON[@]}" --data-binary @"$tmp/spec.json" "$URL/v1/campaigns"
CID=$(jget "j['id']")
header_has campaign_location "Location: /v1/campaigns/$CID"
eq submit_state "$(jget "j['state'] in ('queued', 'running'), j['progress']['trials_planned']")" "True 240"

# events, live, to the end
timeout 120 curl -sSN "$URL/v1/campaigns/$CID/events" >"$tmp/events"
$PY - "$tmp/events" <<'PYEOF' && ok || bad "event stream: see above"
import json, sys
evs, cur = [], {}
for line in open(sys.argv[1]).read().split("\n"):
    if not line:
        if cur: evs.append(cur); cur = {}
        continue
    if line.startswith(":"): continue
    k, _, v = line.partition(": ")
    cur[k] = v
types = [e["event"] for e in evs]
assert types[0] == "state" and types[-1] == "end", types
assert "result" in types and types.index("result") == len(types) - 2, types
seqs = [int(e["id"].split("-")[1]) for e in evs]
assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs
fr = [json.loads(e["data"])["fraction"] for e in evs if e["event"] == "progress"]
assert fr and fr == sorted(fr) and fr[-1] == 1.0, fr
end = json.loads(evs[-1]["data"])
assert end["state"] == "succeeded" and end["verdict"] == "fail", end
res = json.loads(evs[-2]["data"])
assert res["summary"]["trials"] == 240, res["summary"]
PYEOF

# a stream opened after the end replays it: state, the last progress, result, end
timeout 30 curl -sSN "$URL/v1/campaigns/$CID/events" >"$tmp/events_after"
$PY - "$tmp/events_after" <<'PYEOF' && ok || bad "replayed event stream: see above"
import json, sys
evs = [dict(l.split(": ", 1) for l in b.split("\n") if l and not l.startswith(":"))
       for b in open(sys.argv[1]).read().split("\n\n") if b.strip() and not b.startswith(":")]
assert [e["event"] for e in evs] == ["state", "progress", "result", "end"], evs
p = json.loads(evs[1]["data"])
assert p["fraction"] == 1.0 and p["trials_done"] == 240 and sum(p["outcomes"].values()) == 240, p
PYEOF

req state 200 "$URL/v1/campaigns/$CID"
eq final_state "$(jget "j['state'], j['verdict'], j['progress']['trials_done'], 'result' in j")" "succeeded fail 240 True"
# ... and the listing says the same of it, without the result document
req listed 200 "$URL/v1/campaigns"
eq listed_progress "$(jget "[(c['progress']['trials_done'], sum(c['progress']['outcomes'].values()), c['progress']['fraction'], 'result' in c) for c in j['items'] if c['id'] == '$CID']")" "[(240, 240, 1.0, False)]"

# progress reports the intervals as they narrow (docs/SERVICE.md): an adaptive
# campaign with stop targets it cannot meet runs all its 3,000 trials (one
# chunk), and each progress event carries the critical and DUE rates with
# their intervals and the half-widths the stop rule compares with its margins.
# Under the sanitizers (BF_SANITIZED, tests/CMakeLists.txt) 1,000: the same
# steps and assertions (a progress event every 250 ms, each one's intervals
# checked, the last no wider than the first), where the 3,000 were most of
# the TSan suite's longest test (123 s of its 184 in an idle make test).
adaptive_trials=3000
[ -n "${BF_SANITIZED:-}" ] && adaptive_trials=1000
$PY - "$tmp/spec.json" "$adaptive_trials" >"$tmp/adaptive.json" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1])); s.pop("gates")
s["sampling"], s["trials"] = "adaptive", int(sys.argv[2])   # 20,000 outran the 300 s wait under TSan
s["stop"] = {"margin": 0.0001, "per_tensor_margin": 0.0001}
print(json.dumps(s))
PYEOF
req submit_adaptive 202 "${JSON[@]}" --data-binary @"$tmp/adaptive.json" "$URL/v1/campaigns"
AID=$(jget "j['id']")
timeout 300 curl -sSN "$URL/v1/campaigns/$AID/events" >"$tmp/events_adaptive"
$PY - "$tmp/events_adaptive" "$adaptive_trials" <<'PYEOF' && ok || bad "adaptive progress intervals: see above"
import json, sys
evs = [dict(l.split(": ", 1) for l in b.split("\n") if l and not l.startswith(":"))
       for b in open(sys.argv[1]).read().split("\n\n") if b.strip() and not b.startswith(":")]
prog = [json.loads(e["data"]) for e in evs if e["event"] == "progress"]
with_iv = [p for p in prog if "intervals" in p]
assert with_iv, prog
for p in with_iv:
    iv = p["intervals"]
    for o in ("critical", "due"):
        lo, hi = iv[o]["ci"]
        assert 0 <= lo <= iv[o]["rate"] <= hi <= 1, iv
    # the overall half-width is the wider of the two rates' (hand arithmetic)
    want = max(iv["critical"]["ci"][1] - iv["critical"]["ci"][0], iv["due"]["ci"][1] - iv["due"]["ci"][0]) / 2
    assert abs(iv["half_width"]["overall"] - want) < 1e-12, (iv, want)
    # per tensor: a target, so reported, and no tensor is known better than the whole
    assert iv["half_width"]["per_tensor"] >= iv["half_width"]["overall"] - 1e-12, iv
    assert "per_bit" not in iv["half_width"], iv   # not a target
res = json.loads([e for e in evs if e["event"] == "result"][0]["data"])
assert res["summary"]["trials"] + res["summary"]["adaptive"]["pilot"] == int(sys.argv[2]), res["summary"]
# the last estimate's interval is no wider than the first's: the trials narrow it
assert with_iv[-1]["intervals"]["half_width"]["overall"] <= with_iv[0]["intervals"]["half_width"]["overall"], with_iv
PYEOF
req delete_adaptive 204 -X DELETE "$URL/v1/campaigns/$AID"   # the listings below count the others

# the same numbers as the CLI on the same spec (the CSV carries no timings)
(cd "$FIX/specs" && "$BF" run --local digits_weights.json --format csv --trials-out "$tmp/local_trials.jsonl") >"$tmp/local.csv" 2>/dev/null
req results_csv 200 "$URL/v1/campaigns/$CID/results?format=csv"
if cmp -s "$tmp/local.csv" "$tmp/body"; then ok; else bad "daemon CSV differs from bitflip run --local"; diff "$tmp/local.csv" "$tmp/body" | head; fi
req results_json 200 "$URL/v1/campaigns/$CID/results"
(cd "$FIX/specs" && "$BF" run --local digits_weights.json --format json) >"$tmp/local.json" 2>/dev/null
$PY - "$tmp/local.json" "$tmp/body" <<'PYEOF' && ok || bad "daemon JSON result differs from the CLI's"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for k in ("summary", "by_tensor", "by_bit", "by_fault_model", "golden"):
    assert a[k] == b[k], (k, a[k], b[k])
PYEOF
req results_trials 200 "$URL/v1/campaigns/$CID/results?trials=true"
$PY - "$tmp/local_trials.jsonl" "$tmp/body" <<'PYEOF' && ok || bad "per-trial records differ from the CLI's --trials-out"
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
assert len(a) == len(b) == 240, (len(a), len(b))
assert [t["trial"] for t in b] == list(range(240))
assert a == b, next((x, y) for x, y in zip(a, b) if x != y)
PYEOF
req results_junit 200 "$URL/v1/campaigns/$CID/results?format=junit"
body_has junit_fail 'failures="1"';  body_has junit_case 'masked_rate&gt;=1.01'
req results_badfmt 400 "$URL/v1/campaigns/$CID/results?format=xml";  is_problem results_badfmt 400

# the CLI against the daemon: the same CSV, trial records and gate exit codes as --local
(cd "$FIX/specs" && "$BF" run --server "$URL" digits_weights.json --format csv --trials-out "$tmp/remote_trials.jsonl" \
   --gate 'critical_rate<=1' --junit "$tmp/remote.xml") >"$tmp/remote.csv" 2>"$tmp/remote.err"
eq cli_server_exit "$?" 0
if cmp -s "$tmp/local.csv" "$tmp/remote.csv"; then ok; else bad "bitflip run --server differs from --local"; cat "$tmp/remote.err"; fi
if cmp -s "$tmp/local_trials.jsonl" "$tmp/remote_trials.jsonl"; then ok; else bad "--server trial records differ from --local"; fi
grep -q 'failures="0"' "$tmp/remote.xml" && ok || bad "--server --junit"
(cd "$FIX/specs" && BITFLIP_SERVER=$URL "$BF" run digits_weights.json --gate 'masked_rate>=1.01') >/dev/null 2>"$tmp/remote.err"
eq cli_server_gate_fails "$?" 1
"$BF" run --server "$URL" "$FIX/specs/bad.json" >/dev/null 2>"$tmp/remote.err"
eq cli_server_bad_spec "$?" 2
"$BF" run --server http://127.0.0.1:1 "$FIX/specs/digits_weights.json" >/dev/null 2>"$tmp/remote.err"
eq cli_server_unreachable "$?" 3
grep -q "cannot reach bitflipd" "$tmp/remote.err" && ok || bad "unreachable daemon: $(cat "$tmp/remote.err")"

# lists, paged
req submit2 202 "${JSON[@]}" --data-binary @"$tmp/spec.json" "$URL/v1/campaigns"
CID2=$(jget "j['id']")
req list 200 "$URL/v1/campaigns?limit=1"
eq page1 "$(jget "len(j['items']), j['items'][0]['id'], j['next_page_token'] is not None")" "1 $CID True"
# every campaign, one page at a time: none skipped, none twice, the last page says so
$PY - "$URL" <<'PYEOF' && ok || bad "paging through campaigns"
import json, sys, urllib.request
seen, tok = [], ""
while True:
    j = json.load(urllib.request.urlopen(sys.argv[1] + "/v1/campaigns?limit=1" + ("&page_token=" + tok if tok else "")))
    seen += [c["id"] for c in j["items"]]
    tok = j["next_page_token"]
    if tok is None: break
allc = json.load(urllib.request.urlopen(sys.argv[1] + "/v1/campaigns?limit=1000"))
assert allc["next_page_token"] is None and seen == [c["id"] for c in allc["items"]] and len(seen) == len(set(seen)) == 4, seen
PYEOF
req list_state 200 "$URL/v1/campaigns?state=succeeded&limit=1000"
body_has list_state "$CID"
req list_badstate 400 "$URL/v1/campaigns?state=sleeping";  is_problem list_badstate 400
req models 200 "$URL/v1/models";  eq models_list "$(jget "[m['id'] for m in j['items']] == ['$MID'] and 'layers' not in j['items'][0]")" "True"
wait_state "$CID2" succeeded 120 && ok || bad "second campaign did not finish"

# deleting: a used model is refused while a campaign runs; a finished campaign goes
req delete_running_campaign_first 204 -X DELETE "$URL/v1/campaigns/$CID2"
req delete_again 404 -X DELETE "$URL/v1/campaigns/$CID2"

# observability and the contract
req metrics 200 "$URL/metrics"
body_has metrics_trials 'bitflip_trials_total{outcome="masked"}'
body_has metrics_states 'bitflip_campaigns{state="succeeded"}'
body_has metrics_http 'bitflip_http_requests_total{route="/v1/campaigns",code="202"}'
body_has metrics_build 'bitflip_build_info{'
body_has metrics_hist 'bitflip_trial_duration_seconds_bucket{le="+Inf"}'
req openapi 200 "$URL/v1/openapi.yaml";  body_has openapi "openapi: 3"

req delete_model 204 -X DELETE "$URL/v1/models/$MID"
req model_gone 404 "$URL/v1/models/$MID";  is_problem model_gone 404

stop_daemon TERM
eq clean_exit "$STOP_RC" 0
grep -q "POST /v1/campaigns 202" "$tmp/daemon.log" && ok || bad "no request log line for the submit"
finish
