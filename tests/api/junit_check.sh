#!/usr/bin/env bash
# The JUnit XML of the gates, as CI report readers take it: every report
# validates against tests/api/junit-10.xsd (xmllint) and its counts add up;
# written by bf_gates_junit for made-up gates (escaping), by `bitflip run
# --local --junit` for a gate that passes and one that fails, by the daemon for
# GET /v1/campaigns/{id}/results?format=junit, and by `bitflip run --server
# --junit`. First, the schema itself refuses a report without `errors` or a
# testcase without `time`.
# usage: junit_check.sh BITFLIPD BITFLIP JUNIT_SAMPLE FIXTURES_DIR
set -u
BFD=$1 BF=$2 SAMPLE=$3 FIX=$4
XSD=$(cd "$(dirname "$0")" && pwd)/junit-10.xsd
tmp=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../integration/lib.sh"

command -v xmllint >/dev/null 2>&1 || { echo "FAIL xmllint is not installed (libxml2-utils; scripts/install-deps.sh)"; exit 1; }

valid() {   # valid NAME FILE: the file validates against the schema
  if xmllint --noout --schema "$XSD" "$2" >"$tmp/xmllint" 2>&1; then ok; else
    bad "$1: not valid against junit-10.xsd:"; sed 's/^/    /' "$tmp/xmllint" | head -10; fi
}
invalid() {   # invalid NAME FILE: the schema refuses the file
  if xmllint --noout --schema "$XSD" "$2" >"$tmp/xmllint" 2>&1; then bad "$1: the schema accepts it"; else ok; fi
}
# facts FILE: checks what XSD cannot (each suite's counts are its testcases',
# the totals the suites' sums) and prints "tests failures errors skipped" of
# the whole report, then per testcase "name|failure message" (nothing after
# the bar when it passed)
facts() {
  $PY - "$1" <<'PYEOF'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "testsuites", root.tag
tot = dict(tests=0, failures=0, errors=0, skipped=0)
lines = []
for s in root.iter("testsuite"):
    cases = s.findall("testcase")
    got = dict(tests=len(cases), failures=sum(c.find("failure") is not None for c in cases),
               errors=sum(c.find("error") is not None for c in cases),
               skipped=sum(c.find("skipped") is not None for c in cases))
    for k, v in got.items():
        assert int(s.get(k)) == v, (s.get("name"), k, s.get(k), v)
        tot[k] += v
    for c in cases:
        f = c.find("failure")
        lines.append("%s|%s" % (c.get("name"), "" if f is None else f.get("message")))
for k in ("tests", "failures", "errors"):
    assert int(root.get(k)) == tot[k], ("testsuites", k, root.get(k), tot[k])
print(tot["tests"], tot["failures"], tot["errors"], tot["skipped"])
print("\n".join(lines))
PYEOF
}

# --- the schema refuses what the dialect (or bitflip's promise) lacks ---------
cat >"$tmp/good.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="2" failures="1" errors="0" time="1.5">
  <testsuite name="s" tests="2" failures="1" errors="0" skipped="0" time="1.5">
    <properties><property name="seed" value="7"/></properties>
    <testcase classname="c" name="a" time="0.5"/>
    <testcase classname="c" name="b" time="1"><failure message="m" type="t">text</failure><system-out>o</system-out></testcase>
  </testsuite>
</testsuites>
EOF
valid schema_good "$tmp/good.xml"
sed 's/ errors="0" skipped/ skipped/' "$tmp/good.xml" >"$tmp/no_errors.xml";  invalid schema_no_errors "$tmp/no_errors.xml"
sed 's/ skipped="0"//' "$tmp/good.xml" >"$tmp/no_skipped.xml";              invalid schema_no_skipped "$tmp/no_skipped.xml"
sed 's/name="a" time="0.5"/name="a"/' "$tmp/good.xml" >"$tmp/no_time.xml";   invalid schema_case_no_time "$tmp/no_time.xml"
sed 's/time="1.5">$/>/' "$tmp/good.xml" >"$tmp/no_suite_time.xml";           invalid schema_no_suite_time "$tmp/no_suite_time.xml"
sed 's/tests="2" failures="1" errors="0" time/tests="2" failures="1" errors="0" skipped="0" time/' "$tmp/good.xml" \
  >"$tmp/suites_skipped.xml";                                                  invalid schema_testsuites_skipped "$tmp/suites_skipped.xml"
sed 's/failures="1" errors="0" skipped/failures="one" errors="0" skipped/' "$tmp/good.xml" >"$tmp/nan.xml"
invalid schema_count_not_number "$tmp/nan.xml"

