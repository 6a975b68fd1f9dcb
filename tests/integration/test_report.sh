#!/usr/bin/env bash
# bitflip report on a daemon's result is the report of the same campaign
# run locally: GET /v1/campaigns/{id}/results and GET /v1/campaigns/{id}
# (the result under "result") give the same headline and the same figures as
# `bitflip run --local --out`. A daemon's document names the model by its id,
# not its path, and says how many chunks it merged: only the table of inputs
# differs, so the reports are compared figure by figure.
# usage: test_report.sh BITFLIPD BITFLIP FIXTURES_DIR
set -u
BFD=$1 BF=$2 FIX=$3
. "$(dirname "$0")/lib.sh"

start_daemon "$tmp/data" || exit 1
(cd "$FIX/specs" && "$BF" run --server "$URL" demo_campaign.json --out "$tmp/remote.json" --format json) >/dev/null 2>"$tmp/err"
eq run_server "$?" 0
(cd "$FIX/specs" && "$BF" run --local demo_campaign.json --out "$tmp/local.json" --format json) >/dev/null 2>>"$tmp/err"
eq run_local "$?" 0
req list 200 "$URL/v1/campaigns"
CID=$(jget "j['items'][0]['id'] if 'items' in j else j[0]['id']")
req results 200 "$URL/v1/campaigns/$CID/results";  cp "$tmp/body" "$tmp/daemon.json"
req campaign 200 "$URL/v1/campaigns/$CID";         cp "$tmp/body" "$tmp/campaign.json"
for f in local remote daemon campaign; do
  "$BF" report "$tmp/$f.json" --label demo -o "$tmp/$f.html" >/dev/null 2>"$tmp/err" || cat "$tmp/err"
  eq "report_$f" "$?" 0
done
$PY - "$tmp" <<'PYEOF' && ok || bad "the daemon's result reports differently from the local one"
import re, sys
t = sys.argv[1]
def parts(name):
    text = open(f"{t}/{name}.html", encoding="utf-8").read()
    head = re.search(r'<p class="headline">(.*?)</p>', text).group(1)
    return head, re.findall(r"<figure.*?</figure>", text, re.S)
local = parts("local")
assert len(local[1]) >= 3, "too few figures"
for other in ("remote", "daemon", "campaign"):
    got = parts(other)
    assert got[0] == local[0], (other, got[0], local[0])
    assert got[1] == local[1], other
PYEOF
stop_daemon
PID=
finish
