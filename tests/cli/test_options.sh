#!/usr/bin/env bash
# Options as shells and CI logs expect them (getopt_long): --opt=value and
# --opt value alike in every command, -h, errors that name the option; and
# --progress: a \r bar, plain newline-terminated lines for logs, or nothing,
# never an ANSI escape.
# usage: test_options.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
FX=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"

ok() { passes=$((passes+1)); }
bad() { echo "FAIL $1"; fails=$((fails+1)); }
same() { if cmp -s "$2" "$3"; then ok; else bad "$1: $2 and $3 differ"; diff "$2" "$3" | head -5; fi; }
no_escape() {   # no_escape NAME FILE: no ESC byte (ANSI sequences, colour)
  if LC_ALL=C grep -q $'\x1b' "$2"; then bad "$1: an escape sequence in $2"; else ok; fi; }

model=$FX/conformance/demo_digits.onnx
data=$FX/conformance/demo_digits.eval.safetensors
spec=$FX/specs/digits_weights.json

# -h and --help in every command, and every command in bitflip --help's
# list (README: `bitflip help` lists them; generate and report were once
# missing from it)
for cmd in info eval generate run merge plan ops report slurm; do
  check "h_$cmd" 0 "$BF" "$cmd" -h;        contains "h_$cmd" "usage: bitflip $cmd"
  check "help_$cmd" 0 "$BF" "$cmd" --help; contains "help_$cmd" "usage: bitflip $cmd"
  check "listed_$cmd" 0 "$BF" --help;      contains "listed_$cmd" "  $cmd "
done

# --opt=value gives what --opt value gives
param=$("$BF" info --json "$model" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["params"][0]["name"])')
check eval_sep 0 "$BF" eval "$model" "$data" --json --threads 2 --batch 7 --flip "$param:0:30"
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [d.pop(k) for k in ("seconds", "samples_per_s")]; print(json.dumps(d, sort_keys=True))' \
  "$tmp/stdout" >"$tmp/eval_sep" 2>/dev/null || bad "eval --json output"
check eval_eq 0 "$BF" eval "$model" "$data" --json --threads=2 --batch=7 --flip="$param:0:30"
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [d.pop(k) for k in ("seconds", "samples_per_s")]; print(json.dumps(d, sort_keys=True))' \
  "$tmp/stdout" >"$tmp/eval_eq" 2>/dev/null || bad "eval --json output (=)"
same eval_opt_equals_forms "$tmp/eval_sep" "$tmp/eval_eq"
grep -q '"batch": 7' "$tmp/eval_eq" && ok || bad "--batch=7 not applied"

check run_sep 0 "$BF" run --local "$spec" --threads 1 --format csv --shard 1/2 --gate 'critical_rate<=1'
cp "$tmp/stdout" "$tmp/run_sep"
check run_eq 0 "$BF" run --local "$spec" --threads=1 --format=csv --shard=1/2 --gate='critical_rate<=1'
same run_opt_equals_forms "$tmp/run_sep" "$tmp/stdout"
check run_eq_format 0 "$BF" run --local "$spec" --format=json --out="$tmp/r.json" --trials-out="$tmp/t.jsonl" --junit="$tmp/j.xml" --gate=critical_rate\<=1
[ -s "$tmp/r.json" ] && [ -s "$tmp/t.jsonl" ] && [ -s "$tmp/j.xml" ] && ok || bad "--out=, --trials-out=, --junit= not written"
check plan_eq 0 "$BF" plan --margin=0.05 --confidence=0.9 --threads=1 "$spec"; contains plan_eq "margin 0.05 at confidence 0.9"
check info_limit_eq 0 "$BF" info --limit=model.graph-depth=1000 --no-fuse "$model"
check info_limit_bad 2 "$BF" info --limit=model.nope=1 "$model"; contains info_limit_bad "model.nope"
check job_memory_eq 3 "$BF" eval "$model" "$data" --job-memory=1K; contains job_memory_eq "--job-memory"
# --tie-order: onnx or pytorch; anything else is a usage error naming the flag; on a
# model without TopK or NMS the two give the same result
check tie_order_bad 2 "$BF" eval "$model" "$data" --tie-order=stable; contains tie_order_bad "--tie-order must be onnx or pytorch"
check tie_order_onnx 0 "$BF" eval "$model" "$data" --json --tie-order onnx --flip "$param:0:30"
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [d.pop(k) for k in ("seconds", "samples_per_s", "batch")]; print(json.dumps(d, sort_keys=True))' \
  "$tmp/stdout" >"$tmp/tie_onnx" 2>/dev/null || bad "eval --tie-order onnx output"
check tie_order_pytorch 0 "$BF" eval "$model" "$data" --json --tie-order=pytorch --flip "$param:0:30"
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [d.pop(k) for k in ("seconds", "samples_per_s", "batch")]; print(json.dumps(d, sort_keys=True))' \
  "$tmp/stdout" >"$tmp/tie_pytorch" 2>/dev/null || bad "eval --tie-order pytorch output"
