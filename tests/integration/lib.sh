# Shared by the daemon's integration tests: start the real bitflipd on an
# ephemeral loopback port with a temp data dir, talk to it with curl, check.
# Each script sets BFD, BF and FIX, then sources this: it makes the temp dir
# ($tmp, kept and named on exit when KEEP is set) and kills the daemon it
# started ($PID) on exit.
tmp=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null; [ -n "${KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"' EXIT
fails=0 passes=0
PY=/usr/bin/python3

ok() { passes=$((passes+1)); }
bad() { echo "FAIL $*"; fails=$((fails+1)); }

# start_daemon DATA_DIR [extra flags...]: sets PID, PORT, URL; log in $tmp/daemon.log
start_daemon() {
  local dir=$1; shift
  rm -f "$tmp/port"
  "$BFD" --listen 127.0.0.1:0 --port-file "$tmp/port" --data-dir "$dir" --workers 2 "$@" >>"$tmp/daemon.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 200); do
    [ -s "$tmp/port" ] && break
    kill -0 "$PID" 2>/dev/null || { echo "bitflipd exited at start:"; tail -20 "$tmp/daemon.log"; return 1; }
    sleep 0.05
  done
  PORT=$(cat "$tmp/port"); URL="http://127.0.0.1:$PORT"
  for _ in $(seq 1 100); do
    curl -fsS "$URL/v2/health/ready" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "bitflipd never became ready"; tail -20 "$tmp/daemon.log"; return 1
}

# stop_daemon [SIGNAL]: waits for exit; sets STOP_RC and STOP_SECONDS
stop_daemon() {
  local sig=${1:-TERM} t0 t1
  t0=$(date +%s.%N)
  kill -"$sig" "$PID" 2>/dev/null
  wait "$PID"; STOP_RC=$?
  t1=$(date +%s.%N)
  STOP_SECONDS=$(echo "$t1 - $t0" | bc 2>/dev/null || $PY -c "print($t1 - $t0)")
}

# req NAME WANT_STATUS CURL_ARGS... : body in $tmp/body, headers in $tmp/headers
req() {
  local name=$1 want=$2; shift 2
  local code
  code=$(curl -sS -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' "$@" 2>"$tmp/curl_err")
  if [ "$code" = "$want" ]; then ok; else
    bad "$name: HTTP $code, wanted $want"; head -c 600 "$tmp/body"; echo; cat "$tmp/curl_err"; fi
}

# jget EXPR : evaluates a Python expression on the JSON in $tmp/body (as `j`)
jget() { $PY -c "import json,sys; j=json.load(open('$tmp/body')); print($1)"; }

body_has() {  # body_has NAME TEXT
  if grep -qF -- "$2" "$tmp/body"; then ok; else bad "$1: body lacks '$2'"; head -c 600 "$tmp/body"; echo; fi
}
header_has() {
  if grep -qiF -- "$2" "$tmp/headers"; then ok; else bad "$1: headers lack '$2'"; cat "$tmp/headers"; fi
}
is_problem() {  # the last reply is application/problem+json with the status
  header_has "$1 content type" "application/problem+json"
  [ "$(jget "j['status']")" = "$2" ] && ok || bad "$1: problem status is not $2"
}
eq() {  # eq NAME GOT WANT
  if [ "$2" = "$3" ]; then ok; else bad "$1: got '$2', wanted '$3'"; fi
}

# wait_state ID STATE [SECONDS]: polls the campaign until it reaches STATE.
# The state is read by sed from the reply's top level (the daemon indents its
# JSON by two: the one "state" key at that depth), not by a Python start: that
# cost 0.085 CPU-s a poll, most of a core while a test waited on a campaign.
wait_state() {
  local id=$1 want=$2 secs=${3:-60} s
  for _ in $(seq 1 $((secs * 10))); do
    s=$(curl -fsS "${AUTH[@]}" "$URL/v1/campaigns/$id" | sed -n 's/^  "state": "\([a-z_]*\)",\{0,1\}$/\1/p')
    [ "$s" = "$want" ] && return 0
    sleep 0.1
  done
  echo "campaign $id is '$s', not '$want', after $secs s"; return 1
}

# progress ID: "STATE TRIALS_DONE" of the campaign (nothing if it cannot be
# read), by awk as wait_state reads the state: the top-level "state" and the
# "progress" object's "trials_done", the one such key at depth 4. The loops
# that wait for a campaign to get N trials in poll every 0.01 s; a Python
# start per poll (0.085 CPU-s) kept most of a core busy while they waited,
# and took it from the daemon they waited on (tests/README.md).
progress() {
  curl -fsS "${AUTH[@]}" "$URL/v1/campaigns/$1" |
    awk '/^  "state": "/ { s = $2; gsub(/[",]/, "", s) }
         /^    "trials_done": [0-9]/ && d == "" { d = $2; sub(/,$/, "", d) }
         END { if (s != "" && d != "") print s, d }'
}

finish() {
  echo "$passes passed, $fails failed"
  [ "$fails" -eq 0 ]
}
AUTH=()
