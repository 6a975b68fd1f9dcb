#!/usr/bin/env bash
# A campaign as a real Slurm array job on a single-node cluster started here
# (cluster.sh): 'bitflip slurm submit' runs 4 shards as array tasks and the
# merge as a job held by afterok, and the merged result is the unsharded local
# run's (everything but "shards", which says how it was computed; what
# 'bitflip merge' guarantees). Also: a retried task writes the same bytes,
# a failed task cancels the merge instead of leaving it pending, cancel,
# and deploy/slurm's job scripts submitted by hand with sbatch.
# Skips (77) where it cannot start the cluster: not root, or no slurm-wlm/munge.
# usage: test_slurm.sh BITFLIP FIXTURES_DIR
set -u
BF=$(realpath "$1")
SP=$(realpath "$2")/specs
here=$(cd "$(dirname "$0")" && pwd)
deploy=$here/../../deploy/slurm
tmp=$(mktemp -d /tmp/bitflip-slurm.XXXXXX)
cluster=$tmp/cluster
shared=$tmp/shared
cleanup() {
  local rc=$?
  "$here/cluster.sh" stop "$cluster" || { echo "FAIL cluster.sh stop left daemons"; rc=1; }
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT
. "$here/../cli/lib.sh"

"$here/cluster.sh" start "$cluster"
rc=$?
if [ "$rc" -eq 77 ]; then echo "slurm_cluster: SKIP: no Slurm cluster could start here (reason above)"; exit 77; fi
[ "$rc" -eq 0 ] || { echo "FAIL the cluster did not start"; exit 1; }
. "$cluster/env"
mkdir -p "$shared"

# waits for a job to leave the queue (a hang guard, not a timing assertion)
# and prints its final state as scontrol has it
job_state() {
  local s=
  for _ in $(seq 600); do
    s=$(scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n 's/^JobState=//p' | sort -u | tr '\n' ' ')
    case "$s" in *PENDING*|*RUNNING*|*COMPLETING*|*CONFIGURING*|"") sleep 0.2 ;; *) break ;; esac
  done
  echo "${s% }"
}
# same_result NAME A B: equal JSON but for "shards"; B has the trials the spec plans
same_result() {
  if /usr/bin/python3 - "$2" "$3" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for d in (a, b):
    d.pop("shards", None)
s = b["summary"]
assert s["trials"] == 240, s["trials"]                     # the spec's "trials"
assert sum(s["outcomes"].values()) == 240, s["outcomes"]   # every trial classified once
if a != b:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            print("differs at", k)
    sys.exit(1)
EOF
  then passes=$((passes+1)); else echo "FAIL $1: $3 is not the local result $2"; fails=$((fails+1)); fi
}

spec=$SP/digits_weights.json
check local 0 "$BF" run --local "$spec" --threads 1 --format json --out "$tmp/local.json"

# --- bitflip slurm submit: 4 array tasks and the merge ---
# (usage errors, --dry-run and hostile records: tests/cli/test_slurm_cli.sh)
check submit 0 "$BF" slurm submit --shards 4 --dir "$shared" "$spec"
array=$(sed -n 's/^array_job //p' "$tmp/out")
merge=$(sed -n 's/^merge_job //p' "$tmp/out")
[[ "$array" =~ ^[0-9]+$ && "$merge" =~ ^[0-9]+$ ]] && passes=$((passes+1)) ||
  { echo "FAIL submit printed no job ids"; cat "$tmp/out"; fails=$((fails+1)); }
dep=$(scontrol -o show job "$merge" | tr ' ' '\n' | sed -n 's/^Dependency=//p')
tasks=$(scontrol -o show job "$array" | grep -c "ArrayTaskId=")
st=$(job_state "$merge")
[ "$st" = COMPLETED ] && passes=$((passes+1)) || { echo "FAIL merge job $merge ended $st"; fails=$((fails+1)); }
[ "$(job_state "$array")" = COMPLETED ] && passes=$((passes+1)) || { echo "FAIL array job $array did not complete"; fails=$((fails+1)); }
# held by the array (before it ran: afterok:ID(unfulfilled), or (null) once satisfied)
case "$dep" in afterok:"$array"*|"(null)") passes=$((passes+1)) ;; *) echo "FAIL merge dependency '$dep'"; fails=$((fails+1)) ;; esac
[ "$tasks" -ge 1 ] && passes=$((passes+1)) || { echo "FAIL job $array shows no array tasks"; fails=$((fails+1)); }
for i in 0 1 2 3; do
  p=$shared/digits_weights.part-$i-of-4.json
  /usr/bin/python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['shard']; sys.exit((s['index'],s['count'])!=($i,4))" "$p" &&
    passes=$((passes+1)) || { echo "FAIL $p is not shard $i/4"; fails=$((fails+1)); }
done
same_result merged_equals_local "$tmp/local.json" "$shared/digits_weights.result.json"
check status 0 "$BF" slurm status "$shared/digits_weights.slurm.json"; contains status "parts 4/4 done"

# a retried task (only shard 2 again) writes the same bytes, and the merge is unchanged
cp "$shared/digits_weights.part-2-of-4.json" "$tmp/part2.first"
cp "$shared/digits_weights.result.json" "$tmp/merged.first"
check retry 0 "$BF" slurm submit --shards 4 --only 2 --dir "$shared" "$spec"
merge2=$(sed -n 's/^merge_job //p' "$tmp/out")
st=$(job_state "$merge2")
[ "$st" = COMPLETED ] && passes=$((passes+1)) || { echo "FAIL retry merge ended $st"; fails=$((fails+1)); }
cmp -s "$tmp/part2.first" "$shared/digits_weights.part-2-of-4.json" && passes=$((passes+1)) ||
  { echo "FAIL the retried shard 2 wrote other bytes"; fails=$((fails+1)); }
