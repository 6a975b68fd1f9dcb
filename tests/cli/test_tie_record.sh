#!/usr/bin/env bash
# --tie-order is recorded where it decides something, and a record re-runs as
# it ran (docs/OPS.md, "Ties"):
#   - a model whose TopK sees ties everywhere (x * w over three levels, the
#     indices of the top 2 of 256 as a classifier's logits), made here: its
#     golden accuracy is 0.5 in the onnx order (the lower index first) and
#     0.5625 in PyTorch's (torch.topk's partial sort), worked out by hand
#     below from the data (libstdc++'s heap select written out; torch.topk
#     gives the same), not from bitflip's output;
#   - `bitflip run --tie-order O`: the result's campaign.tie_order and every
#     trial record's tie_order are O; the default records onnx and is the
#     onnx run byte for byte; the run again with the order read back from the
#     record gives the same result and trial records, byte for byte;
#   - `bitflip eval --json` says tie_order, with the golden accuracy of that
#     order; `bitflip plan` prints it;
#   - a model without TopK or NMS (digits) records nothing;
#   - `bitflip report --trial` on a detector's result (SSDlite: TopK and NMS)
#     reads the order back: a value other than onnx or pytorch is refused
#     naming the field, pytorch re-runs the trial.
# usage: test_tie_record.sh BITFLIP FIXTURES_DIR (exit 77 without numpy and onnx)
set -u
BF=$1
FX=$2
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"

$PY - "$tmp" <<'PYEOF' || exit $?
import json, struct, sys
try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print(f"test_tie_record: SKIP: {e}, so the model with ties is not made")
    sys.exit(77)
tmp = sys.argv[1]
n, k, N = 256, 2, 16
rng = np.random.default_rng(5)
x = rng.integers(0, 3, size=(N, n)).astype(np.float32)   # three levels: ties in every row
labels = (np.arange(N) % k).astype(np.int64)
nodes = [helper.make_node("Mul", ["x", "w"], ["y"]),
         helper.make_node("TopK", ["y", "k"], ["v", "i"], axis=-1),
         helper.make_node("Cast", ["i"], ["logits"], to=TensorProto.FLOAT)]
g = helper.make_graph(nodes, "ties", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, n])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [N, k])],
                      [numpy_helper.from_array(np.ones(n, np.float32), "w"),
                       numpy_helper.from_array(np.array([k], np.int64), "k")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="test"), f"{tmp}/ties.onnx")
