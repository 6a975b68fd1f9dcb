#!/usr/bin/env bash
# What a shared service must survive: SSE resume with Last-Event-ID, cancel
# from queued and from running, idempotent resubmission, kill -9 mid-campaign
# and SIGTERM mid-campaign (both: restart, and the campaign finishes with the
# result an uninterrupted `bitflip run --local` gives).
# usage: test_resilience.sh BITFLIPD BITFLIP FIXTURES_DIR
set -u
BFD=$1 BF=$2 FIX=$3
. "$(dirname "$0")/lib.sh"
OCT=(-H 'Content-Type: application/octet-stream')
JSON=(-H 'Content-Type: application/json')

start_daemon "$tmp/data" || exit 1
req upload_model 201 "${OCT[@]}" --data-binary @"$FIX/conformance/demo_digits.onnx" "$URL/v1/models"
MID=$(jget "j['id']")
req upload_dataset 201 "${OCT[@]}" --data-binary @"$FIX/conformance/demo_digits.eval.safetensors" "$URL/v1/datasets"
DID=$(jget "j['id']")
spec() {   # spec TRIALS SEED > file: the CLI's digits spec with the uploads' ids
  $PY - "$FIX/specs/digits_weights.json" "$MID" "$DID" "$1" "$2" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1])); s["model"] = sys.argv[2]; s["dataset"] = sys.argv[3]
s["trials"] = int(sys.argv[4]); s["seed"] = int(sys.argv[5])
print(json.dumps(s))
PYEOF
}
submit() {  # submit FILE -> CID
  req "submit $1" 202 "${JSON[@]}" --data-binary @"$1" "$URL/v1/campaigns"
  CID=$(jget "j['id']")
}

# --- idempotency -------------------------------------------------------------
spec 240 1 >"$tmp/small.json"
spec 240 2 >"$tmp/small2.json"
req idem_first 202 "${JSON[@]}" -H 'Idempotency-Key: build-42' --data-binary @"$tmp/small.json" "$URL/v1/campaigns"
C1=$(jget "j['id']")
req idem_replay 200 "${JSON[@]}" -H 'Idempotency-Key: build-42' --data-binary @"$tmp/small.json" "$URL/v1/campaigns"
eq idem_same_id "$(jget "j['id']")" "$C1"
header_has idem_replayed "Idempotent-Replayed: true"
req idem_other_body 422 "${JSON[@]}" -H 'Idempotency-Key: build-42' --data-binary @"$tmp/small2.json" "$URL/v1/campaigns"
is_problem idem_other_body 422
wait_state "$C1" succeeded 120 && ok || bad "idempotent campaign did not finish"

# --- Last-Event-ID -------------------------------------------------------------
curl -sSN "$URL/v1/campaigns/$C1/events" >"$tmp/ev_all"
grep '^id: ' "$tmp/ev_all" | head -1 | cut -c5- >"$tmp/first_id"
curl -sSN -H "Last-Event-ID: $(cat "$tmp/first_id")" "$URL/v1/campaigns/$C1/events" >"$tmp/ev_rest"
eq resume_skips_seen "$(grep -c '^id: ' "$tmp/ev_rest")" "$(( $(grep -c '^id: ' "$tmp/ev_all") - 1 ))"
eq resume_ends "$(grep '^event: ' "$tmp/ev_rest" | tail -1)" "event: end"
# live: read a running campaign's first events, reconnect after the last one
# seen, then cancel it: the second stream has only newer events, up to `end`
spec 10000000 3 >"$tmp/live.json"
submit "$tmp/live.json"; CL=$CID
timeout 1.5 curl -sSN "$URL/v1/campaigns/$CL/events" >"$tmp/ev_part" 2>/dev/null
LAST=$(grep '^id: ' "$tmp/ev_part" | tail -1 | cut -c5-)
timeout 60 curl -sSN -H "Last-Event-ID: $LAST" "$URL/v1/campaigns/$CL/events" >"$tmp/ev_after" &
SSE=$!
sleep 1
curl -sS -o /dev/null -X POST "$URL/v1/campaigns/$CL/cancel"
wait "$SSE" && ok || bad "the resumed stream did not end at cancel"
$PY - "$LAST" "$tmp/ev_after" <<'PYEOF' && ok || bad "live resume: events at or before Last-Event-ID were sent again"
import sys
last = int(sys.argv[1].split("-")[1])
ids = [int(l[4:].split("-")[1]) for l in open(sys.argv[2]) if l.startswith("id: ")]
assert ids and min(ids) > last and ids == sorted(ids), (last, ids)
PYEOF
eq live_resume_ends "$(grep '^event: ' "$tmp/ev_after" | tail -1)" "event: end"
eq live_resume_canceled "$(grep '^data: ' "$tmp/ev_after" | tail -1)" 'data: {"state":"canceled","verdict":null,"error":null}'