same tie_order_no_topk "$tmp/tie_onnx" "$tmp/tie_pytorch"
check ops_one 0 "$BF" ops --one-per-line;  contains ops_one "Conv"
# --out through a symbolic link is written through it, never replacing the link
# (a link in $tmp: the test must not touch /dev/stdout, which a rename as root would replace)
: >"$tmp/target.json"
ln -s "$tmp/target.json" "$tmp/link.json"
check out_symlink 0 "$BF" run --local "$spec" --format csv --out "$tmp/link.json" --progress none
[ -L "$tmp/link.json" ] && grep -q '"summary"' "$tmp/target.json" && ok || bad "--out through a symbolic link"
mkfifo "$tmp/fifo"
cat "$tmp/fifo" >"$tmp/from_fifo" & reader=$!
check out_fifo 0 "$BF" run --local "$spec" --format csv --out "$tmp/fifo" --progress none
wait $reader
[ -p "$tmp/fifo" ] && grep -q '"summary"' "$tmp/from_fifo" && ok || bad "--out to a FIFO"
# options after the arguments, and "--" before an argument that starts with '-'
check after_args 0 "$BF" info "$model" --json; contains after_args '"params"'
check dashdash 3 "$BF" info -- -not-a-file.onnx; contains dashdash "-not-a-file.onnx"

# errors name the option
check unknown_eq 2 "$BF" run --local "$spec" --frob=3;   contains unknown_eq "unknown option '--frob'"
check unknown_short 2 "$BF" plan -x "$spec";              contains unknown_short "unknown option '-x'"
check missing_value 2 "$BF" eval "$model" "$data" --threads; contains missing_value "--threads needs a value"
check flag_with_value 2 "$BF" info --json=yes "$model";   contains flag_with_value "--json takes no value"
check ambiguous 2 "$BF" run --local "$spec" --t 2;        contains ambiguous "ambiguous: --trial-major, --token, --trials-out, --threads"
check bad_value_eq 2 "$BF" run --local "$spec" --threads=0; contains bad_value_eq "--threads must be an integer from 1 to 256, got '0'"
check ops_arg 2 "$BF" ops extra;                          contains ops_arg "takes no arguments"
check two_specs 2 "$BF" plan "$spec" "$spec";             contains two_specs "one spec at a time"

# --- --progress ----------------------------------------------------------------
check progress_bad 2 "$BF" run --local "$spec" --progress=fancy; contains progress_bad "auto, bar, plain or none"
check interval_bad 2 "$BF" run --local "$spec" --progress-interval=-1; contains interval_bad "--progress-interval"
# plain: newline-terminated lines for a log, the last with every trial
check progress_plain 0 "$BF" run --local "$spec" --format csv --progress=plain
cp "$tmp/stdout" "$tmp/plain.csv"
grep -q '^bitflip run: 240/240 trials (100%) .* critical ' "$tmp/stderr" && ok || { bad "plain progress line"; cat "$tmp/stderr"; }
LC_ALL=C grep -q $'\r' "$tmp/stderr" && bad "plain progress has a carriage return" || ok
no_escape progress_plain "$tmp/stderr"
# auto on a non-terminal (this test's pipe) is plain
check progress_auto 0 "$BF" run --local "$spec" --format csv
grep -q '^bitflip run: 240/240 trials (100%)' "$tmp/stderr" && ok || bad "auto is not plain on a pipe"
check progress_none 0 "$BF" run --local "$spec" --format csv --progress none
[ ! -s "$tmp/stderr" ] && ok || { bad "--progress none printed"; cat "$tmp/stderr"; }
# the progress never mixes into the result on stdout
same progress_stdout_clean "$tmp/plain.csv" "$tmp/stdout"
# bar: redrawn with \r, cleared with spaces, no escape sequence even with TERM set
check progress_bar 0 env TERM=xterm-256color "$BF" run --local "$spec" --format table --progress=bar
LC_ALL=C grep -q $'\r' "$tmp/stderr" && ok || bad "bar progress has no carriage return"
no_escape progress_bar "$tmp/stderr"
no_escape table_output "$tmp/stdout"
# and no path the runs above missed writes one: no escape in the CLI's sources
if grep -nE '\\(033|x1[bB]|e\[)' "$FX"/../../clients/cli/*.c "$FX"/../../clients/cli/*.h; then
  bad "an escape sequence in clients/cli (above): honour NO_COLOR and TERM=dumb there, and test it"
else ok; fi
# NO_COLOR changes nothing because nothing is coloured
check progress_no_color 0 env NO_COLOR=1 "$BF" run --local "$spec" --format csv --progress=plain
no_escape progress_no_color "$tmp/out"
# eval: plain lines every interval (0: every update) and none on none
check eval_plain 0 "$BF" eval "$model" "$data" --progress=plain --progress-interval=0 --batch 64
grep -q '^bitflip eval: eval golden pass: [0-9]*/[0-9]* samples' "$tmp/stderr" && ok || { bad "eval plain progress"; cat "$tmp/stderr"; }
no_escape eval_plain "$tmp/stderr"
check eval_none 0 "$BF" eval "$model" "$data" --progress=none --flip "$param:0:30"
[ ! -s "$tmp/stderr" ] && ok || bad "eval --progress none printed"
check eval_bar 0 "$BF" eval "$model" "$data" --progress=bar --repeat 3
no_escape eval_bar "$tmp/out"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