hdr, blobs, off = {}, [], 0
for name, v in (("x", x), ("labels", labels)):
    b = v.tobytes()
    hdr[name] = {"dtype": "F32" if v.dtype == np.float32 else "I64", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
    off += len(b)
    blobs.append(b)
h = json.dumps(hdr).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(f"{tmp}/ties.eval.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
json.dump({"model": f"{tmp}/ties.onnx", "dataset": f"{tmp}/ties.eval.safetensors", "seed": 3, "trials": 40,
           "faults": {"target": "weights", "tensors": ["w"], "model": "bitflip", "bits": 1}}, open(f"{tmp}/spec.json", "w"))
# The golden accuracy of each order, by hand. A row's prediction is the arg-max
# of its k kept indices, i.e. the position of the largest index kept.
# onnx: the top k in value order, equal values the lower index first.
def onnx_pred(r):
    order = sorted(range(n), key=lambda j: (-r[j], j))[:k]
    return max(range(k), key=lambda p: order[p])
# pytorch: k * 64 <= n (128 <= 256), so torch.topk runs std::partial_sort over (value, index)
# pairs with a comparator on the value alone: libstdc++'s heap select (a max-heap
# of the first k by "greater", each later element that beats the heap's top
# replacing it), then sort_heap. Written out here as libstdc++ does it.
def torch_pred(r):
    a = [(float(r[j]), j) for j in range(n)]
    comp = lambda u, v: u[0] > v[0]   # "less" of the heap: larger value first
    def adjust(first, hole, length, val):
        top, child = hole, hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if comp(a[first + child], a[first + child - 1]): child -= 1
            a[first + hole] = a[first + child]; hole = child
        if (length & 1) == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            a[first + hole] = a[first + child - 1]; hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and comp(a[first + parent], val):
            a[first + hole] = a[first + parent]; hole = parent; parent = (hole - 1) // 2
        a[first + hole] = val
    for parent in range((k - 2) // 2, -1, -1):   # make_heap
        adjust(0, parent, k, a[parent])
    for i in range(k, n):                        # heap select
        if comp(a[i], a[0]):
            val = a[i]; a[i] = a[0]; adjust(0, 0, k, val)
    for last in range(k - 1, 0, -1):             # sort_heap
        val = a[last]; a[last] = a[0]; adjust(0, 0, last, val)
    order = [j for _, j in a[:k]]
    return max(range(k), key=lambda p: order[p])
acc = {o: sum(int(f(x[s]) == labels[s]) for s in range(N)) / N for o, f in (("onnx", onnx_pred), ("pytorch", torch_pred))}
json.dump(acc, open(f"{tmp}/by_hand.json", "w"))
PYEOF

field() {   # field FILE EXPR: a value of the JSON document in FILE, by a Python expression over d
  $PY -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
same() { if cmp -s "$2" "$3"; then passes=$((passes+1)); else echo "FAIL $1: $2 and $3 differ"; fails=$((fails+1)); fi; }
is() {   # is NAME GOT WANT
  if [ "$2" = "$3" ]; then passes=$((passes+1)); else echo "FAIL $1: got '$2', wanted '$3'"; fails=$((fails+1)); fi; }

run() {   # run NAME ARGS...: a local campaign of spec.json, its result and trial records as $tmp/NAME.*
  local name=$1; shift
  check "run_$name" 0 "$BF" run --local "$tmp/spec.json" --format json --out "$tmp/$name.json" \
    --trials-out "$tmp/$name.jsonl" --progress none "$@"
}
run onnx --tie-order onnx
run pytorch --tie-order=pytorch
run default
for o in onnx pytorch; do
  is "result_$o" "$(field "$tmp/$o.json" 'd["campaign"].get("tie_order")')" "$o"
  is "trials_$o" "$($PY -c 'import json, sys; print(sorted({json.loads(l).get("tie_order") for l in open(sys.argv[1])}))' "$tmp/$o.jsonl")" "['$o']"
  is "golden_$o" "$(field "$tmp/$o.json" 'd["golden"]["accuracy"]')" "$(field "$tmp/by_hand.json" "d['$o']")"
  # the re-run from the record: the order read back from the result
  run "again_$o" --tie-order "$(field "$tmp/$o.json" 'd["campaign"]["tie_order"]')"
  same "rerun_result_$o" "$tmp/$o.json" "$tmp/again_$o.json"
  same "rerun_trials_$o" "$tmp/$o.jsonl" "$tmp/again_$o.jsonl"
  check "eval_$o" 0 "$BF" eval "$tmp/ties.onnx" "$tmp/ties.eval.safetensors" --json --tie-order "$o"
  cp "$tmp/stdout" "$tmp/eval_$o.json"
  is "eval_tie_$o" "$(field "$tmp/eval_$o.json" 'd.get("tie_order")')" "$o"
  is "eval_acc_$o" "$(field "$tmp/eval_$o.json" 'd["accuracy"]')" "$(field "$tmp/by_hand.json" "d['$o']")"
  check "plan_$o" 0 "$BF" plan "$tmp/spec.json" --tie-order "$o"
  contains "plan_$o" "ties              $o order (--tie-order)"
done
# the two orders differ here (by hand: 0.5 and 0.5625), so the record is what makes a re-run the same
is orders_differ "$(field "$tmp/by_hand.json" 'd["onnx"] != d["pytorch"]')" True
same default_is_onnx "$tmp/onnx.json" "$tmp/default.json"
same default_trials_onnx "$tmp/onnx.jsonl" "$tmp/default.jsonl"

# a model without TopK or NMS: nothing recorded
digits=$FX/conformance/demo_digits.onnx
check run_digits 0 "$BF" run --local "$FX/specs/digits_weights.json" --shard 0/24 --format json --out "$tmp/digits.json" \
  --trials-out "$tmp/digits.jsonl" --progress none --tie-order pytorch
is digits_result "$(field "$tmp/digits.json" '"tie_order" in d["campaign"]')" False
is digits_trials "$(grep -c tie_order "$tmp/digits.jsonl")" 0
check eval_digits 0 "$BF" eval "$digits" "$FX/conformance/demo_digits.eval.safetensors" --json --tie-order pytorch
is digits_eval "$(field "$tmp/stdout" '"tie_order" in d')" False

# a detector's trial re-run reads the order back from the result
cat >"$tmp/det.json" <<JSON
{"model": "$FX/det/ssdlite.onnx", "dataset": "$FX/det/ssdlite.eval.safetensors", "trials": 4, "seed": 5,
 "faults": {"target": "weights", "model": "bitflip"}}
JSON
check run_det 0 "$BF" run --local "$tmp/det.json" --tie-order pytorch --format json --out "$tmp/det.res.json" --progress none
is det_result "$(field "$tmp/det.res.json" 'd["campaign"].get("tie_order")')" pytorch
check report_det 0 "$BF" report "$tmp/det.res.json" --spec "$tmp/det.json" --trial 1 --image 0 -o "$tmp/det.html"
$PY -c 'import json, sys; d = json.load(open(sys.argv[1])); d["campaign"]["tie_order"] = "stable"; json.dump(d, open(sys.argv[2], "w"))' \
  "$tmp/det.res.json" "$tmp/det_bad.res.json"
check report_bad_tie 2 "$BF" report "$tmp/det_bad.res.json" --spec "$tmp/det.json" --trial 1 --image 0 -o "$tmp/bad.html"
contains report_bad_tie "campaign.tie_order must be \"onnx\" or \"pytorch\""

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