# --- bf_gates_junit: counts, and text that needs escaping --------------------
"$SAMPLE" >"$tmp/sample.xml" || bad "junit_sample failed"
valid sample "$tmp/sample.xml"
facts "$tmp/sample.xml" >"$tmp/facts" || bad "sample: counts do not add up"
eq sample_counts "$(head -1 "$tmp/facts")" "3 2 0 0"
eq sample_pass "$(sed -n 2p "$tmp/facts")" "critical_rate<=0.05|"
eq sample_fail "$(sed -n 3p "$tmp/facts")" "masked_rate>=0.9|masked_rate = 0.5"
# quotes, &, <, > and the tab come back as written; the control character,
# which XML 1.0 cannot carry, as '?'
eq sample_escaped "$(sed -n 4p "$tmp/facts")" "$(printf 'a"b'"'"'c&d<e>f\tg?h|x&y"z = inf')"
"$SAMPLE" none >"$tmp/none.xml" || bad "junit_sample none failed"
valid no_gates "$tmp/none.xml"
eq no_gates_counts "$(facts "$tmp/none.xml" | head -1)" "0 0 0 0"

# the example in api/openapi.yaml is a report of this kind too
$PY -c "import sys, yaml; d = yaml.safe_load(open(sys.argv[1]))
print(d['paths']['/v1/campaigns/{id}/results']['get']['responses']['200']['content']['application/xml']['example'], end='')" \
  "$(dirname "$0")/../../api/openapi.yaml" >"$tmp/example.xml" || bad "no JUnit example in api/openapi.yaml"
valid openapi_example "$tmp/example.xml"
facts "$tmp/example.xml" >/dev/null || bad "openapi_example: counts do not add up"

# --- bitflip run --local --junit: a gate that passes, one that fails ----------
spec=$FIX/specs/digits_weights.json
"$BF" run --local "$spec" --gate 'critical_rate<=1' --gate 'golden_accuracy>=0.5' --junit "$tmp/cli_pass.xml" \
  >/dev/null 2>"$tmp/err"
eq cli_pass_exit "$?" 0
valid cli_pass "$tmp/cli_pass.xml"
facts "$tmp/cli_pass.xml" >"$tmp/facts" || bad "cli_pass: counts do not add up"
eq cli_pass_counts "$(head -1 "$tmp/facts")" "2 0 0 0"
eq cli_pass_cases "$(tail -n +2 "$tmp/facts" | tr '\n' ' ')" "critical_rate<=1| golden_accuracy>=0.5| "

"$BF" run --local "$spec" --gate 'critical_rate<=1' --gate 'masked_rate>=1.01' --junit "$tmp/cli_fail.xml" \
  >/dev/null 2>"$tmp/err"
eq cli_fail_exit "$?" 1
valid cli_fail "$tmp/cli_fail.xml"
facts "$tmp/cli_fail.xml" >"$tmp/facts" || bad "cli_fail: counts do not add up"
eq cli_fail_counts "$(head -1 "$tmp/facts")" "2 1 0 0"
eq cli_fail_passing_case "$(sed -n 2p "$tmp/facts")" "critical_rate<=1|"
case "$(sed -n 3p "$tmp/facts")" in
  "masked_rate>=1.01|masked_rate = "*) ok ;;
  *) bad "cli_fail: the failing testcase is '$(sed -n 3p "$tmp/facts")'" ;;
esac

# --- the daemon: results?format=junit, and bitflip run --server --junit -------
M=$FIX/conformance/demo_digits.onnx
D=$FIX/conformance/demo_digits.eval.safetensors
start_daemon "$tmp/data" || exit 1
req upload_model 201 -H 'Content-Type: application/octet-stream' --data-binary @"$M" "$URL/v1/models"
MID=$(jget "j['id']")
req upload_dataset 201 -H 'Content-Type: application/octet-stream' --data-binary @"$D" "$URL/v1/datasets"
DID=$(jget "j['id']")
$PY - "$spec" "$MID" "$DID" >"$tmp/spec.json" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1])); s["model"] = sys.argv[2]; s["dataset"] = sys.argv[3]
s["gates"] = ["critical_rate<=1", "masked_rate>=1.01"]
print(json.dumps(s))
PYEOF
req submit 202 -H 'Content-Type: application/json' --data-binary @"$tmp/spec.json" "$URL/v1/campaigns"
CID=$(jget "j['id']")
wait_state "$CID" succeeded 120 || bad "campaign $CID did not succeed"
req results_junit 200 "$URL/v1/campaigns/$CID/results?format=junit"
header_has results_junit_type "Content-Type: application/xml"
cp "$tmp/body" "$tmp/daemon.xml"
valid daemon "$tmp/daemon.xml"
facts "$tmp/daemon.xml" >"$tmp/facts" || bad "daemon: counts do not add up"
eq daemon_counts "$(head -1 "$tmp/facts")" "2 1 0 0"
# the same result and gates make the same report as the CLI's
if cmp -s "$tmp/daemon.xml" "$tmp/cli_fail.xml"; then ok; else
  bad "the daemon's JUnit differs from bitflip run --local's"; diff "$tmp/cli_fail.xml" "$tmp/daemon.xml" | head; fi

(cd "$FIX/specs" && "$BF" run --server "$URL" digits_weights.json --gate 'critical_rate<=1' --junit "$tmp/remote.xml") \
  >/dev/null 2>"$tmp/err"
eq remote_exit "$?" 0
valid remote "$tmp/remote.xml"
eq remote_counts "$(facts "$tmp/remote.xml" | head -1)" "1 0 0 0"

stop_daemon
finish
