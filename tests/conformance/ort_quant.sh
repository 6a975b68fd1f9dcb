#!/usr/bin/env bash
# ONNX Runtime as a second reference for the quantized fixtures (ctest ort_quant):
# installs onnxruntime-node, pinned by bench/package.json and package-lock.json,
# into WORK_DIR (a build folder, never the source tree) when it is missing or the
# lock file changed, then runs tests/conformance/ort_quant.js with it.
#   ort_quant.sh SOURCE_DIR WORK_DIR [haswell]
# With `haswell`, ONNX Runtime runs under qemu-user emulating a Haswell: a CPU
# with AVX2 and no AVX-512 or VNNI, whose integer kernels are not all exact
# (ort_probe.js), so that every machine checks that this test holds on such a
# CPU too: the probes must find ONNX Runtime 1.30's u8 x s8 MatMulInteger
# inexact there (proof that a probe can fail) and the comparison must pass.
# Only the cases whose bytes differ from those ONNX Runtime last verified in this
# mode (tests/conformance/ort_verified.json; ort_quant.js's head comment says
# what is hashed) are run; when none differ, nothing is installed or run.
# BF_ORT_RECORD=1 (make test-references) runs every case and, when all agree,
# writes the mode's record.
# Exit 0 all match, 1 a mismatch (or the install failed), 77 (ctest SKIP) when
# node or npm (or, for haswell, qemu-x86_64) is not installed and a case is to run.
set -uo pipefail
src=${1:?usage: ort_quant.sh SOURCE_DIR WORK_DIR [haswell]}
work=${2:?usage: ort_quant.sh SOURCE_DIR WORK_DIR [haswell]}
cpu=${3:-}
mode=${cpu:-native}
record=$src/tests/conformance/ort_verified.json
skip_without() {   # skip_without TOOL WHY
  command -v "$1" >/dev/null 2>&1 && return 0
  echo "ort_quant: SKIP: $1 is not installed, so $2"
  exit 77
}
skip_without node "the quantized fixtures are not checked against ONNX Runtime (conformance_quant still checks" \
                  "bitflip against the numpy references)"
export BF_ORT_MODE=$mode
unset BF_ORT_ONLY
recording=${BF_ORT_RECORD:-}
if [ -n "$recording" ]; then
  # ort_quant.js writes a copy, put in place only when every check below passed
  mkdir -p "$work" || exit 1
  cp "$record" "$work/ort_verified.json" 2>/dev/null || rm -f "$work/ort_verified.json"
  export BF_ORT_RECORD=$work/ort_verified.json
else
  stale=$(node "$src/tests/conformance/ort_quant.js" --stale "$src/tests/fixtures" "$record" "$mode") || exit 1
  [ -z "$stale" ] && exit 0   # every case verified as it is (ort_quant.js said so on stderr)
  export BF_ORT_ONLY=$stale
fi
if [ -n "$cpu" ]; then
  skip_without qemu-x86_64 "ONNX Runtime was not run on an emulated AVX2-only CPU (ort_quant still runs on" \
                           "this machine's own CPU; Debian's qemu-user installs it)"
fi
skip_without npm "the quantized fixtures are not checked against ONNX Runtime (conformance_quant still checks" \
                 "bitflip against the numpy references)"
mkdir -p "$work" || exit 1
# one install for both tests (ctest runs ort_quant_avx2 after ort_quant), and
# never two npm ci at once into it
exec 9>"$work.lock" && flock 9
if [ ! -d "$work/node_modules/onnxruntime-node" ] || ! cmp -s "$src/bench/package-lock.json" "$work/package-lock.json"; then
  cp "$src/bench/package.json" "$src/bench/package-lock.json" "$work/" || exit 1
  echo "ort_quant: installing onnxruntime-node into $work (npm ci; --ignore-scripts: no GPU providers)"
  if ! (cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
    echo "ort_quant: FAIL: npm ci could not install onnxruntime-node from the npm registry" >&2
    exit 1
  fi
fi
exec 9>&-
export BF_ORT_MODULES=$work/node_modules
# the record's copy, put in place after a run with every check passed (BF_ORT_RECORD)
keep_record() {
  [ -n "$recording" ] && [ "$1" -eq 0 ] && cp "$work/ort_verified.json" "$record" && echo "ort_quant: wrote $record ($mode)"
  return 0
}
if [ -z "$cpu" ]; then
  node "$src/tests/conformance/ort_quant.js" "$src/tests/fixtures"
  status=$?
  keep_record "$status"
  exit "$status"
fi
# qemu warns about host-only CPUID features it does not emulate: not ours to show
log=$work/haswell.log
qemu-x86_64 -cpu Haswell "$(command -v node)" "$src/tests/conformance/ort_quant.js" "$src/tests/fixtures" 2>&1 \
  | grep -v "TCG doesn't support requested feature" > "$log"
status=${PIPESTATUS[0]}
cat "$log"
if ! grep -q '^probe MatMulInteger u8xs8: INEXACT' "$log"; then
  echo "ort_quant: FAIL: on the emulated Haswell the probes found ONNX Runtime's u8 x s8 MatMulInteger exact;" \
       "ONNX Runtime 1.30 sums its products in saturating int16 pairs there, so either the probe cannot fail" \
       "or bench/package-lock.json now pins another ONNX Runtime (then re-check ort_probe.js's premise)" >&2
  exit 1
fi
echo "ort_quant: on an emulated AVX2-only CPU (qemu -cpu Haswell): exit $status"
keep_record "$status"
exit "$status"
