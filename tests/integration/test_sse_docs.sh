#!/usr/bin/env bash
# The event stream as docs/SERVICE.md shows it: a campaign run through
# `bitflip run --server --progress=plain` (its log lines as documented), the
# daemon restarted, and the replay of the finished campaign compared with the
# documented block event by event: the same ids, types and data (the
# abridged result by its keys).
# usage: test_sse_docs.sh BITFLIPD BITFLIP FIXTURES_DIR
set -u
BFD=$1 BF=$2 FIX=$3
. "$(dirname "$0")/lib.sh"
DOC=$(dirname "$0")/../../docs/SERVICE.md

start_daemon "$tmp/data" || exit 1
"$BF" run --server "$URL" "$FIX/specs/digits_weights.json" --progress=plain --format csv >"$tmp/result.csv" 2>"$tmp/log"
eq remote_run_rc "$?" 0
CID=$(sed -n 's/^bitflip run: campaign \([0-9a-f]*\) on .*/\1/p' "$tmp/log")
[ -n "$CID" ] && ok || { bad "no campaign id in the log"; cat "$tmp/log"; }
# the log lines, each on its own line, no carriage return
grep -qx 'bitflip run: campaign running' "$tmp/log" && ok || bad "no 'campaign running' line"
grep -qx 'bitflip run: 240/240 trials (100%)  [0-9]* trials/s  masked [0-9]*  tolerable [0-9]*  critical [0-9]*  due [0-9]*' "$tmp/log" \
  && ok || { bad "no final plain progress line"; cat "$tmp/log"; }
LC_ALL=C grep -q $'[\r\x1b]' "$tmp/log" && bad "plain progress has \\r or an escape" || ok
"$BF" run --server "$URL" "$FIX/specs/digits_weights.json" --progress=none --format csv >/dev/null 2>"$tmp/quiet"
eq remote_none_lines "$(grep -c 'trials\|campaign running' "$tmp/quiet")" 1   # the "campaign ID on URL" line only

stop_daemon TERM
start_daemon "$tmp/data" || exit 1
timeout 60 curl -sSN "$URL/v1/campaigns/$CID/events" >"$tmp/events"
$PY - "$DOC" "$tmp/events" <<'PY' && ok || bad "the replay differs from docs/SERVICE.md (above)"
import json, re, sys
doc = open(sys.argv[1]).read()
block = re.search(r"<!-- sse-replay-example[^>]*-->\s*```text\n(.*?)```", doc, re.S)
assert block, "docs/SERVICE.md has no sse-replay-example block"

def events(text):
    out, cur = [], {}
    for line in text.split("\n"):
        if not line:
            if cur: out.append(cur)
            cur = {}
        elif not line.startswith(":"):
            k, _, v = line.partition(": ")
            cur[k] = v
    if cur: out.append(cur)
    return out

want, got = events(block.group(1)), events(open(sys.argv[2]).read())
print("documented:", [(e["id"], e["event"]) for e in want])
print("sent:      ", [(e["id"], e["event"]) for e in got])
assert [(e["id"], e["event"]) for e in want] == [(e["id"], e["event"]) for e in got]
for w, g in zip(want, got):
    wd, gd = json.loads(w["data"]), json.loads(g["data"])
    if w["event"] == "result":   # abridged: its keys, in order, start the real one
        assert list(gd)[:len(wd)] == list(wd), (list(wd), list(gd))
        assert gd["bitflip"] == wd["bitflip"] or re.match(r"\d+\.\d+", gd["bitflip"]), gd["bitflip"]
    else:
        assert wd == gd, (w["event"], wd, gd)
PY
stop_daemon TERM
finish