# --- cancel --------------------------------------------------------------------
spec 10000000 4 >"$tmp/huge.json"
submit "$tmp/huge.json"; CA=$CID
submit "$tmp/huge.json"; CB=$CID
submit "$tmp/huge.json"; CQ=$CID   # the tenant's third: queued behind its limit of 2 running
wait_state "$CA" running 30 && ok || bad "first huge campaign did not start"
eq third_queued "$(progress "$CQ" | cut -d' ' -f1)" "queued"
req cancel_queued 202 -X POST "$URL/v1/campaigns/$CQ/cancel"
eq cancel_queued_state "$(jget "j['state']")" "canceled"
req cancel_running 202 -X POST "$URL/v1/campaigns/$CA/cancel"
eq cancel_running_state "$(jget "j['state']")" "canceled"
req cancel_b 202 -X POST "$URL/v1/campaigns/$CB/cancel"
# then no chunk of theirs runs any more: the workers are stopped, not left to
# finish their chunks. How fast is for bench/, not a test on a shared machine
# (a second when idle; the poll allows ten).
for _ in $(seq 1 200); do
  curl -fsS "$URL/v2/health/ready" -o "$tmp/ready"
  [ "$($PY -c "import json; print(json.load(open('$tmp/ready'))['chunks_running'])")" = 0 ] && break
  sleep 0.05
done
eq cancel_stops_workers "$($PY -c "import json; print(json.load(open('$tmp/ready'))['chunks_running'])")" "0"
D1=$(progress "$CA" | cut -d' ' -f2); sleep 0.3; D2=$(progress "$CA" | cut -d' ' -f2)
eq canceled_progress_frozen "$D2" "$D1"
req cancel_again 409 -X POST "$URL/v1/campaigns/$CA/cancel";  is_problem cancel_again 409
req results_of_canceled 409 "$URL/v1/campaigns/$CA/results"
req delete_canceled 204 -X DELETE "$URL/v1/campaigns/$CA"

# --- kill -9 mid-campaign, restart, same result ---------------------------------
# 6000 trials (24 chunks of 256), killed past 1500; under the sanitizers
# (BF_SANITIZED, tests/CMakeLists.txt) 3000 (12 chunks), killed past 750: the
# same kill mid-campaign, resume from checkpoints and comparison with the
# uninterrupted run, with half the trials run three times at ASan's speed.
crash_trials=6000 crash_at=1500
[ -n "${BF_SANITIZED:-}" ] && crash_trials=3000 crash_at=750
spec "$crash_trials" 5 >"$tmp/crash.json"
$PY - "$tmp/crash.json" "$FIX/conformance" <<'PYEOF'
import json, sys, os
s = json.load(open(sys.argv[1]))
s["model"] = os.path.join(sys.argv[2], "demo_digits.onnx"); s["dataset"] = os.path.join(sys.argv[2], "demo_digits.eval.safetensors")
json.dump(s, open(sys.argv[1] + ".local.json", "w"))
PYEOF
"$BF" run --local "$tmp/crash.json.local.json" --format csv >"$tmp/crash_local.csv" 2>/dev/null
submit "$tmp/crash.json"; CK=$CID
for _ in $(seq 1 3000); do
  read -r st done < <(progress "$CK")
  [ "$st" = running ] && [ "$done" -ge "$crash_at" ] && break
  sleep 0.01
done
eq killed_mid_campaign "$st $([ "$done" -lt "$crash_trials" ] && echo mid)" "running mid"
kill -9 "$PID"; wait "$PID" 2>/dev/null
start_daemon "$tmp/data" || exit 1
grep -q "campaign $CK resumes (running, [1-9][0-9]* of $(((crash_trials + 255) / 256)) chunks done)" "$tmp/daemon.log" && ok || bad "no resume from checkpoints in the log"
wait_state "$CK" succeeded 300 && ok || bad "crashed campaign did not finish after restart"
req crash_results 200 "$URL/v1/campaigns/$CK/results?format=csv"
if cmp -s "$tmp/crash_local.csv" "$tmp/body"; then ok; else bad "after kill -9 and restart the result differs from an uninterrupted run"; diff "$tmp/crash_local.csv" "$tmp/body" | head; fi

# --- SIGTERM mid-campaign: drains within 5 s, resumes, same result ---------------
submit "$tmp/crash.json"; CT=$CID
for _ in $(seq 1 3000); do
  read -r st done < <(progress "$CT")
  [ "$st" = running ] && [ "$done" -ge "$crash_at" ] && break
  sleep 0.01
done
timeout 120 curl -sSN "$URL/v1/campaigns/$CT/events" >"$tmp/ev_term" 2>/dev/null &
SSE=$!
# the stream must be open (its first event written) before the signal: a fixed
# 0.2 s sleep lost that race on a loaded machine, and curl then failed to connect
for _ in $(seq 1 1000); do [ -s "$tmp/ev_term" ] && break; sleep 0.01; done
stop_daemon TERM
eq sigterm_exit "$STOP_RC" 0
# a hang check, not a speed check: docs/SERVICE.md says "well under 5 s" on
# an idle machine, but a wall-clock limit that tight failed under ASan on a
# loaded CI machine (5.3 s, 6.0 s); the time is printed for the log
echo "SIGTERM to exit: $STOP_SECONDS s"
$PY -c "import sys; sys.exit(0 if $STOP_SECONDS < 60 else 1)" && ok || bad "SIGTERM took $STOP_SECONDS s: the daemon hung on the way out (hang limit 60 s)"
wait "$SSE" && ok || bad "the event stream did not end cleanly at shutdown"
start_daemon "$tmp/data" || exit 1
wait_state "$CT" succeeded 300 && ok || bad "campaign did not finish after SIGTERM and restart"
req term_results 200 "$URL/v1/campaigns/$CT/results?format=csv"
if cmp -s "$tmp/crash_local.csv" "$tmp/body"; then ok; else bad "after SIGTERM and restart the result differs"; diff "$tmp/crash_local.csv" "$tmp/body" | head; fi
stop_daemon TERM
finish
