#!/usr/bin/env bash
# Runs each libFuzzer target of BUILD_DIR for SECONDS, from its seed corpus
# (tests/fuzz/corpus/TARGET, read only: new inputs go to BUILD_DIR/corpus),
# and prints "TARGET: N executions, no crash" from libFuzzer's final stats;
# a crash prints its input's path (add it to the corpus: it becomes a
# regression test) and makes the script fail.
# FUZZ_JOBS targets run at once (default 1; `make fuzz-smoke` runs one per core,
# each still for SECONDS, so the smoke run takes SECONDS x targets / cores).
# The summary lines come out in the order the targets were given. Each runs
# under `nice -n FUZZ_NICE` (default 19: the machine is shared).
# usage: tests/fuzz/run.sh BUILD_DIR SECONDS TARGET...
set -u
build=$1 seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
jobs=${FUZZ_JOBS:-1}
# one target: its summary into $build/$t.result, its exit status 0 or 1
fuzz_one() {
  local t=$1
  local bin=$build/$t
  if [ ! -x "$bin" ]; then echo "$t: not built ($bin)"; return 1; fi
  local work=$build/corpus/$t crashes=$build/crashes/$t
  mkdir -p "$work" "$crashes"
  local dict=() flags=() seeds=()
  [ -f "$here/$t.dict" ] && dict=(-dict="$here/$t.dict")
  [ "$t" = fuzz_spec_kv ] && dict=(-dict="$here/fuzz_spec.dict")   # fuzz_spec.c on another fixture
  # a target's own libFuzzer flags, one line (fuzz_http: its daemon's log off)
  [ -f "$here/$t.flags" ] && read -r -a flags <"$here/$t.flags"
  # fuzz_onnx also starts from every op case and real architecture (read only)
  [ "$t" = fuzz_onnx ] && seeds=("$here/../fixtures/ops" "$here/../fixtures/real" "$here/../fixtures/quant")
  local log=$build/$t.log
  BF_FUZZ_FIXTURES=$here/../fixtures nice -n "${FUZZ_NICE:-19}" "$bin" -max_total_time="$seconds" -print_final_stats=1 \
    -rss_limit_mb=2048 -timeout=20 -max_len=262144 -artifact_prefix="$crashes/" "${dict[@]}" "${flags[@]}" \
    "$work" "$here/corpus/$t" "${seeds[@]}" >"$log" 2>&1
  local rc=$?
  local execs
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ "$rc" -eq 0 ]; then
    echo "$t: ${execs:-?} executions, no crash"
  else
    local art
    art=$(sed -n 's/.*Test unit written to //p' "$log" | tail -1)
    echo "$t: CRASH after ${execs:-?} executions: ${art:-see $log}"
    grep -m1 -E "ERROR: |SUMMARY: " "$log" | sed 's/^/    /'
    return 1
  fi
}
mkdir -p "$build"
running=0
for t in "$@"; do
  # the status goes into the result file's last line; at most $jobs at once
  ( fuzz_one "$t"; echo "status $?" ) >"$build/$t.result" 2>&1 &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
done
wait
status=0
for t in "$@"; do
  sed '$d' "$build/$t.result"
  [ "$(tail -1 "$build/$t.result")" = "status 0" ] || status=1
done
exit $status
