#!/usr/bin/env bash
# bitflipd --executor slurm on a real single-node Slurm cluster started here
# (cluster.sh): a campaign submitted over REST runs as a Slurm array (one task
# per chunk), its event stream shows chunks finishing, and its results equal a
# local-executor daemon's on the same uploads and spec (and the CLI's);
# cancel scancels the array; a restarted daemon re-attaches to a running
# array instead of submitting another, and the result is still the local one.
# Skips (77) where the cluster cannot start (not root, no slurm-wlm/munge).
# usage: test_daemon_slurm.sh BITFLIPD BITFLIP FIXTURES_DIR
set -u
BFD=$(realpath "$1") BF=$(realpath "$2") FIX=$(realpath "$3")
here=$(cd "$(dirname "$0")" && pwd)
# lib.sh first: it makes a $tmp of its own and sets an EXIT trap that only
# kills the daemon; sourced after ours, it replaced our trap and our $tmp,
# so the cluster was never stopped and its daemons and directory outlived
# every run (found as leftover munged/slurmctld/slurmd after CI runs)
. "$here/../integration/lib.sh"
rmdir "$tmp"
tmp=$(mktemp -d /tmp/bitflipd-slurm.XXXXXX)
cluster=$tmp/cluster
PID=
cleanup() {
  local rc=$?
  [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null
  "$here/cluster.sh" stop "$cluster" || { echo "FAIL cluster.sh stop left daemons"; rc=1; }
  [ -n "${KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT

"$here/cluster.sh" start "$cluster"
rc=$?
if [ "$rc" -eq 77 ]; then echo "slurm_daemon: SKIP: no Slurm cluster could start here (reason above)"; exit 77; fi
[ "$rc" -eq 0 ] || { echo "FAIL the cluster did not start"; exit 1; }
. "$cluster/env"

M=$FIX/conformance/demo_digits.onnx
D=$FIX/conformance/demo_digits.eval.safetensors
OCT=(-H 'Content-Type: application/octet-stream')
JSON=(-H 'Content-Type: application/json')
# a bitflip that takes 2 s longer, so cancel and restart meet a running array
printf '#!/bin/sh\nsleep 2\nexec %s "$@"\n' "$BF" >"$tmp/slow-bitflip"
chmod +x "$tmp/slow-bitflip"

# upload; SPEC_FILE TRIALS: the CLI's digits spec with the uploads' ids
upload() {
  req upload_model 201 "${OCT[@]}" --data-binary @"$M" "$URL/v1/models?name=digits"
  MID=$(jget "j['id']")
  req upload_dataset 201 "${OCT[@]}" --data-binary @"$D" "$URL/v1/datasets?name=digits-eval"
  DID=$(jget "j['id']")
}
make_spec() {
  $PY - "$FIX/specs/digits_weights.json" "$MID" "$DID" "$2" >"$1" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1])); s["model"] = sys.argv[2]; s["dataset"] = sys.argv[3]; s["trials"] = int(sys.argv[4])
print(json.dumps(s))
PYEOF
}
submit() {  # submit SPEC_FILE: sets CID
  req submit 202 "${JSON[@]}" --data-binary @"$1" "$URL/v1/campaigns"
  CID=$(jget "j['id']")
}
array_of() { cat "$tmp/data/slurm/$1/array_job" 2>/dev/null; }
# the states Slurm has for a job's tasks, sorted and unique
slurm_states() { scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n 's/^JobState=//p' | sort -u | tr '\n' ' '; }

# --- the reference: a local-executor daemon, same uploads (same ids) and spec
start_daemon "$tmp/local-data" || exit 1
upload
make_spec "$tmp/spec1024.json" 1024       # 4 chunks of 256 trials: a 4-task array
submit "$tmp/spec1024.json"
wait_state "$CID" succeeded 120 && ok || bad "local campaign did not succeed"
req local_json 200 "$URL/v1/campaigns/$CID/results"; cp "$tmp/body" "$tmp/local.json"
req local_csv 200 "$URL/v1/campaigns/$CID/results?format=csv"; cp "$tmp/body" "$tmp/local.csv"
req local_trials 200 "$URL/v1/campaigns/$CID/results?trials=true"; cp "$tmp/body" "$tmp/local_trials.jsonl"
stop_daemon TERM; PID=

# --- the same campaign on Slurm, followed on its event stream
start_daemon "$tmp/data" --executor slurm --slurm-partition debug --slurm-poll-seconds 0.2 --slurm-bitflip "$BF" \
  --limit spec.depth=32 --job-memory 3G || exit 1
