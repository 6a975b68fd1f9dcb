#!/usr/bin/env bash
# bitflip report: its figures against independent references
# (report_check.py) and its command line: usage, and errors that name the
# file (missing, not JSON, not a result).
# usage: test_report.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
FIX=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"

check help 0 "$BF" report --help;          contains help "--format html|md"
check help_cmd 0 "$BF" help report;        contains help_cmd "--label NAME"
check none 2 "$BF" report;                 contains none "which results?"
check bad_format 2 "$BF" report x.json --format pdf; contains bad_format "--format must be html or md, got 'pdf'"
check bad_option 2 "$BF" report --frob x.json;  contains bad_option "unknown option '--frob'"
check no_value 2 "$BF" report x.json -o;   contains no_value "needs a value"
check max_tensors 2 "$BF" report x.json --max-tensors 0; contains max_tensors "--max-tensors must be an integer from 1 to 500"
echo '{}' >"$tmp/empty.json"
check labels 2 "$BF" report "$tmp/empty.json" --label a --label b; contains labels "2 --label for 1 result"
check missing 3 "$BF" report "$tmp/nope.json" -o "$tmp/r.html";   contains missing "cannot read $tmp/nope.json"
printf '{"summary": ' >"$tmp/cut.json"
check not_json 3 "$BF" report "$tmp/cut.json" -o "$tmp/r.html";  contains not_json "$tmp/cut.json is not JSON"
check not_result 3 "$BF" report "$tmp/empty.json" -o "$tmp/r.html"; contains not_result "$tmp/empty.json is not a bitflip campaign result"
echo '{"id": "c1", "state": "running"}' >"$tmp/running.json"
check running 3 "$BF" report "$tmp/running.json" -o "$tmp/r.html"; contains running "is a campaign that is running"
[ ! -e "$tmp/r.html" ] && passes=$((passes+1)) || { echo "FAIL a failed report left a file"; fails=$((fails+1)); }
echo "== report_check.py"
/usr/bin/python3 "$(dirname "$0")/report_check.py" "$BF" "$FIX" "$tmp"
rc=$?
[ "$rc" -eq 0 ] && passes=$((passes+1)) || fails=$((fails+1))
# --max-tensors: the bars and the heatmap keep the 2 most vulnerable, and say how many there were
check top2 0 "$BF" report "$tmp/demo.json" --max-tensors 2 -o "$tmp/top2.html"
n=$(grep -o 'the 2 most vulnerable of [0-9]* tensors' "$tmp/top2.html" | wc -l)
[ "$n" -eq 2 ] && passes=$((passes+1)) || { echo "FAIL --max-tensors 2: $n notes"; fails=$((fails+1)); }
check unwritable 3 "$BF" report "$tmp/demo.json" -o "$tmp/no/such/dir/r.html"
contains unwritable "cannot write $tmp/no/such/dir/r.html"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
