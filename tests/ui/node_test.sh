#!/usr/bin/env bash
# Runs a node test script (ctest ui_sse), or SKIPs (exit 77) saying why when
# node is not installed.   node_test.sh SCRIPT.js ARGS...
if ! command -v node >/dev/null 2>&1; then
  echo "$(basename "$1"): SKIP: node is not installed (scripts/install-deps.sh installs it)"
  exit 77
fi
exec node "$@"