upload
submit "$tmp/spec1024.json"
timeout 180 curl -sSN "$URL/v1/campaigns/$CID/events" >"$tmp/events"
$PY - "$tmp/events" <<'PYEOF' && ok || bad "event stream: see above"
import json, sys
evs = [dict(l.split(": ", 1) for l in b.split("\n") if l and not l.startswith(":"))
       for b in open(sys.argv[1]).read().split("\n\n") if b.strip() and not b.startswith(":")]
types = [e["event"] for e in evs]
assert types[0] == "state" and types[-2:] == ["result", "end"], types
states = [json.loads(e["data"])["state"] for e in evs if e["event"] == "state"]
assert states == ["queued", "running", "succeeded"], states
done = [json.loads(e["data"])["trials_done"] for e in evs if e["event"] == "progress"]
assert done == sorted(done) and done[-1] == 1024, done    # chunks of 256 as they finish
assert all(d % 256 == 0 for d in done), done
end = json.loads(evs[-1]["data"])
assert end["state"] == "succeeded", end
PYEOF
A=$(array_of "$CID")
[[ "$A" =~ ^[0-9]+$ ]] && ok || bad "no array job recorded for campaign $CID"
tasks=$(scontrol -o show job "$A" | grep -o 'ArrayTaskId=[0-9]*' | sort -u | wc -l)
eq array_tasks "$tasks" 4
eq array_completed "$(slurm_states "$A")" "COMPLETED "
# the tasks hold to the daemon's limits, as its workers do
scontrol write batch_script "$A" "$tmp/batch.sh" >/dev/null
grep -q -- "--job-memory 3221225472 --limit 'spec.depth=32'" "$tmp/batch.sh" && ok || { bad "the tasks do not get the daemon's limits"; cat "$tmp/batch.sh"; }
req slurm_json 200 "$URL/v1/campaigns/$CID/results"
cmp -s "$tmp/local.json" "$tmp/body" && ok || { bad "Slurm campaign's JSON result differs from the local daemon's"; diff <($PY -m json.tool "$tmp/local.json") <($PY -m json.tool "$tmp/body") | head; }
req slurm_csv 200 "$URL/v1/campaigns/$CID/results?format=csv"
cmp -s "$tmp/local.csv" "$tmp/body" && ok || bad "Slurm campaign's CSV differs from the local daemon's"
req slurm_trials 200 "$URL/v1/campaigns/$CID/results?trials=true"
cmp -s "$tmp/local_trials.jsonl" "$tmp/body" && ok || bad "Slurm campaign's per-trial records differ from the local daemon's"
# the trial-duration histogram holds each chunk's task time over its trials,
# as for local chunks (it used to get 1024 zeros): the sum is, by hand, the
# time each task wrote beside its part
req slurm_metrics 200 "$URL/metrics"
$PY - "$tmp/body" "$tmp/data/slurm/$CID" <<'PYEOF' && ok || bad "the trial-duration histogram does not hold the tasks' times"
import sys
lines = dict(l.rsplit(" ", 1) for l in open(sys.argv[1]) if l.startswith("bitflip_trial_duration_seconds"))
count, total = float(lines["bitflip_trial_duration_seconds_count"]), float(lines["bitflip_trial_duration_seconds_sum"])
spans = []
for i in range(4):
    t0, t1 = map(float, open(f"{sys.argv[2]}/part-{i}.time").read().split())
    spans.append(t1 - t0)
