#!/usr/bin/python3
"""bitflip-conformance's rule for NMS near-ties (docs/OPS.md, "NMS near-ties"; tests/fixtures/
README.md, "NMS near-ties"), checked both ways on a hand-built one-image detector.

The detector is written here with onnx.helper: per image, 5 candidates x [5, 5] (x1, y1, x2,
y2, score), boxes = x[:, :4] + b (b a float32 [4] initializer, zero: a fault flips one of its
bits), one NonMaxSuppression (IoU threshold 0.5, no score threshold), and the kept boxes and
scores gathered in NMS's order. The reference is a greedy NMS written here in numpy from
torchvision's definition (keep the best score, drop every later box whose IoU with it is
> 0.5), on values that are exact in float32, so it is the engine's answer too. The images:

- image 0: two overlapping boxes B (score 0.900005) and A (0.9) 5e-6 apart, within the
  runner's NMS score margin (1e-5 relative, the fixtures' knife-edge margin): NMS keeps B and suppresses A, a decision another engine's last bits could
  take the other way; a box C (0.95) away from them comes first, a box D (0.5) after;
- image 1: the same with B at 0.8 (0.1 apart): no near tie;
- image 2: a box F whose IoU with A is exactly 0.5, the threshold (kept: not > 0.5): a decision
  within 1e-4 of the threshold, at F's score 0.6.

So the runner must cut image 0 at row 1 (B) and image 2 at row 2 (F), check the rows before
in place; after the cut, the near tie's reach (the boxes linked to its boxes by overlaps past
the IoU threshold less the margin: B, A and E in image 0, A and F in image 2) is unverifiable,
and the rows outside it (D in image 0; D and a box G at 0.2 in image 2) are still checked, as a
set (tests/fixtures/README.md, "NMS near-ties"); image 1 is checked whole. Cases:

- the unedited reference passes, "2 images cut (image 0 from row 1, image 2 from row 2), 3 rows
  after the cuts checked outside the near ties' reach, 2 unverifiable";
- image 0's reference as another engine would give it (A kept instead of B) passes, and so do
  a moved box in a near tie's reach (image 0 row 1, image 2 row 2) and a row fewer there;
- a box moved outside the reach after a cut (image 0 row 2, image 2 row 3: D), a row of it
  missing, or an extra row there is a MISMATCH (the twentieth session's cut passed these as
  unverifiable);
- a box moved before a cut (image 0 row 0, image 2 row 1) is a MISMATCH, and so is one in
  image 1 (no near tie), and a score moved before a cut;
- the fault (b[0] bit 30: 0 -> 2, every x1 moved by 2; the same near ties) under the same rule:
  a box moved in the reach passes, one before a cut or outside the reach fails (directly and
  in the campaign path).

Usage: nms_near_ties.py BITFLIP_CONFORMANCE (exit 77: no onnx module)"""
import json
import os
import struct
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_edits import RefEdits  # noqa: E402

try:
    import onnx
    from onnx import TensorProto, helper
except ImportError:
    print("SKIP: no onnx module")
    sys.exit(77)

NAME = "nmstie"
C = [20, 20, 30, 30, 0.95]
A = [0, 0, 10, 10, 0.9]
D = [40, 40, 50, 50, 0.5]
E = [0, 0, 10, 10.2, 0.3]
IMAGES = np.array([
    [C, [0, 0, 10, 10.5, 0.900005], A, D, E],
    [C, [0, 0, 10, 10.5, 0.8], A, D, E],
    [C, A, [0, 0, 10, 20, 0.6], D, [60, 60, 70, 70, 0.2]],
], dtype=np.float32)


def model():
    i64 = lambda name, v: helper.make_tensor(name, TensorProto.INT64, [len(v)], v)  # noqa: E731
    inits = [helper.make_tensor("b", TensorProto.FLOAT, [4], [0, 0, 0, 0]),
             i64("s0", [0]), i64("s4", [4]), i64("s5", [5]), i64("ax2", [2]), i64("ax0", [0]), i64("two", [2]),
             i64("one", [1]), i64("minus1", [-1]), i64("max_out", [100]),
             helper.make_tensor("iou", TensorProto.FLOAT, [1], [0.5])]
    nodes = [
        helper.make_node("Slice", ["x", "s0", "s4", "ax2"], ["xb"]),
        helper.make_node("Add", ["xb", "b"], ["bx"]),                      # [1, N, 4]
        helper.make_node("Slice", ["x", "s4", "s5", "ax2"], ["xs"]),       # [1, N, 1]
        helper.make_node("Transpose", ["xs"], ["sc"], perm=[0, 2, 1]),     # [1, 1, N]
        helper.make_node("NonMaxSuppression", ["bx", "sc", "max_out", "iou"], ["sel"]),
        helper.make_node("Gather", ["sel", "two"], ["idx2"], axis=1),      # [K, 1]
        helper.make_node("Reshape", ["idx2", "minus1"], ["idx"]),          # [K]
        helper.make_node("Squeeze", ["bx", "ax0"], ["bx2"]),               # [N, 4]
        helper.make_node("Gather", ["bx2", "idx"], ["boxes"], axis=0),
        helper.make_node("Reshape", ["xs", "minus1"], ["s1"]),             # [N]
        helper.make_node("Gather", ["s1", "idx"], ["scores"], axis=0),
    ]
    g = helper.make_graph(nodes, NAME, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5, 5])],
                          [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["k", 4]),
                           helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["k"])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def iou(a, b):
    """torchvision's nms kernel's IoU, in float32"""
    f = np.float32
    w = max(f(0), min(a[2], b[2]) - max(a[0], b[0]))
    h = max(f(0), min(a[3], b[3]) - max(a[1], b[1]))
    inter = f(w * h)
    area = lambda r: f((r[2] - r[0]) * (r[3] - r[1]))  # noqa: E731
    return f(inter / f(area(a) + area(b) - inter))


