#!/usr/bin/env bash
# bitflip slurm without a cluster: its usage errors, the sbatch lines of
# --dry-run, a missing sbatch, and hostile submission records for status and
# cancel (tests/slurm/test_slurm.sh runs it on a real cluster).
# usage: test_slurm_cli.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
SP=$(realpath "$2")/specs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"
spec=$SP/digits_weights.json

check help 0 "$BF" help slurm;                                   contains help "--dependency=afterok"
check no_sub 2 "$BF" slurm frob;                                  contains no_sub "no subcommand 'frob'"
check no_shards 2 "$BF" slurm submit "$spec";                     contains no_shards "--shards N"
check zero_shards 2 "$BF" slurm submit --shards 0 "$spec";        contains zero_shards "--shards must be an integer from 1"
check bad_only 2 "$BF" slurm submit --shards 4 --only 4 "$spec";  contains bad_only "--only wants shard indexes below 4"
check bad_only2 2 "$BF" slurm submit --shards 4 --only 1-x "$spec"
check bad_prefix 2 "$BF" slurm submit --shards 4 --prefix a/b "$spec"; contains bad_prefix "without '/'"
check unknown 2 "$BF" slurm submit --shards 4 --frob "$spec";     contains unknown "unknown option '--frob'"
check no_value 2 "$BF" slurm submit "$spec" --shards;             contains no_value "--shards needs a value"
check two_specs 2 "$BF" slurm submit --shards 2 "$spec" "$spec";  contains two_specs "one spec at a time"
check no_spec 2 "$BF" slurm submit --shards 4 "$tmp/none.json";   contains no_spec "none.json"
mkdir -p "$tmp/o" && cp "$spec" "$tmp/o/c.result.json"
check overwrite 2 "$BF" slurm submit --shards 2 --dir "$tmp/o" --prefix c --dry-run "$tmp/o/c.result.json"
contains overwrite "would overwrite the spec"

# the two sbatch lines: an array of 0..N-1 (a limit of K at once), the merge held by afterok
check dry_run 0 "$BF" slurm submit --shards 4 --max-running 2 --dir "$tmp/d x" --partition gpu --account lab \
      --time 1:00:00 --cpus-per-task 2 --dry-run "$spec"
contains dry_array "--array=0-3%2"
contains dry_cpus "--cpus-per-task=2"
contains dry_part "--partition=gpu"
contains dry_acct "--account=lab"
contains dry_time "--time=1:00:00"
contains dry_dep "--dependency=afterok:DRYRUN_ARRAY --kill-on-invalid-dep=yes"
contains dry_shard '--shard "$SLURM_ARRAY_TASK_ID/4"'
contains dry_quoted "'--output=$tmp/d x/digits_weights.slurm-%A_%a.log'"
[ "$(grep -c '^sbatch ' "$tmp/out")" -eq 2 ] && passes=$((passes+1)) || { echo "FAIL dry-run: not 2 sbatch lines"; fails=$((fails+1)); }
[ ! -e "$tmp/d x" ] && passes=$((passes+1)) || { echo "FAIL dry-run made the directory"; fails=$((fails+1)); }
check dry_only 0 "$BF" slurm submit --shards 8 --only 1,3-5 --dry-run "$spec";  contains dry_only "--array=1,3-5 "

# no Slurm on PATH: says where it looked, exit 3
check no_sbatch 3 env PATH=/nonexistent "$(realpath "$BF")" slurm submit --shards 2 --dir "$tmp/s" "$spec"
contains no_sbatch "cannot run sbatch"

# status and cancel read only a record that submit wrote
check status_none 2 "$BF" slurm status;                        contains status_none "usage: bitflip slurm status"
check status_missing 2 "$BF" slurm status "$tmp/none.slurm.json"
printf '{"array_job": "1", "merge_job": "2", "dir": "/x", "prefix"' >"$tmp/trunc.slurm.json"
check status_truncated 2 "$BF" slurm status "$tmp/trunc.slurm.json";  contains status_truncated "trunc.slurm.json"
printf '{"array_job": "1", "merge_job": "2", "dir": "/x", "prefix": "p", "result": "/x/p.result.json", "shards": 1e12}' >"$tmp/big.slurm.json"
check status_huge 2 "$BF" slurm status "$tmp/big.slurm.json";  contains status_huge "not a record"
printf '{"array_job": 1, "merge_job": "2", "dir": "/x", "prefix": "p", "result": "/x/p.result.json", "shards": 4}' >"$tmp/num.slurm.json"
check cancel_wrong_type 2 "$BF" slurm cancel "$tmp/num.slurm.json";  contains cancel_wrong_type "not a record"
check cancel_spec 2 "$BF" slurm cancel "$spec";  contains cancel_spec "not a record"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
