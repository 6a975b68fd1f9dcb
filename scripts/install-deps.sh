#!/usr/bin/env bash
# Installs the Debian packages bitflip needs, only those missing: as root
# directly, otherwise through sudo, otherwise prints the exact apt-get line and
# fails. The same script runs on developer machines, in CI and in the Dockerfile.
#   scripts/install-deps.sh          build + test dependencies
#   scripts/install-deps.sh --bench  also PyTorch and friends (and wrk), for bench/ and fixtures
set -euo pipefail

pkgs=(build-essential cmake pkg-config protobuf-c-compiler libprotobuf-c-dev libonnx-dev
      libjansson-dev libcmocka-dev libmicrohttpd-dev libuv1-dev
      libsqlite3-dev libcurl4-openssl-dev curl
      libssl-dev openssl    # libcrypto (SHA-256, constant-time compares); the CLI makes test certificates
      python3-jsonschema    # checks api/campaign.schema.json against the C validator
      python3-yaml          # reads api/openapi.yaml in tests/integration/openapi_check.py
      python3-numpy         # the numpy references of fixed point and error maps (tests/conformance/stutz_check.py)
      libxml2-utils)        # xmllint: the JUnit XML against tests/api/junit-10.xsd
if [ "${1:-}" = "--bench" ]; then
  pkgs+=(python3-torch python3-onnx python3-sklearn python3-numpy
        python3-matplotlib    # the figures of docs/study/stutz.md (make study-stutz)
        libopenblas0-pthread   # the BLAS Debian's PyTorch calls: without it, the reference
                               # libblas3 (7x slower on the digits MLP), an unfair baseline
        wrk)   # HTTP load for bench/daemon_bench.py
  # ONNX Runtime comes from npm: any node and npm will do (this machine's may
  # not be Debian's, and Debian's npm would then conflict with it)
  command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
  command -v npm >/dev/null 2>&1 || pkgs+=(npm)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  SUDO=
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO=sudo
else
  echo "install-deps: missing packages and no root or passwordless sudo. Run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
