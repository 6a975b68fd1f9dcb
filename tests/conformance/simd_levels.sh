#!/usr/bin/env bash
# bitflip's results are the same bits on every x86-64 CPU (ctest simd_levels).
#
#   simd_levels.sh BITFLIP CONFORMANCE OPCHECK FIXTURES_DIR [SHARED_CONFORMANCE_DIR]
#
# The engine has one switch for its CPU path (core/src/base/simd.h): the
# AVX-512 copies of its kernels where the CPU has avx512f/bw/dq/vl (and the
# AVX2 copies of the rest), the AVX2 copies where it has AVX2 and FMA, the
# scalar reference otherwise or under BITFLIP_SIMD=ref (BITFLIP_SIMD=avx2
# lowers an AVX-512 CPU to the AVX2 path). A machine without AVX2 runs the
# reference, one without AVX-512 skips that path (with a note), so "the
# same bits on every CPU" means: every path this machine can take gives the
# same bits. This runs, under each of them,
#   - the conformance fixtures (tests/fixtures/{conformance,rnn,quant,real} and
#     the shared set when present), golden, under each fault directly and
#     through the campaign path, every output dumped (bitflip-conformance --dump);
#   - every op case of tests/fixtures/ops (bitflip-opcheck --dump);
#   - campaigns (weights, activations and inputs; bit flips, BER, stuck-at;
#     fp32, fp16, bf16, int8; mitigations; classifiers, a DLRM, a CNN with
#     depthwise convolutions, an LSTM, a transformer) on the differential
#     engine and with --exact: every trial record and the result document;
# and compares each with the first path's, byte for byte (a NaN is dumped as
# the one quiet NaN: its sign and payload are not results, see
# conformance.c's dump_floats). It first checks that BITFLIP_SIMD reaches the
# engine (`bitflip --version` names the path), so that the comparison cannot
# pass by running one path twice. Levels are listed in LEVELS below: add a
# path there when the engine gains one.
# Exit 0: the same bits everywhere; 1: a difference or a failure.
set -uo pipefail
bitflip=${1:?usage: simd_levels.sh BITFLIP CONFORMANCE OPCHECK FIXTURES_DIR [SHARED_DIR]}
conformance=${2:?usage}
opcheck=${3:?usage}
fixtures=$(cd "${4:?usage}" && pwd)
shared=${5:-}

