#!/usr/bin/env bash
# bitflipd's web page in headless Chromium (ctest ui_browser, make test-ui):
# installs playwright-core, pinned by tests/ui/package.json and package-lock.json,
# into WORK_DIR (a build folder, never the source tree) when it is missing or
# the lock file changed; starts a real bitflipd on loopback with two tenants'
# tokens; runs tests/ui/ui_test.js against it with Debian's chromium.
#   ui_test.sh SOURCE_DIR WORK_DIR BITFLIPD [TRIALS]
# TRIALS (default 60000): the watched campaign's size, enough for its progress
# bar to move several times on the fixture model.
# Screenshots go to WORK_DIR/artifacts. Exit 0 pass, 1 fail, 77 (ctest SKIP)
# when chromium, node or npm is not installed (scripts/install-deps.sh installs
# chromium; BF_CHROMIUM names another binary).
set -uo pipefail
src=${1:?usage: ui_test.sh SOURCE_DIR WORK_DIR BITFLIPD}
work=${2:?usage: ui_test.sh SOURCE_DIR WORK_DIR BITFLIPD}
mkdir -p "$work" && work=$(cd "$work" && pwd) || exit 1
bfd=${3:?usage: ui_test.sh SOURCE_DIR WORK_DIR BITFLIPD}
trials=${4:-60000}
chromium=${BF_CHROMIUM:-/usr/bin/chromium}

if [ ! -x "$chromium" ]; then
  echo "ui_browser: SKIP: no chromium at $chromium, so the web page is not tested in a browser" \
       "(scripts/install-deps.sh installs Debian's chromium; BF_CHROMIUM=PATH names another)"
  exit 77
fi
for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "ui_browser: SKIP: $tool is not installed, so playwright-core cannot drive chromium"
    exit 77
  fi
done
mkdir -p "$work" || exit 1
if [ ! -d "$work/node_modules/playwright-core" ] || ! cmp -s "$src/tests/ui/package-lock.json" "$work/package-lock.json"; then
  cp "$src/tests/ui/package.json" "$src/tests/ui/package-lock.json" "$work/" || exit 1
  echo "ui_browser: installing playwright-core into $work (npm ci --ignore-scripts: no browser download)"
  if ! (cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
    echo "ui_browser: FAIL: npm ci could not install playwright-core from the npm registry" >&2
    exit 1
  fi
fi

tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"' EXIT
tok() { echo "bft_$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"; }
A=$(tok) B=$(tok)
printf 'alice:%s\nbob:%s\n' "$A" "$B" >"$tmp/tokens"
"$bfd" --listen 127.0.0.1:0 --port-file "$tmp/port" --data-dir "$tmp/data" --workers 2 --tokens-file "$tmp/tokens" \
  >"$tmp/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do
  [ -s "$tmp/port" ] && break
  kill -0 "$pid" 2>/dev/null || { echo "ui_browser: bitflipd exited at start:"; tail -20 "$tmp/daemon.log"; exit 1; }
  sleep 0.05
done
url=http://127.0.0.1:$(cat "$tmp/port")
until curl -fsS "$url/v2/health/ready" >/dev/null 2>&1; do sleep 0.05; done

BF_UI_URL=$url BF_UI_TOKEN_A=$A BF_UI_TOKEN_B=$B BF_UI_FIXTURES=$src/tests/fixtures BF_UI_OUT=$work/artifacts \
  BF_UI_MODULES=$work/node_modules BF_UI_TRIALS=$trials BF_CHROMIUM=$chromium node "$src/tests/ui/ui_test.js"
rc=$?
[ $rc -ne 0 ] && { echo "--- daemon log (last 30 lines)"; tail -30 "$tmp/daemon.log"; }
exit $rc
