# Shared by the CLI tests: run a command and check its exit code and output.
# Each script sets BF and tmp, and reports "N passed, N failed" at the end.
fails=0 passes=0

check() {   # check NAME EXPECTED_RC CMD... ; output in $tmp/out (stdout then stderr), $tmp/stdout, $tmp/stderr
  local name=$1 want=$2; shift 2
  "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  cat "$tmp/stdout" "$tmp/stderr" >"$tmp/out"
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL $name: exit $rc, wanted $want"; sed 's/^/    /' "$tmp/out" | head -20; fails=$((fails+1))
  else passes=$((passes+1)); fi
}
contains() {  # contains NAME TEXT : the last output contains TEXT
  if grep -qF -- "$2" "$tmp/out"; then passes=$((passes+1)); else
    echo "FAIL $1: output lacks '$2'"; sed 's/^/    /' "$tmp/out" | head -20; fails=$((fails+1)); fi
}