assert count == 1024, count
assert all(s > 0 for s in spans), spans
assert abs(total - sum(spans)) <= 1e-6 * sum(spans) + 1e-9, (total, spans)
# no trial under the smallest bound (10 us): a task's time includes its process's start
first = next(k for k in lines if k.startswith("bitflip_trial_duration_seconds_bucket"))
assert float(lines[first]) == 0, (first, lines[first])
PYEOF
# a profiled campaign: the tasks get the uploaded error map's blob, and the
# result is the CLI's on the same file, naming the map as the spec did
$PY -c "
import json, struct
h = json.dumps({'format': 1, 'rows': 4, 'cols': 5, 'flip': 2, 'stuck_at_0': 1, 'stuck_at_1': 1}).encode()
open('$tmp/chip.bfmap', 'wb').write(b'BFERRMAP' + struct.pack('<Q', len(h)) + h + struct.pack('<4Q', 1, 7, 12, 18))"
EID=$(sha256sum "$tmp/chip.bfmap" | cut -c1-64)
req map_upload 201 "${OCT[@]}" --data-binary @"$tmp/chip.bfmap" "$URL/v1/error-maps"
req lin_model 201 "${OCT[@]}" --data-binary @"$FIX/stutz/linear.onnx" "$URL/v1/models";  LMID=$(jget "j['id']")
req lin_dataset 201 "${OCT[@]}" --data-binary @"$FIX/stutz/linear.eval.safetensors" "$URL/v1/datasets";  LDID=$(jget "j['id']")
pspec() { echo "{\"model\": \"$2\", \"dataset\": \"$3\", \"seed\": 4, \"metrics\": [\"mse\"], \"faults\": {\"model\": \"profiled\", \"error_map\": \"$4\", \"repeats\": 600, \"representation\": \"uint4\", \"w_max\": 1.5}}" >"$1"; }
pspec "$tmp/profiled.json" "$LMID" "$LDID" "sha256:$EID"
submit "$tmp/profiled.json"
wait_state "$CID" succeeded 120 && ok || bad "the profiled Slurm campaign did not succeed"
req profiled_json 200 "$URL/v1/campaigns/$CID/results";  cp "$tmp/body" "$tmp/profiled_daemon.json"
pspec "$tmp/profiled_cli.json" "$FIX/stutz/linear.onnx" "$FIX/stutz/linear.eval.safetensors" "$tmp/chip.bfmap"
"$BF" run --local "$tmp/profiled_cli.json" --threads 1 --format json --out "$tmp/profiled_cli_out.json" >/dev/null 2>&1
$PY - "$tmp/profiled_cli_out.json" "$tmp/profiled_daemon.json" "$EID" <<'PYEOF' && ok || bad "the profiled Slurm result differs from bitflip run --local"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k in ("summary", "by_tensor", "by_bit", "by_fault_model", "golden"):
    assert a[k] == b[k], k
assert b["summary"]["trials"] == 600
assert b["campaign"]["error_map"]["path"] == "sha256:" + sys.argv[3], b["campaign"]["error_map"]
PYEOF
# and from the CLI, by hand: the same summary as 'bitflip run --local' on the spec with paths
$PY -c "import json; s=json.load(open('$FIX/specs/digits_weights.json')); s['trials']=1024; s['model']='$M'; s['dataset']='$D'; json.dump(s, open('$tmp/cli_spec.json','w'))"
"$BF" run --local "$tmp/cli_spec.json" --threads 1 --format json --out "$tmp/cli.json" >/dev/null 2>&1
$PY - "$tmp/cli.json" "$tmp/local.json" <<'PYEOF' && ok || bad "the result differs from bitflip run --local"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for k in ("summary", "by_tensor", "by_bit", "by_fault_model", "golden"):
    assert a[k] == b[k], k
assert b["summary"]["trials"] == 1024 and sum(b["summary"]["outcomes"].values()) == 1024
PYEOF
stop_daemon TERM; PID=

# --- cancel: the array is scanceled, the campaign ends canceled without a result
start_daemon "$tmp/data" --executor slurm --slurm-poll-seconds 0.2 --slurm-bitflip "$tmp/slow-bitflip" || exit 1
make_spec "$tmp/spec2048.json" 2048       # 8 chunks; 2 run at once on 2 cores, 2 s each at least
submit "$tmp/spec2048.json"
wait_state "$CID" running 60 && ok || bad "the Slurm campaign never ran"
A=$(array_of "$CID")
req cancel 202 -X POST "$URL/v1/campaigns/$CID/cancel"
wait_state "$CID" canceled 30 && ok || bad "cancel did not cancel"
for _ in $(seq 100); do case "$(slurm_states "$A")" in *PENDING*|*RUNNING*|*COMPLETING*) sleep 0.2 ;; *) break ;; esac; done
case "$(slurm_states "$A")" in *CANCELLED*) ok ;; *) bad "array $A after cancel: $(slurm_states "$A")" ;; esac
case "$(slurm_states "$A")" in *PENDING*|*RUNNING*) bad "array $A still runs after cancel" ;; *) ok ;; esac
req canceled_state 200 "$URL/v1/campaigns/$CID"
eq canceled_no_result "$(jget "j['state'], 'result' in j")" "canceled False"

