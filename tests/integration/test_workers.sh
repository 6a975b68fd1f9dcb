#!/usr/bin/env bash
# Isolation: whatever an upload or a campaign does to the engine costs that
# upload or campaign, never the daemon. A 10,000-deep nested If (refused on
# the wire), a 300-byte model that asks for 4 GiB under a 1 GiB job memory
# limit (refused at submission; failed in its worker when the limit drops
# under it after it was queued), workers killed by SIGSEGV mid-chunk (once: retried, same
# result; twice: the campaign fails, with the reason), and the daemon itself
# killed twice under a campaign (failed at the next start, never replayed; a
# SIGTERM between does not count).
# usage: test_workers.sh BITFLIPD BITFLIP FIXTURES_DIR
set -u
BFD=$1 BF=$2 FIX=$3
. "$(dirname "$0")/lib.sh"
OCT=(-H 'Content-Type: application/octet-stream')
JSON=(-H 'Content-Type: application/json')

alive() {  # alive NAME: the process is there and ready
  if kill -0 "$PID" 2>/dev/null && curl -fsS -o /dev/null "$URL/v2/health/ready"; then ok; else bad "$1: the daemon is gone"; fi
}
campaign() { curl -fsS "$URL/v1/campaigns/$1" >"$tmp/body"; }
spec() {   # spec MODEL_ID DATASET_ID TRIALS SEED > file: the CLI's digits spec
  $PY - "$FIX/specs/digits_weights.json" "$@" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1])); s["model"] = sys.argv[2]; s["dataset"] = sys.argv[3]
s["trials"] = int(sys.argv[4]); s["seed"] = int(sys.argv[5])
print(json.dumps(s))
PYEOF
}
upload_digits() {
  req upload_model 201 "${OCT[@]}" --data-binary @"$FIX/conformance/demo_digits.onnx" "$URL/v1/models"
  MID=$(jget "j['id']")
  req upload_dataset 201 "${OCT[@]}" --data-binary @"$FIX/conformance/demo_digits.eval.safetensors" "$URL/v1/datasets"
  DID=$(jget "j['id']")
}
# the worker running chunks: the daemon's only child when --workers 1 and no upload is being checked
worker_pid() { pgrep -P "$PID" | head -1; }
wait_running() {  # wait_running ID MIN_DONE
  for _ in $(seq 1 3000); do
    read -r st done < <(progress "$1")
    [ "$st" = running ] && [ "$done" -ge "$2" ] && return 0
    sleep 0.01
  done
  return 1
}

# deep.onnx (If nested 10,000 deep), bomb.onnx and bomb.eval.safetensors
$PY "$(dirname "$0")/../fixtures/make_hostile.py" "$tmp" || { echo "FAIL making the hostile files"; exit 1; }

# --- (a) a nested If 10,000 deep: a 422 naming the depth, never a reset --------
start_daemon "$tmp/a" || exit 1
code=$(curl -sS -o "$tmp/body" -w '%{http_code}' "${OCT[@]}" --data-binary @"$tmp/deep.onnx" "$URL/v1/models" 2>"$tmp/curl_err")
eq nested_status "$code" 422
[ "$code" = 422 ] || cat "$tmp/curl_err"
# core refuses it on the wire, before protobuf-c recurses (docs/LIMITS.md, max_graph_depth)
body_has nested_why "nested more than 64 deep"
alive nested_alive
upload_digits   # and it keeps serving
stop_daemon TERM
eq nested_clean_exit "$STOP_RC" 0

# --- (b) a memory bomb: refused at submission over --job-memory ----------------
start_daemon "$tmp/b" --job-memory 1G || exit 1
req bomb_model 201 "${OCT[@]}" --data-binary @"$tmp/bomb.onnx" "$URL/v1/models"
BMID=$(jget "j['id']")
req bomb_dataset 201 "${OCT[@]}" --data-binary @"$tmp/bomb.eval.safetensors" "$URL/v1/datasets"
BDID=$(jget "j['id']")
spec "$BMID" "$BDID" 40 1 >"$tmp/bomb.json"
# the plan's peak, from shapes, before anything is allocated: 32768 x 32768 floats
req bomb_refused 422 "${JSON[@]}" --data-binary @"$tmp/bomb.json" "$URL/v1/campaigns"
eq bomb_type "$(jget "j['type']")" "urn:bitflip:problem:job-memory"
body_has bomb_op "node 'ConstantOfShape_0' ConstantOfShape"
body_has bomb_bytes "the plan needs 4.0 GiB"
body_has bomb_limit "over the 1.0 GiB job memory limit"
curl -fsS "$URL/v1/campaigns" >"$tmp/body"
eq bomb_nothing_queued "$(jget "len(j['items'])")" 0
# the CLI: the same sentence, exit 3 (a limit of the service, not a bad spec)
$PY - "$tmp/bomb.json" "$tmp/bomb.onnx" "$tmp/bomb.eval.safetensors" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1])); s["model"] = sys.argv[2]; s["dataset"] = sys.argv[3]
json.dump(s, open(sys.argv[1] + ".files.json", "w"))
PYEOF
"$BF" run --server "$URL" "$tmp/bomb.json.files.json" >/dev/null 2>"$tmp/cli_err"
eq bomb_cli_exit "$?" 3
grep -qF "over the 1.0 GiB job memory limit" "$tmp/cli_err" && ok || { bad "bomb_cli: no limit sentence"; cat "$tmp/cli_err"; }
alive bomb_alive
stop_daemon TERM