cmp -s "$tmp/merged.first" "$shared/digits_weights.result.json" && passes=$((passes+1)) ||
  { echo "FAIL the merge after the retry differs"; fails=$((fails+1)); }

# a task that fails (the model is not there): the merge is canceled, not left pending
mkdir -p "$tmp/broken"
sed 's#"../conformance/demo_digits.onnx"#"'"$tmp"'/missing.onnx"#' "$spec" >"$tmp/broken/broken.json"
cp "$SP/../conformance/demo_digits.eval.safetensors" "$tmp/"
sed -i 's#"../conformance/demo_digits.eval.safetensors"#"'"$tmp"'/demo_digits.eval.safetensors"#' "$tmp/broken/broken.json"
check submit_broken 0 "$BF" slurm submit --shards 4 --dir "$tmp/broken" "$tmp/broken/broken.json"
array=$(sed -n 's/^array_job //p' "$tmp/out")
merge=$(sed -n 's/^merge_job //p' "$tmp/out")
st=$(job_state "$merge")
[ "$st" = CANCELLED ] && passes=$((passes+1)) || { echo "FAIL the merge after failed tasks ended '$st', not CANCELLED"; fails=$((fails+1)); }
[ "$(job_state "$array")" = FAILED ] && passes=$((passes+1)) || { echo "FAIL the broken array did not end FAILED"; fails=$((fails+1)); }
grep -q "missing.onnx" "$tmp"/broken/broken.slurm-*_0.log && passes=$((passes+1)) ||
  { echo "FAIL the task log does not name the missing model"; cat "$tmp"/broken/*.log | head; fails=$((fails+1)); }
check status_broken 3 "$BF" slurm status "$tmp/broken/broken.slurm.json"
contains status_broken "missing: 0,1,2,3"
contains status_broken "not yet"

# cancel: both jobs end CANCELLED (at most 2 tasks run at once on 2 cores, so
# some are still pending; the merge always is)
mkdir -p "$tmp/cancel"
check submit_cancel 0 "$BF" slurm submit --shards 8 --dir "$tmp/cancel" "$spec"
merge=$(sed -n 's/^merge_job //p' "$tmp/out")
check cancel 0 "$BF" slurm cancel "$tmp/cancel/digits_weights.slurm.json"
st=$(job_state "$merge")
[ "$st" = CANCELLED ] && passes=$((passes+1)) || { echo "FAIL the canceled merge ended '$st'"; fails=$((fails+1)); }
[ ! -e "$tmp/cancel/digits_weights.result.json" ] && passes=$((passes+1)) || { echo "FAIL a canceled campaign has a result"; fails=$((fails+1)); }

# deploy/slurm's scripts by hand, as deploy/slurm/README.md shows them: the
# shard from the array (--shard auto), then a resubmission of one index with N
mkdir -p "$tmp/manual"
a=$(cd "$tmp/manual" && sbatch --parsable --array=0-3 --export=ALL,SPEC="$spec",DIR="$tmp/manual",BITFLIP="$BF" \
      "$deploy/campaign.sbatch")
m=$(cd "$tmp/manual" && sbatch --parsable --dependency=afterok:"$a" --kill-on-invalid-dep=yes \
      --export=ALL,DIR="$tmp/manual",PREFIX=digits_weights,BITFLIP="$BF" "$deploy/merge.sbatch")
st=$(job_state "$m")
[ "$st" = COMPLETED ] && passes=$((passes+1)) || { echo "FAIL deploy/slurm merge ended '$st'"; cat "$tmp"/manual/*.log; fails=$((fails+1)); }
same_result deploy_scripts_equal_local "$tmp/local.json" "$tmp/manual/digits_weights.result.json"
grep -q "shard 1/4 (Slurm" "$tmp"/manual/bitflip-"$a"_1.log && passes=$((passes+1)) ||
  { echo "FAIL task 1's log does not say it took shard 1/4 from Slurm"; cat "$tmp"/manual/bitflip-"$a"_1.log; fails=$((fails+1)); }
cp "$tmp/manual/digits_weights.part-3-of-4.json" "$tmp/manual3.first"
rm "$tmp/manual/digits_weights.part-3-of-4.json" "$tmp/manual/digits_weights.result.json"
a=$(cd "$tmp/manual" && sbatch --parsable --array=3 --export=ALL,SPEC="$spec",DIR="$tmp/manual",N=4,BITFLIP="$BF" \
      "$deploy/campaign.sbatch")
m=$(cd "$tmp/manual" && sbatch --parsable --dependency=afterok:"$a" --kill-on-invalid-dep=yes \
      --export=ALL,DIR="$tmp/manual",PREFIX=digits_weights,BITFLIP="$BF" "$deploy/merge.sbatch")
st=$(job_state "$m")
[ "$st" = COMPLETED ] && passes=$((passes+1)) || { echo "FAIL deploy/slurm re-merge ended '$st'"; fails=$((fails+1)); }
cmp -s "$tmp/manual3.first" "$tmp/manual/digits_weights.part-3-of-4.json" && passes=$((passes+1)) ||
  { echo "FAIL shard 3 run again by hand wrote other bytes"; fails=$((fails+1)); }
same_result deploy_rerun_equal_local "$tmp/local.json" "$tmp/manual/digits_weights.result.json"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