LEVELS="ref avx2 avx512"
work=$(mktemp -d "${TMPDIR:-/tmp}/bf-simd.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The paths this machine runs: ref always, avx2 where the CPU has AVX2 and
# FMA, avx512 where it has AVX-512 too.
levels=()
for l in $LEVELS; do
  got=$(BITFLIP_SIMD=$l "$bitflip" --version | sed -n 's/.*(cpu path \([a-z0-9]*\)).*/\1/p')
  if [ "$got" = "$l" ]; then
    levels+=("$l")
  elif [ "$l" = ref ]; then
    echo "simd_levels: FAIL: BITFLIP_SIMD=ref runs path '$got', not the reference" >&2
    exit 1
  else
    echo "simd_levels: path $l: not on this CPU (bitflip runs '$got' when asked for it); compared: the others"
  fi
done
echo "simd_levels: CPU paths compared: ${levels[*]}"
simd=()
for l in "${levels[@]}"; do [ "$l" = ref ] || simd+=("$l"); done

# Campaign specs, written with absolute paths into the work folder.
c=$fixtures/conformance r=$fixtures/real
spec() {  # NAME MODEL DATA FAULTS [EXTRA]
  printf '{"model": "%s", "dataset": "%s", "seed": 11, %s "faults": %s}\n' "$2" "$3" "${5:-}" "$4" \
    > "$work/$1.json"
}
spec digits_bits "$c/demo_digits.onnx" "$c/demo_digits.eval.safetensors" \
  '{"target": "weights", "model": "bitflip", "bits": 1, "representation": "fp32"}' '"trials": 1600, "sampling": "per_bit",'
spec digits_fp16_acts "$c/demo_digits.onnx" "$c/demo_digits.eval.safetensors" \
  '{"target": "activations", "model": "bitflip", "bits": 2, "representation": "fp16"}' '"trials": 300,'
# 50 input faults: each one's trial runs the whole CNN from the input, every
# kernel of the pass on faulty data (200 were 12.5 CPU-s on the reference path)
spec digits_inputs_bf16 "$c/demo_digits.onnx" "$c/demo_digits.eval.safetensors" \
  '{"target": "inputs", "model": "bitflip", "bits": 1, "representation": "bf16"}' '"trials": 50,'
spec digits_int8 "$c/demo_digits.onnx" "$c/demo_digits.eval.safetensors" \
  '{"target": "weights", "model": "bitflip", "bits": 1, "representation": "int8"}' '"trials": 300,'
spec dlrm_ber "$c/dlrm_ops_op13.onnx" "$c/dlrm_ops_op13.eval.safetensors" \
  '{"target": "weights", "model": "ber", "rates": [1e-6, 1e-4, 1e-3], "repeats": 3}' '"metrics": ["auc", "logloss"],'
spec dlrm_mitigations "$c/dlrm_ops_op13.onnx" "$c/dlrm_ops_op13.eval.safetensors" \
  '{"target": "weights", "model": "ber", "rates": [1e-5, 1e-3], "repeats": 3}' \
  '"mitigations": ["clip", "sbp", {"name": "abft-correct", "abft": {"mode": "correct"}}],'
spec mobilenet "$r/mobilenet_v2.onnx" "$r/mobilenet_v2.eval.safetensors" \
  '{"target": "weights", "model": "bitflip", "bits": 1, "representation": "fp32"}' '"trials": 120,'
spec mobilenet_stuck "$r/mobilenet_v2.onnx" "$r/mobilenet_v2.eval.safetensors" \
  '{"target": "activations", "model": "stuck_at_1", "representation": "fp32"}' '"trials": 60,'
spec resnet "$r/resnet_basic.onnx" "$r/resnet_basic.eval.safetensors" \
  '{"target": "weights", "model": "bitflip", "bits": 1, "representation": "fp32"}' '"trials": 120,'
spec lstm "$r/lstm.onnx" "$r/lstm.eval.safetensors" \
  '{"target": "weights", "model": "bitflip", "bits": 1, "representation": "fp32"}' '"trials": 120,'
spec bert "$r/bert_tiny.onnx" "$r/bert_tiny.eval.safetensors" \
  '{"target": "weights", "model": "bitflip", "bits": 1, "representation": "fp32"}' '"trials": 120,'
spec bert_acts "$r/bert_tiny.onnx" "$r/bert_tiny.eval.safetensors" \
  '{"target": "activations", "model": "bitflip", "bits": 1, "representation": "fp32"}' '"trials": 80,'

# The reference path runs a part of these campaigns' trials (a shard:
# digits_bits 0/3 is trials 0, 3, 6, ...), the SIMD paths every trial as
# well as that part; the part is compared on every path, the whole campaign
# between the SIMD paths. Why: the reference kernels are plain loops in the
# ONNX order with no lanes, blocks or tails, so a trial takes the same code
# wherever in a tensor its fault lands: what picks the code there is the
# faulted tensor and bit, and each part reaches every tensor and every bit
# the whole campaign reaches (checked below, from the SIMD paths' records);
# on the SIMD paths where a fault lands (its lane, a block's tail) picks the
# code too, so they run every trial. On the reference path the three were 13
# of simd_levels' ~60 CPU-s whole (tests/README.md, "The eighteenth round").
# The shards were picked for that coverage (digits_inputs_bf16's 50 trials
# and resnet's have no such part: they run whole everywhere).
SHARDED="digits_bits:0/3 digits_fp16_acts:0/5 digits_int8:0/3"

fail=0
run() {  # LEVEL TAG COMMAND...: stdout and stderr to the work folder, a failure reported
  local level=$1 tag=$2
  shift 2
  if ! BITFLIP_SIMD=$level "$@" > "$work/$level.$tag.log" 2>&1; then
    echo "simd_levels: FAIL: $tag under BITFLIP_SIMD=$level failed:" >&2
    tail -5 "$work/$level.$tag.log" >&2
    fail=1
  fi
}

sets=(conformance rnn quant real)
for l in "${levels[@]}"; do
  for s in "${sets[@]}"; do
    run "$l" "conf_$s" "$conformance" --dump "$work/$l.conf_$s.bin" "$fixtures/$s"
  done
  run "$l" conf_batch7 "$conformance" --batch 7 --dump "$work/$l.conf_batch7.bin" "$fixtures/conformance"
  if [ -n "$shared" ] && [ -f "$shared/MANIFEST.json" ]; then
    run "$l" conf_shared "$conformance" --dump "$work/$l.conf_shared.bin" "$shared"
  fi
  run "$l" ops "$opcheck" --dump "$work/$l.ops.bin" "$fixtures/ops"
  for f in "$work"/*.json; do
    name=$(basename "$f" .json)
    case $name in ref.*|avx2.*|avx512.*) continue ;; esac
    # SHARDED's whole campaigns on the SIMD paths (where two run), their
    # part (the shard) on every path, the reference too: see SHARDED above
    part=$(for p in $SHARDED; do [ "${p%%:*}" = "$name" ] && echo "${p#*:}"; done)
    if [ -n "$part" ]; then
      run "$l" "shard_$name" "$bitflip" run --local "$f" --threads 2 --shard "$part" \
        --out "$work/$l.shard_$name.json" --trials-out "$work/$l.shard_$name.jsonl"
      [ "$l" = ref ] || [ "${#simd[@]}" -lt 2 ] && continue
    fi
    run "$l" "run_$name" "$bitflip" run --local "$f" --threads 2 --out "$work/$l.run_$name.json" \
      --trials-out "$work/$l.run_$name.jsonl"
  done
  # the exact engine (every trial a full pass) on two of them; on the digits
  # CNN a fifth of the trials (a shard: every 5th), as its full passes are
  # the reference path's slowest (17 of its 70 CPU-s for the other 240); and
  # of that fifth, the reference path runs a part (0/10: every 10th trial, 30
  # full passes, 2.6 of 5.2 CPU-s there), compared on every path, as SHARDED
  # above: it reaches every tensor and bit the fifth reaches (checked below)
  for name in resnet digits_fp16_acts; do
    shard=()
    if [ "$name" = digits_fp16_acts ]; then
      shard=(--shard 0/5)
      run "$l" "exact_part_$name" "$bitflip" run --local "$work/$name.json" --exact --threads 2 --shard 0/10 \
        --out "$work/$l.exact_part_$name.json" --trials-out "$work/$l.exact_part_$name.jsonl"
      [ "$l" = ref ] || [ "${#simd[@]}" -lt 2 ] && continue
    fi
    run "$l" "exact_$name" "$bitflip" run --local "$work/$name.json" --exact --threads 2 "${shard[@]}" \
      --out "$work/$l.exact_$name.json" --trials-out "$work/$l.exact_$name.jsonl"
  done
done

# A result document's measured times (a mitigation's cost: golden_seconds,
# time_ratio) are the clock's, not the engine's: left out of the comparison.
# One Python for all the documents (a start each was 63 starts, ~5 CPU-s).
/usr/bin/python3 - "$work"/*.run_*.json "$work"/*.shard_*.json "$work"/*.exact_*.json <<'PY' || fail=1
import json, sys
def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if not (k.endswith("_seconds") or k == "time_ratio")}
    return [strip(v) for v in o] if isinstance(o, list) else o
for p in sys.argv[1:]:
    with open(p) as f:
        doc = json.load(f)
    with open(p, "w") as f:
        json.dump(strip(doc), f, sort_keys=True)
PY

# Every output of the reference path against each other path's; then the
# outputs the reference path does not make (SHARDED's whole campaigns)
# between the SIMD paths, the first against the others.
first=${levels[0]}
compared=0
compare() {  # FIRST OTHER_LEVELS...: FIRST's outputs against each of the others'
  local first=$1 f tail l
  shift
  for f in "$work/$first".*; do
    case $f in *.log) continue ;; esac
    tail=${f#"$work/$first".}
    [ "$first" != "$ref_first" ] && [ -e "$work/$ref_first.$tail" ] && continue
    if [ ! -s "$f" ]; then
      echo "simd_levels: FAIL: $tail under $first is empty: nothing would be compared" >&2
      fail=1
      continue
    fi
    for l in "$@"; do
      if cmp -s "$f" "$work/$l.$tail"; then
        compared=$((compared + 1))
      else
        echo "simd_levels: FAIL: $tail differs between BITFLIP_SIMD=$first and $l: $(cmp "$f" "$work/$l.$tail" 2>&1)" >&2
        fail=1
      fi
    done
  done
}
ref_first=$first
compare "$first" "${levels[@]:1}"
if [ "$first" = ref ] && [ "${#simd[@]}" -ge 2 ]; then
  compare "${simd[0]}" "${simd[@]:1}"
  # the whole campaigns must be there (a path that made none would leave
  # the SIMD paths compared on the part only), and each part must reach
  # every tensor and bit its whole campaign reaches
  /usr/bin/python3 - "$work" "${simd[0]}" $SHARDED exact_digits_fp16_acts=exact_part_digits_fp16_acts <<'PY' || fail=1
import json, os, sys
work, level = sys.argv[1:3]
bad = 0
def reach(path):
    with open(path) as f:
        return {(x["tensor"], b) for line in f for x in json.loads(line)["faults"] for b in x["bits"]}
for p in sys.argv[3:]:
    if "=" in p:   # WHOLE=PART: the files' tags (the exact part)
        name, part = p.split("=")
        whole = os.path.join(work, "%s.%s.jsonl" % (level, name))
        part_file = os.path.join(work, "ref.%s.jsonl" % part)
    else:          # NAME:SHARD of SHARDED
        name, part = p.split(":")
        whole = os.path.join(work, "%s.run_%s.jsonl" % (level, name))
        part_file = os.path.join(work, "ref.shard_%s.jsonl" % name)
    if not os.path.isfile(whole) or os.path.getsize(whole) == 0:
        print("simd_levels: FAIL: no whole %s under %s" % (name, level), file=sys.stderr)
        bad = 1
        continue
    got, part_got = reach(whole), reach(part_file)
    tensors = {t for t, _ in got} - {t for t, _ in part_got}
    bits = {b for _, b in got} - {b for _, b in part_got}
    if tensors or bits:
        print("simd_levels: FAIL: %s's shard %s misses tensors %s, bits %s of the whole campaign: pick another"
              % (name, part, sorted(tensors), sorted(bits)), file=sys.stderr)
        bad = 1
sys.exit(bad)
PY
fi
trials=$(cat "$work/$first".*.jsonl 2>/dev/null | wc -l)
echo "simd_levels: $compared outputs compared byte for byte across ${levels[*]} ($trials trial records on $first's path)"
if [ "$first" = ref ] && [ "${#simd[@]}" -ge 2 ]; then
  echo "simd_levels: and $(cat "$work/${simd[0]}".*.jsonl 2>/dev/null | wc -l) on each of ${simd[*]}"
fi
if [ "${#levels[@]}" -lt 2 ]; then
  echo "simd_levels: only the reference path runs on this CPU: its results were checked to run, not compared"
fi
[ $fail = 0 ] && echo "simd_levels: the same bits on every CPU path" || echo "simd_levels: differences, see above"
exit $fail
