#!/usr/bin/env bash
# ONNX Runtime as a second reference for the quantized fixtures (ctest ort_quant):
# installs onnxruntime-node, pinned by bench/package.json and package-lock.json,
# into WORK_DIR (a build folder, never the source tree) when it is missing or the
# lock file changed, then runs tests/conformance/ort_quant.js with it.
#   ort_quant.sh SOURCE_DIR WORK_DIR
# Exit 0 all match, 1 a mismatch (or the install failed), 77 (ctest SKIP) when
# node or npm is not installed.
set -uo pipefail
src=${1:?usage: ort_quant.sh SOURCE_DIR WORK_DIR}
work=${2:?usage: ort_quant.sh SOURCE_DIR WORK_DIR}

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "ort_quant: SKIP: $tool is not installed, so the quantized fixtures are not checked against" \
         "ONNX Runtime (conformance_quant still checks bitflip against the numpy references)"
    exit 77
  fi
done
mkdir -p "$work" || exit 1
if [ ! -d "$work/node_modules/onnxruntime-node" ] || ! cmp -s "$src/bench/package-lock.json" "$work/package-lock.json"; then
  cp "$src/bench/package.json" "$src/bench/package-lock.json" "$work/" || exit 1
  echo "ort_quant: installing onnxruntime-node into $work (npm ci; --ignore-scripts: no GPU providers)"
  if ! (cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
    echo "ort_quant: FAIL: npm ci could not install onnxruntime-node from the npm registry" >&2
    exit 1
  fi
fi
BF_ORT_MODULES=$work/node_modules exec node "$src/tests/conformance/ort_quant.js" "$src/tests/fixtures"