# --- (b2) ... and when a worker runs out of memory anyway, the campaign fails ---
# The estimate is what submission checks; a worker's own limit (RLIMIT_AS) is
# what holds at run time. They part when the limit is lowered under a queued
# campaign: accepted under 12G (two 4 GiB plans: the golden pass's and a
# worker's), run after a restart under 1G.
start_daemon "$tmp/b2" --workers 1 --job-memory 12G || exit 1
upload_digits
req b2_bomb_model 201 "${OCT[@]}" --data-binary @"$tmp/bomb.onnx" "$URL/v1/models"
req b2_bomb_dataset 201 "${OCT[@]}" --data-binary @"$tmp/bomb.eval.safetensors" "$URL/v1/datasets"
spec "$MID" "$DID" 500000 3 >"$tmp/long.json"
req b2_long 202 "${JSON[@]}" --data-binary @"$tmp/long.json" "$URL/v1/campaigns"
CL=$(jget "j['id']")
wait_running "$CL" 1 || bad "b2: the long campaign never ran"
req b2_bomb_submit 202 "${JSON[@]}" --data-binary @"$tmp/bomb.json" "$URL/v1/campaigns"
CB=$(jget "j['id']")
campaign "$CB"
eq b2_bomb_waits "$(jget "j['state']")" queued   # the tenant's started campaign goes first
stop_daemon TERM
start_daemon "$tmp/b2" --workers 1 --job-memory 1G || exit 1
req b2_cancel_long 202 -X POST "$URL/v1/campaigns/$CL/cancel"
wait_state "$CB" failed 120 && ok || bad "the memory bomb's campaign did not fail"
campaign "$CB"
body_has bomb_reason "job memory limit"
body_has bomb_limit_1g "1.0 GiB"
alive bomb_alive_run
req bomb_ready 200 "$URL/v2/health/ready"
stop_daemon TERM
logged=$(wc -l <"$tmp/daemon.log")   # the queued bomb was resumed at the restart above; not again
start_daemon "$tmp/b2" --workers 1 --job-memory 1G || exit 1
campaign "$CB"
eq bomb_stays_failed "$(jget "j['state']")" "failed"
tail -n +"$((logged + 1))" "$tmp/daemon.log" | grep -q "campaign $CB resumes" && bad "the failed bomb campaign was resumed" || ok
alive bomb_alive_after_restart
stop_daemon TERM

