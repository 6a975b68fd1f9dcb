#!/usr/bin/env bash
# The bitflip CLI as a user meets it: help, exit codes, error messages that
# name the culprit, and eval results that agree with the reference file.
# usage: test_cli.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
FX=$2/conformance
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"


model=$(ls "$FX"/*.onnx | head -n 1)
name=$(basename "$model" .onnx)
data=$FX/$name.eval.safetensors

check help 0 "$BF" --help;                      contains help "usage: bitflip"
check help_eval 0 "$BF" help eval;              contains help_eval "--flip"
check no_args 2 "$BF"
check unknown_cmd 2 "$BF" frobnicate;           contains unknown_cmd "no command 'frobnicate'"
check unknown_opt 2 "$BF" eval --frob "$model" "$data"; contains unknown_opt "unknown option '--frob'"
check missing_model 3 "$BF" info /nonexistent/m.onnx;    contains missing_model "/nonexistent/m.onnx"
check dir_model 3 "$BF" info "$tmp";             contains dir_model "not a regular file"
check swapped 3 "$BF" eval "$model" "$model";     contains swapped "not a safetensors file"
check missing_data 3 "$BF" eval "$model" /nonexistent/d.safetensors; contains missing_data "/nonexistent/d.safetensors"
check bad_threads 2 "$BF" eval "$model" "$data" --threads 0; contains bad_threads "--threads must be"

# a file that is not ONNX: the error says so and where
head -c 100 "$model" >"$tmp/cut.onnx"
check truncated 3 "$BF" info "$tmp/cut.onnx";   contains truncated "cut.onnx: not a valid ONNX model"
# an eval set for another model: names the missing tensor
printf '\x1a\x00\x00\x00\x00\x00\x00\x00{"zz":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]}}\x00\x00\x80\x3f' | head -c 38 >"$tmp/wrong.safetensors"
check wrong_data 3 "$BF" eval "$model" "$tmp/wrong.safetensors"

check info 0 "$BF" info "$model";               contains info "parameters (fault surface)"
check info_json 0 "$BF" info --json "$model";   contains info_json '"param_elements"'
param=$("$BF" info "$model" | awk '/^  name +shape/ {getline; print $1; exit}')

check eval 0 "$BF" eval "$model" "$data";       contains eval "golden"
check eval_json 0 "$BF" eval --json "$model" "$data" --threads 2 --batch 7; contains eval_json '"samples_per_s"'
check bad_flip 2 "$BF" eval "$model" "$data" --flip "$param:0:40"; contains bad_flip "bit 40"
check bad_flip_name 2 "$BF" eval "$model" "$data" --flip "nope:0:1"; contains bad_flip_name "no parameter 'nope'"
check bad_flip_index 2 "$BF" eval "$model" "$data" --flip "$param:99999999:1"; contains bad_flip_index "does not exist"
check flip 0 "$BF" eval "$model" "$data" --flip "$param:0:30" --flip "$param:0:31"; contains flip "$param[0] bit 30"

# Faults never leak between passes: golden outputs before and after a run
# with faults are identical, and the same for any thread count (bit identity
# depends on the batch size, which both runs share).
"$BF" eval "$model" "$data" --outputs "$tmp/a.csv" >/dev/null 2>&1
"$BF" eval "$model" "$data" --threads 2 --batch 256 --flip "$param:0:30" --outputs "$tmp/b.csv" >/dev/null 2>&1
if cmp -s "$tmp/a.csv" "$tmp/b.csv"; then passes=$((passes+1)); else echo "FAIL outputs differ across thread counts or after faults"; fails=$((fails+1)); fi
[ -s "$tmp/a.csv" ] && passes=$((passes+1)) || { echo "FAIL no outputs written"; fails=$((fails+1)); }

# demo_digits' two Conv -> Relu pairs run fused (docs/ENGINE.md), the count in both forms
dd=$FX/demo_digits
check eval_fused 0 "$BF" eval "$dd.onnx" "$dd.eval.safetensors"; contains eval_fused "fused    2 activations (Relu, Clip, HardSwish; residual Adds, BatchNorms)"
check eval_fused_json 0 "$BF" eval --json "$dd.onnx" "$dd.eval.safetensors"; contains eval_fused_json '"fused_activations": 2'

# BatchNorm exported in training mode: info and eval say the outputs depend on the
# batching (docs/NUMERICS.md); a model without says nothing (demo_digits above)
bn=$2/bntrain/conv_bn_train_op14
check info_bstat 0 "$BF" info "$bn.onnx"; contains info_bstat "batch statistics: 2 BatchNormalizations in training mode"
check info_bstat_json 0 "$BF" info --json "$bn.onnx"; contains info_bstat_json '"batch_statistics": 2'
# the campaign default batch line and field (64 for these small models; the rule's cases,
# 4 and 32 among them, are test_campaign_batch.c's)
check info_bstat_batch 0 "$BF" info "$bn.onnx"; contains info_bstat_batch "a campaign whose spec has no \"batch\" runs at 64"
check info_dd_json 0 "$BF" info --json "$dd.onnx"; contains info_dd_json '"campaign_batch": 64'
check eval_bstat 0 "$BF" eval --batch 8 "$bn.onnx" "$bn.eval.safetensors"; contains eval_bstat "results depend on --batch"
check eval_bstat_json 0 "$BF" eval --json "$bn.onnx" "$bn.eval.safetensors"; contains eval_bstat_json '"batch_statistics": 2'
check eval_nobstat 0 "$BF" eval "$dd.onnx" "$dd.eval.safetensors"
if grep -q "results depend on --batch" "$tmp/out"; then
  echo "FAIL eval_nobstat: a model without batch statistics named them"; fails=$((fails+1)); else passes=$((passes+1)); fi

# weights stored as float16 (a half-precision export, tests/fixtures/user): info says so and what a
# campaign's faults then strike; a float32 model says nothing (demo_digits)
h=$2/user/mlp_fp16_op14
check info_fp16 0 "$BF" info "$h.onnx"; contains info_fp16 'stored as float16 in the file'
contains info_fp16 '"representation": "fp16"'
check info_fp16_json 0 "$BF" info --json "$h.onnx"; contains info_fp16_json '"stored": "float16"'
check eval_fp16 0 "$BF" eval "$h.onnx" "$h.eval.safetensors"
check info_fp32 0 "$BF" info "$dd.onnx"
if grep -q "stored as float16" "$tmp/out"; then
  echo "FAIL info_fp32: a float32 model was said to be stored as float16"; fails=$((fails+1)); else passes=$((passes+1)); fi

# a batched graph whose output an If (a dynamic step) computes: the error names the If and why
k=$2/user/ctr_if_kept_op11
check eval_dyn_out 3 "$BF" eval "$k.onnx" "$k.eval.safetensors"; contains eval_dyn_out "output 'y' has a shape that is data"
contains eval_dyn_out "(If), which runs as a dynamic step"

# a detector exported around a wrapper ([batch, 3, H, W] in) runs one image per call, its
# outputs (dets, classes, confidences) told apart by type; with its labels cast to float32
# nothing tells two float [K] outputs apart, and the error lists the outputs
u=$2/user_det
check eval_det_per_call 0 "$BF" eval "$u/yolo_user_op17_dyn.onnx" "$u/yolo_user_op17_dyn.eval.safetensors"
contains eval_det_per_call "task detection"
check eval_det_names 3 "$BF" eval "$u/yolo_user_op17_ambiguous.onnx" "$u/yolo_user_op17_dyn.eval.safetensors"
contains eval_det_names "outputs ('dets', 'classes_f', 'confidences') are not named boxes, scores and labels"
contains eval_det_names "output_names=['boxes', 'labels', 'scores']"

# modules exported as ONNX functions (export_modules_as_functions=True): refused, saying what to do
check info_functions 3 "$BF" info "$2/user/modules_as_functions_op15.onnx"
contains info_functions "one of the 5 functions local to the model"
contains info_functions "export without export_modules_as_functions"

# run --server loads libcurl only then (dlopen of libcurl.so.4): one that does not
# load, or lacks a function bitflip calls, stops the run with exit 3 and a message
# that names libcurl and the package to install; run --local never loads it. The
# first is a file that is no library, first on LD_LIBRARY_PATH; the second
# tests/cli/curl_stub.c, built by tests/CMakeLists.txt (BF_CURL_STUB_DIR)
spec=$2/specs/digits_weights.json
mkdir "$tmp/nocurl" && echo "not a shared library" >"$tmp/nocurl/libcurl.so.4"
nocurl="$tmp/nocurl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
check server_no_curl 3 env LD_LIBRARY_PATH="$nocurl" "$BF" run --server http://127.0.0.1:9 "$spec"
contains server_no_curl "--server needs libcurl (libcurl.so.4), which did not load"
contains server_no_curl "apt-get install libcurl4"
contains server_no_curl "or run the campaign here with --local"
check local_no_curl 0 env LD_LIBRARY_PATH="$nocurl" "$BF" run --local "$spec" --threads 1 --format csv --progress none
contains local_no_curl "critical_rate"
if [ -n "${BF_CURL_STUB_DIR:-}" ]; then
  stub="$BF_CURL_STUB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  check server_stub_curl 3 env LD_LIBRARY_PATH="$stub" "$BF" run --server http://127.0.0.1:9 "$spec"
  contains server_stub_curl "this libcurl.so.4 has no curl_global_cleanup"
  contains server_stub_curl "apt-get install libcurl4"
  check local_stub_curl 0 env LD_LIBRARY_PATH="$stub" "$BF" run --local "$spec" --threads 1 --format csv --progress none
else
  echo "SKIP server_stub_curl: BF_CURL_STUB_DIR unset (ctest sets it: tests/CMakeLists.txt builds the stub)"
fi

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