# --- restart: the daemon stops while the array runs, and the next one re-attaches
submit "$tmp/spec2048.json"
wait_state "$CID" running 60 && ok || bad "the Slurm campaign never ran"
A=$(array_of "$CID")
stop_daemon TERM; PID=
case "$(slurm_states "$A")" in *PENDING*|*RUNNING*) ok ;; *) bad "the array did not outlive the daemon: $(slurm_states "$A")" ;; esac
# the store has the job: without the copy beside the parts, it still re-attaches
rm "$tmp/data/slurm/$CID/array_job"
sleep 1
start_daemon "$tmp/data" --executor slurm --slurm-poll-seconds 0.2 --slurm-bitflip "$tmp/slow-bitflip" || exit 1
grep -q "re-attaching to Slurm array job $A" "$tmp/daemon.log" && ok || bad "no re-attach to $A in the log"
wait_state "$CID" succeeded 180 && ok || bad "the re-attached campaign did not succeed"
[ ! -e "$tmp/data/slurm/$CID/array_job" ] && ok || bad "the restarted daemon submitted the campaign again"
jobs=$(squeue -h --states=all -n "bitflipd-${CID:0:12}" -o %F | sort -u | tr '\n' ' ')
eq one_array_submitted "$jobs" "$A "
req restarted_json 200 "$URL/v1/campaigns/$CID/results"
$PY - "$tmp/body" <<'PYEOF' && ok || bad "the re-attached campaign's result is not whole"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["summary"]["trials"] == 2048 and sum(r["summary"]["outcomes"].values()) == 2048, r["summary"]
PYEOF
stop_daemon TERM; PID=
# the reference for 2048 trials: the CLI (campaign names aside, as above)
$PY -c "import json; s=json.load(open('$tmp/cli_spec.json')); s['trials']=2048; json.dump(s, open('$tmp/cli_spec2.json','w'))"
"$BF" run --local "$tmp/cli_spec2.json" --threads 2 --format json --out "$tmp/cli2.json" >/dev/null 2>&1
$PY - "$tmp/cli2.json" "$tmp/body" <<'PYEOF' && ok || bad "the re-attached campaign's result differs from bitflip run --local"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for k in ("summary", "by_tensor", "by_bit", "by_fault_model", "golden"):
    assert a[k] == b[k], k
PYEOF

# --- what goes wrong says so: a task that fails, sbatch refusing, a corrupt part
printf '#!/bin/sh\necho "bitflip run: the disk is on fire" >&2\nexit 3\n' >"$tmp/failing-bitflip"
chmod +x "$tmp/failing-bitflip"
start_daemon "$tmp/data" --executor slurm --slurm-poll-seconds 0.2 --slurm-bitflip "$tmp/failing-bitflip" || exit 1
submit "$tmp/spec1024.json"
wait_state "$CID" failed 60 && ok || bad "a campaign whose tasks fail did not fail"
req failed_state 200 "$URL/v1/campaigns/$CID"
eq task_failure_named "$(jget "'ended FAILED' in j['error'] and 'the disk is on fire' in j['error']")" True
stop_daemon TERM; PID=
start_daemon "$tmp/data" --executor slurm --slurm-partition nosuch --slurm-poll-seconds 0.2 --slurm-bitflip "$BF" || exit 1
submit "$tmp/spec1024.json"
wait_state "$CID" failed 60 && ok || bad "a campaign sbatch refused did not fail"
req refused_state 200 "$URL/v1/campaigns/$CID"
eq sbatch_refusal_named "$(jget "'sbatch refused' in j['error'] and 'partition' in j['error']")" True
stop_daemon TERM; PID=
start_daemon "$tmp/data" --executor slurm --slurm-poll-seconds 0.2 --slurm-bitflip "$tmp/slow-bitflip" || exit 1
submit "$tmp/spec2048.json"
wait_state "$CID" running 60 && ok || bad "the Slurm campaign never ran"
A=$(array_of "$CID")
printf '{"summary": {"trials": 1' >"$tmp/data/slurm/$CID/part-7.json"   # truncated
wait_state "$CID" failed 30 && ok || bad "a corrupt part did not fail the campaign"
req corrupt_state 200 "$URL/v1/campaigns/$CID"
eq corrupt_part_named "$(jget "'part-7.json' in j['error'] and 'does not parse' in j['error']")" True
for _ in $(seq 100); do case "$(slurm_states "$A")" in *PENDING*|*RUNNING*|*COMPLETING*) sleep 0.2 ;; *) break ;; esac; done
case "$(slurm_states "$A")" in *PENDING*|*RUNNING*) bad "array $A still runs after its campaign failed" ;; *) ok ;; esac
stop_daemon TERM; PID=
"$BFD" --executor kubernetes --data-dir "$tmp/x" --listen 127.0.0.1:0 >"$tmp/out" 2>&1
eq bad_executor_rc $? 2
grep -q "executor must be local or slurm, got 'kubernetes'" "$tmp/out" && ok || { bad "bad --executor not named"; cat "$tmp/out"; }

finish
