#!/usr/bin/env bash
# Lints api/openapi.yaml with Redocly's CLI, pinned by tests/api/package.json
# and package-lock.json, with tests/api/redocly.yaml (warnings are errors).
#   redocly_lint.sh SOURCE_DIR WORK_DIR
# The CLI is installed from the npm registry into WORK_DIR (a build folder,
# never the source tree) when it is missing or the lock file has changed.
# Exit 0 clean, 1 problems (or the install failed), 77 (ctest SKIP) when node
# or npm is not installed, or node is too old for the CLI.
set -uo pipefail
src=${1:?usage: redocly_lint.sh SOURCE_DIR WORK_DIR}
work=${2:?usage: redocly_lint.sh SOURCE_DIR WORK_DIR}

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "redocly_lint: SKIP: $tool is not installed, so api/openapi.yaml is not linted with Redocly" \
         "(the YAML and the routes are still checked by openapi_contract)"
    exit 77
  fi
done

# @redocly/cli 2.x runs on node 20.19 or later (its package.json's engines)
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; then
  echo "redocly_lint: SKIP: node $(node --version) is older than the 20.19 that @redocly/cli needs," \
       "so api/openapi.yaml is not linted with Redocly (the YAML and the routes are still checked by openapi_contract)"
  exit 77
fi

mkdir -p "$work" || exit 1
bin=$work/node_modules/.bin/redocly
if [ ! -x "$bin" ] || ! cmp -s "$src/tests/api/package-lock.json" "$work/package-lock.json"; then
  cp "$src/tests/api/package.json" "$src/tests/api/package-lock.json" "$work/" || exit 1
  echo "redocly_lint: installing @redocly/cli into $work (npm ci)"
  if ! (cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
    echo "redocly_lint: FAIL: npm ci could not install @redocly/cli from the npm registry" >&2
    exit 1
  fi
fi

# no usage reports sent, no update notices
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
cd "$src" || exit 1
"$bin" lint --config tests/api/redocly.yaml api/openapi.yaml
rc=$?
[ $rc -eq 0 ] || echo "redocly_lint: FAIL: redocly lint api/openapi.yaml exited $rc" >&2
exit $rc