def nms(x, b):
    """greedy NMS as torchvision defines it: best score first, a later box dropped when its
    IoU with a kept one is > 0.5"""
    boxes = (x[:, :4] + b).astype(np.float32)
    order = sorted(range(len(x)), key=lambda i: -x[i, 4])
    kept = []
    for i in order:
        if all(iou(boxes[k], boxes[i]) <= np.float32(0.5) for k in kept):
            kept.append(i)
    return {"boxes": [[float(v) for v in boxes[i]] for i in kept], "scores": [float(x[i, 4]) for i in kept]}


def safetensors(path, name, arr):
    head = json.dumps({name: {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [0, arr.nbytes]}}).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + arr.tobytes())


def write(d):
    onnx.save(model(), os.path.join(d, f"{NAME}.onnx"))
    safetensors(os.path.join(d, f"{NAME}.eval.safetensors"), "x", IMAGES)
    zero, fault_b = np.zeros(4, np.float32), np.array([2, 0, 0, 0], np.float32)   # 0.0 with bit 30 set: 2.0
    ref = {"model": f"{NAME}.onnx", "task": "detection", "inputs": ["x"], "outputs": ["boxes", "scores"],
           "golden": [nms(x, zero) for x in IMAGES],
           "faults": [{"param": "b", "index": 0, "bit": 30, "old": 0.0, "new": 2.0,
                       "outputs": [nms(x, fault_b) for x in IMAGES]}]}
    json.dump(ref, open(os.path.join(d, f"{NAME}.ref.json"), "w"))
    return ref


def main():
    conf = sys.argv[1]
    with tempfile.TemporaryDirectory() as src:
        base = write(src)
        g = base["golden"]
        # the images are what the docstring says: C, B, D kept in image 0; C, A, D in 1; F kept in 2
        assert g[0]["scores"] == [float(np.float32(v)) for v in (0.95, 0.900005, 0.5)], g[0]
        assert g[1]["scores"] == [float(np.float32(v)) for v in (0.95, 0.9, 0.5)], g[1]
        assert len(g[2]["scores"]) == 5 and g[2]["scores"][2] == float(np.float32(0.6)), g[2]
        with RefEdits(conf, src, NAME) as t:
            def at(ref, i, where):
                return ref["golden"][i] if where == "golden" else ref["faults"][0]["outputs"][i]

            def move(i, r, where="golden", key="boxes"):
                def edit(ref):
                    m = at(ref, i, where)
                    if key == "boxes":
                        m["boxes"][r] = [v + 1.0 for v in m["boxes"][r]]
                    else:
                        m["scores"][r] += 0.01
                    return f"image {i} row {r}'s {key} moved ({where})"
                return edit

            def other_choice(ref):
                m = ref["golden"][0]
                m["boxes"][1], m["scores"][1] = [0.0, 0.0, 10.0, 10.0], float(np.float32(0.9))
                return "image 0 as an engine that kept A, not B, gives it"

            def drop(i, r):
                def edit(ref):
                    m = ref["golden"][i]
                    del m["boxes"][r], m["scores"][r]
                    return f"image {i} without row {r}"
                return edit

            def extra(ref):
                m = ref["golden"][0]
                m["boxes"].append([80.0, 80.0, 90.0, 90.0])
                m["scores"].append(float(np.float32(0.4)))
                return "image 0 with an extra box at 0.4 after its cut, overlapping nothing"

            t.case("unedited", lambda ref: "PyTorch-style reference as is", True,
                   "NMS near-ties: 2 images cut (image 0 from row 1, image 2 from row 2), 3 rows after the cuts "
                   "checked outside the near ties' reach, 2 unverifiable")
            t.case("other choice", other_choice, True)
            t.case("in the reach, image 0", move(0, 1), True)
            t.case("in the reach, image 2", move(2, 2), True)
            t.case("row fewer in the reach", drop(2, 2), True)
            t.case("outside the reach after the cut, image 0", move(0, 2), False)
            t.case("outside the reach after the cut, image 2", move(2, 3), False)
            t.case("row fewer outside the reach", drop(0, 2), False)
            t.case("extra row outside the reach", extra, False)
            t.case("before the cut, image 0", move(0, 0), False)
            t.case("before the cut, image 2", move(2, 1), False)
            t.case("score before the cut", move(0, 0, key="scores"), False)
            t.case("no near tie, image 1", move(1, 1), False)
            t.case("fault: in the reach", move(0, 1, "fault"), True)
            t.case("fault: outside the reach after the cut", move(0, 2, "fault"), False)
            t.case("fault: before the cut", move(0, 0, "fault"), False)
            t.case("fault: no near tie", move(1, 2, "fault"), False)
            if t.failures:
                print(f"{t.failures} cases wrong")
                return 1
    print("all cases as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
