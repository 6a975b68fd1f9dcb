#!/usr/bin/env bash
# Hostile inputs at the CLI (docs/LIMITS.md): a model nested 10,000 deep is
# refused with the limit named; a 200-byte model that would fold a 4 GiB
# constant has its plan memory printed by info and plan, and eval and run
# refuse it (exit 3) before allocating, naming the node and the bytes;
# --limit and --job-memory set the limits.
# usage: test_limits.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
FX=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"

/usr/bin/python3 "$(dirname "$0")/../fixtures/make_hostile.py" "$tmp" || { echo "FAIL making the models"; exit 1; }

check deep 3 "$BF" info "$tmp/deep.onnx"
contains deep "ONNX subgraphs nested more than 64 deep at byte offset"
contains deep "(node 'if_63' op If attribute 'then_branch'); the limit is 64 (max_graph_depth)"
check if3 3 "$BF" info "$tmp/if3.onnx"     # within the limit: the ordinary checks refuse it

# ops bitflip lacks: all of them named in one error, each with a node, and
# where the supported list is
check unsupported 3 "$BF" info "$tmp/unsupported.onnx"
contains unsupported "unsupported.onnx: 2 ops that bitflip does not support, in 3 nodes: Frobnicate (node 'frob_1'), Twiddle (node 'twiddle_1')"
contains unsupported "'bitflip ops' lists the"
check ops 0 "$BF" ops --one-per-line
contains ops "LSTM"
contains ops "Resize"
contains ops "QLinearConv"
n_listed=$("$BF" ops --one-per-line | wc -l)
check ops_count 0 "$BF" ops
contains ops_count "$n_listed ONNX ops:"
check ops_sorted 0 sh -c "'$BF' ops --one-per-line | LC_ALL=C sort -c"
check ops_bad_arg 2 "$BF" ops --frob
check if3_limit 3 "$BF" info --limit model.graph-depth=2 "$tmp/if3.onnx"
contains if3_limit "nested more than 2 deep"
check bad_key 2 "$BF" info --limit model.depth=2 "$tmp/if3.onnx"
contains bad_key "model.graph-depth"
check bad_value 2 "$BF" info --limit model.graph-depth=zero "$tmp/if3.onnx"

need="the plan needs 4.0 GiB (node 'ConstantOfShape_0' ConstantOfShape folded [32768, 32768] float32: 4.0 GiB), over the 4.0 GiB job memory limit (--job-memory)"
check info_bomb 0 "$BF" info "$tmp/bomb.onnx"
contains info_bomb "plan memory (peak, from shapes)"
contains info_bomb "largest: node 'ConstantOfShape_0' ConstantOfShape folded [32768, 32768] float32: 4.0 GiB"
check info_json 0 "$BF" info --json "$tmp/bomb.onnx"
contains info_json '"plan_memory"'
contains info_json '"node": "ConstantOfShape_0"'
contains info_json '"bytes": 4294967360'
check eval_bomb 3 "$BF" eval "$tmp/bomb.onnx" "$tmp/bomb.eval.safetensors"
contains eval_bomb "$need"
check run_bomb 3 "$BF" run --local --threads 1 "$tmp/bomb.json"
contains run_bomb "$need"
check plan_bomb 3 "$BF" plan --threads 1 "$tmp/bomb.json"
contains plan_bomb "memory "
contains plan_bomb "$need"
check bad_size 2 "$BF" eval --job-memory lots "$tmp/bomb.onnx" "$tmp/bomb.eval.safetensors"

# an ordinary model under a tiny budget: the job's parts are named
M=$FX/conformance/demo_digits.onnx
D=$FX/conformance/demo_digits.eval.safetensors
check eval_tiny 3 "$BF" eval --job-memory 1K "$M" "$D"
contains eval_tiny "the plan needs"
contains eval_tiny "over the 1.0 KiB job memory limit (--job-memory)"
# eval's plans reuse an activation's memory after its last reader, and a
# Conv's fused Relu takes the Conv's own bytes (2.8 MiB at batch 256 here,
# a batch plan and the rest's): the whole job no longer fits 2 MiB, its plan
# (1.8 MiB) does
check eval_small 3 "$BF" eval --job-memory 2M "$M" "$D"
contains eval_small "the evaluation needs"
contains eval_small "over the 2.0 MiB job memory limit (--job-memory)"
check eval_ok 0 "$BF" eval --job-memory 1G "$M" "$D"
# refused, with what would fit; and what it says fits does
check run_hint 3 "$BF" run --local --threads 1 --job-memory 6M "$FX/specs/digits_weights.json"
contains run_hint 'with --cache-budget 3M it fits'
contains run_hint 'with "batch": 8 in the spec the campaign needs'
sed 's/"seed": 7,/"seed": 7, "batch": 8,/' "$FX/specs/digits_weights.json" >"$tmp/b8.json"
sed -i "s|\.\./conformance/|$FX/conformance/|g" "$tmp/b8.json"
check run_hint_batch 0 "$BF" run --local --threads 1 --job-memory 6M --format json --out "$tmp/b8.out" "$tmp/b8.json"
check run_hint_cache 0 "$BF" run --local --threads 1 --job-memory 6M --cache-budget 1M --format json --out "$tmp/c1.out" "$FX/specs/digits_weights.json"
check run_small 3 "$BF" run --local --threads 1 --job-memory 3M "$FX/specs/digits_weights.json"
contains run_small "the campaign needs 7.5 MiB"
# at 3M neither a smaller cache (the rest alone is 2.1 MiB at batch 64) nor a
# smaller batch alone fits: the refusal names the --job-memory that does
# (7.5 MiB rounded up to whole MiB), and that value passes the check
contains run_small "with --job-memory 8M it fits"
check run_hint_memory 0 "$BF" run --local --threads 1 --job-memory 8M --format json --out "$tmp/m8.out" "$FX/specs/digits_weights.json"
check run_hint_memory_under 3 "$BF" run --local --threads 1 --job-memory 7M "$FX/specs/digits_weights.json"
check data_limit 3 "$BF" eval --limit data.tensors=1 "$M" "$D"
contains data_limit "(max_tensors)"
check spec_limit 2 "$BF" run --local --limit spec.array=0 "$FX/specs/digits_weights.json"
check spec_limit2 2 "$BF" plan --limit spec.string=8 "$FX/specs/digits_weights.json"
contains spec_limit2 "(max_string)"
check help_run 0 "$BF" help run
contains help_run "--job-memory SIZE"
check help_eval 0 "$BF" help eval
contains help_eval "--limit KEY=VALUE"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
