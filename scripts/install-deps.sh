#!/usr/bin/env bash
# Installs the Debian packages bitflip needs, only those missing: as root
# directly, otherwise through sudo, otherwise prints the exact apt-get line and
# fails. The same script runs on developer machines, in CI and in the Dockerfile.
#   scripts/install-deps.sh          what a build needs (the Dockerfile's builder uses this)
#   scripts/install-deps.sh --test   also what the tests need: PyTorch for tests/python,
#                                    chromium and node for tests/ui (make test uses this)
#   scripts/install-deps.sh --bench  also PyTorch and friends (and wrk), for bench/ and fixtures
#   scripts/install-deps.sh --slurm  only Slurm and munge on top of a build's, for the
#                                    single-node cluster of tests/slurm (make test-slurm);
#                                    --test includes them
# Options combine: --test --bench.
set -euo pipefail

pkgs=(build-essential cmake ninja-build pkg-config protobuf-c-compiler libprotobuf-c-dev libonnx-dev
      libjansson-dev libcmocka-dev libmicrohttpd-dev libuv1-dev
      libsqlite3-dev libcurl4-openssl-dev curl
      libssl-dev openssl    # libcrypto (SHA-256, constant-time compares); the CLI makes test certificates
      python3-jsonschema    # checks api/campaign.schema.json against the C validator
      python3-yaml          # reads api/openapi.yaml in tests/integration/openapi_check.py
      libxml2-utils)        # xmllint: the JUnit XML against tests/api/junit-10.xsd
# What only the tests need, on top (make test calls --test): heavier packages
# that a build, the Dockerfile's image among them, does without.
ARGS=" $* "
if [[ "$ARGS" == *" --test "* || "$ARGS" == *" --bench "* ]]; then
  # node and npm: playwright-core for tests/ui, ONNX Runtime for bench/ and the
  # npm-pinned linters; any node and npm will do (this machine's may not be
  # Debian's, and Debian's npm would then conflict with it)
  command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
  command -v npm >/dev/null 2>&1 || pkgs+=(npm)
fi
if [[ "$ARGS" == *" --test "* ]]; then
  pkgs+=(python3-venv python3-setuptools python3-wheel python3-pytest python3-pandas python3-matplotlib
         python3-torch python3-torchvision python3-numpy   # tests/python (docs/PYTHON.md)
         python3-sklearn       # study/drs/test_zoo.py: the teacher's AUC by an independent implementation; the digits of study_stutz_quick
         python3-onnx          # tests/conformance/stutz_check.py reads the CNN fixture's initializers
         chromium              # the web page's browser test (tests/ui, make test-ui), headless
         fonts-dejavu-core     # text in its screenshots (chromium recommends fonts, --no-install-recommends skips them)
         qemu-user             # ort_quant_avx2: ONNX Runtime on an emulated AVX2-only CPU (-cpu Haswell)
         clang libclang-rt-14-dev)   # libFuzzer and its runtime: make fuzz-smoke
fi
if [[ "$ARGS" == *" --test "* || "$ARGS" == *" --slurm "* ]]; then
  # the daemons only: tests/slurm/cluster.sh runs them under a temporary
  # directory (Debian's packages do not start them without systemd)
  pkgs+=(slurm-wlm munge procps)   # procps: pgrep, to check no daemon is left
fi
if [[ "$ARGS" == *" --bench "* ]]; then
  pkgs+=(python3-torch python3-onnx python3-sklearn python3-numpy
        python3-torchvision   # bench/real_bench.py, zoo_check.py: the torchvision models (make bench-real)
        python3-matplotlib    # the figures of docs/study/stutz.md (make study-stutz)
        libopenblas0-pthread   # the BLAS Debian's PyTorch calls: without it, the reference
                               # libblas3 (7x slower on the digits MLP), an unfair baseline
        wrk)   # HTTP load for bench/daemon_bench.py
fi

# one dpkg-query for all of them (make test calls this several times; one call
# per package took seconds on a busy machine)
# (dpkg-query fails when one is unknown to dpkg: the others' lines still count)
installed=" $({ dpkg-query -W -f='${Package}:${Status}\n' "${pkgs[@]}" 2>/dev/null || true; } |
  sed -n 's/^\([^:]*\):install ok installed$/\1/p' | tr '\n' ' ') "
missing=()
for p in "${pkgs[@]}"; do
  [[ "$installed" == *" $p "* ]] || missing+=("$p")
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