# --- (c) workers killed by SIGSEGV mid-chunk -----------------------------------
start_daemon "$tmp/c" --workers 1 || exit 1
upload_digits
# 6000 trials, the worker killed past 500; under the sanitizers (BF_SANITIZED,
# tests/CMakeLists.txt) 3000: the same kill mid-campaign and comparison with
# the uninterrupted run, with half the trials run twice at ASan's speed
segv_trials=6000
[ -n "${BF_SANITIZED:-}" ] && segv_trials=3000
spec "$MID" "$DID" "$segv_trials" 5 >"$tmp/segv.json"
$PY - "$tmp/segv.json" "$FIX/conformance" <<'PYEOF'
import json, sys, os
s = json.load(open(sys.argv[1]))
s["model"] = os.path.join(sys.argv[2], "demo_digits.onnx"); s["dataset"] = os.path.join(sys.argv[2], "demo_digits.eval.safetensors")
json.dump(s, open(sys.argv[1] + ".local.json", "w"))
PYEOF
"$BF" run --local "$tmp/segv.json.local.json" --format csv >"$tmp/segv_local.csv" 2>/dev/null
# once: the chunk runs again on a new worker; the result is the uninterrupted one
req segv_submit 202 "${JSON[@]}" --data-binary @"$tmp/segv.json" "$URL/v1/campaigns"
CS=$(jget "j['id']")
wait_running "$CS" 500 && ok || bad "segv campaign never got going"
W1=$(worker_pid)
kill -SEGV "$W1"
wait_state "$CS" succeeded 300 && ok || bad "the campaign did not survive one worker crash"
grep -q "campaign $CS: chunk [0-9]*: worker killed by SIGSEGV (death 1" "$tmp/daemon.log" && ok || bad "no worker death recorded for $CS"
req segv_results 200 "$URL/v1/campaigns/$CS/results?format=csv"
if cmp -s "$tmp/segv_local.csv" "$tmp/body"; then ok; else bad "after a worker crash the result differs from an uninterrupted run"; diff "$tmp/segv_local.csv" "$tmp/body" | head; fi
# twice: the campaign fails, with the reason, and the daemon carries on
spec "$MID" "$DID" 10000000 6 >"$tmp/segv2.json"
req segv2_submit 202 "${JSON[@]}" --data-binary @"$tmp/segv2.json" "$URL/v1/campaigns"
C2=$(jget "j['id']")
wait_running "$C2" 100 && ok || bad "second segv campaign never got going"
W1=$(worker_pid)
kill -SEGV "$W1"
# the replacement worker picks the chunk up again
for _ in $(seq 1 300); do
  W2=$(worker_pid)
  [ -n "$W2" ] && [ "$W2" != "$W1" ] && grep -q "campaign $C2: chunk [0-9]*: worker killed by SIGSEGV (death 1" "$tmp/daemon.log" && break
  sleep 0.05
done
D0=$(progress "$C2" | cut -d' ' -f2)
for _ in $(seq 1 600); do
  [ "$(progress "$C2" | cut -d' ' -f2)" -gt "$D0" ] && break
  sleep 0.05
done
kill -SEGV "$W2"
wait_state "$C2" failed 60 && ok || bad "a campaign whose workers died twice did not fail"
campaign "$C2"
body_has segv2_reason "killed by SIGSEGV"
body_has segv2_twice "crashed twice"
alive segv_alive
req segv_metrics 200 "$URL/metrics"
$PY -c "import sys; v=[l for l in open('$tmp/body') if l.startswith('bitflip_worker_deaths_total ')]; sys.exit(0 if v and int(v[0].split()[1]) >= 3 else 1)" \
  && ok || bad "bitflip_worker_deaths_total does not count the 3 deaths"
# a campaign after all that runs normally on the fresh worker
spec "$MID" "$DID" 240 7 >"$tmp/after.json"
req after_submit 202 "${JSON[@]}" --data-binary @"$tmp/after.json" "$URL/v1/campaigns"
CA=$(jget "j['id']")
wait_state "$CA" succeeded 120 && ok || bad "a campaign after the crashes did not succeed"
stop_daemon TERM

# --- (d) the daemon itself dies twice under a campaign: failed, not replayed ----
start_daemon "$tmp/d" || exit 1
upload_digits
spec "$MID" "$DID" 10000000 8 >"$tmp/poison.json"
req poison_submit 202 "${JSON[@]}" --data-binary @"$tmp/poison.json" "$URL/v1/campaigns"
CP=$(jget "j['id']")
wait_running "$CP" 100 && ok || bad "poison campaign never got going"
# a clean stop is no death: were it one, the first kill -9 below would be the second
stop_daemon TERM
eq poison_term_exit "$STOP_RC" 0
start_daemon "$tmp/d" || exit 1
wait_running "$CP" 1 && ok || bad "poison campaign did not resume after SIGTERM"
kill -9 "$PID"; wait "$PID" 2>/dev/null
: >"$tmp/daemon.log"
start_daemon "$tmp/d" || exit 1
grep -q "campaign $CP resumes" "$tmp/daemon.log" && ok || bad "one daemon death should resume the campaign"
wait_running "$CP" 1 && ok || bad "resumed poison campaign never got going"
kill -9 "$PID"; wait "$PID" 2>/dev/null
: >"$tmp/daemon.log"
start_daemon "$tmp/d" || exit 1
campaign "$CP"
eq poison_failed "$(jget "j['state']")" "failed"
body_has poison_reason "the daemon died while chunks of this campaign ran"
grep -q "campaign $CP resumes" "$tmp/daemon.log" && bad "a campaign the daemon died under twice was resumed" || ok
alive poison_alive
stop_daemon TERM
eq poison_clean_exit "$STOP_RC" 0
finish
