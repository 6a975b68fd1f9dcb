#!/usr/bin/env bash
# Runs each libFuzzer target of BUILD_DIR for SECONDS, from its seed corpus
# (tests/fuzz/corpus/TARGET, read only: new inputs go to BUILD_DIR/corpus),
# and prints "TARGET: N executions, no crash" from libFuzzer's final stats;
# a crash prints its input's path (add it to the corpus: it becomes a
# regression test) and makes the script fail.
# usage: tests/fuzz/run.sh BUILD_DIR SECONDS TARGET...
set -u
build=$1 seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
status=0
for t in "$@"; do
  bin=$build/$t
  if [ ! -x "$bin" ]; then echo "$t: not built ($bin)"; status=1; continue; fi
  work=$build/corpus/$t crashes=$build/crashes/$t
  mkdir -p "$work" "$crashes"
  dict=() flags=()
  [ -f "$here/$t.dict" ] && dict=(-dict="$here/$t.dict")
  # a target's own libFuzzer flags, one line (fuzz_http: its daemon's log off)
  [ -f "$here/$t.flags" ] && read -r -a flags <"$here/$t.flags"
  # fuzz_onnx also starts from every op case and real architecture (read only)
  seeds=()
  [ "$t" = fuzz_onnx ] && seeds=("$here/../fixtures/ops" "$here/../fixtures/real" "$here/../fixtures/quant")
  log=$build/$t.log
  BF_FUZZ_FIXTURES=$here/../fixtures nice -n 10 "$bin" -max_total_time="$seconds" -print_final_stats=1 \
    -rss_limit_mb=2048 -timeout=20 -max_len=262144 -artifact_prefix="$crashes/" "${dict[@]}" "${flags[@]}" \
    "$work" "$here/corpus/$t" "${seeds[@]}" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ "$rc" -eq 0 ]; then
    echo "$t: ${execs:-?} executions, no crash"
  else
    art=$(sed -n 's/.*Test unit written to //p' "$log" | tail -1)
    echo "$t: CRASH after ${execs:-?} executions: ${art:-see $log}"
    grep -m1 -E "ERROR: |SUMMARY: " "$log" | sed 's/^/    /'
    status=1
  fi
done
exit $status
