#!/usr/bin/python3
"""bitflip-conformance's scales from the decode (tests/fixtures/README.md, "Scales from the
decode"), checked both ways on a hand-built one-image box decoder.

The detector is written here with onnx.helper: per image x [1, 9] = a proposal (x1, y1, x2, y2),
its deltas (tx, ty, tw, th) and a score; torchvision's BoxCoder.decode (weights 10, 10, 5, 5; dw
and dh clamped at log(1000 / 16)), the box clipped to [0, 160], one NonMaxSuppression (so the
graph is a one-image detector with rows of data-dependent count) and the kept box and score.

- image 0, the hand-worked case: a 1.95 px sliver proposal at the right edge [158.05, 0, 160,
  160] with tw = 50 (dw = 10, clamped to log 62.5: Keypoint R-CNN's fault 0, docs/perf/
  detectors.md). The decoded width is 62.5 x 1.95 = 121.875 around cx = 159.025: x1' =
  98.0875, x2' = 220 clipped to 160, y1' = 0, y2' = 160.
- image 1: an ordinary proposal [20, 30, 60, 90], deltas (1, -2, 0.5, -0.5): no amplification.

The reference is "a right answer" as another engine gives it: the decode of a proposal whose
corners that engine had within their own tolerance (1e-4 of 160 = 0.016 px), here x1 0.004 px
larger (2.5e-5 relative, what the box head's rounding leaves on a proposal: bitflip's was
1.5e-3 px on Keypoint R-CNN). By hand, x1' = cx + dx w - exp(dw) w / 2 moves by
d x1'/d x1 = 1/2 - dx + exp(dw)/2 = 31.75 times that: 0.127 px, 7.9 times the row's tolerance
(1e-4 of 160): the old rule fails a right answer. The scales: moving each proposal corner by
its allowance a = 1e-4 x 160 in the worst signs moves x1' by (|1/2 - dx + E/2| + |1/2 + dx -
E/2|) a = E a = 62.5 x 0.016 = 1.0 px (E = exp(dw)), so its scale is 62.5 x 160 = 10000; y1'
and y2' by a (gain 1: scale 160, the row's own); x2' is clipped (gain 0). Cases:

- without scales, the right answer is a MISMATCH (the old rule, kept for references without
  the field);
- with the hand-worked scales it passes, 1 value rescued, and so does the campaign path;
- x1' planted 10 tolerances off (10 px with the scale) fails; so does y1' moved by 3 of the
  row's tolerances (0.048 px: its scale is the row's, not x1's) and image 1's x1 moved past its
  row's tolerance (no widening there);
- the same under the fault (the tw initializer's bias bit flipped: another tw), and a fault
  whose scale is missing keeps the old rule;
- a scale that widens a value's tolerance past --max-widen (100) leaves it checked against
  its row's own tolerance alone (y1 agreeing: checked), unverifiable outside it:
  listed per output and not compared, and the list NOT VERIFIED (exit 3) when over
  --max-unverifiable's share of an output (1%), passed with its count under a larger share,
  while a checkable value of the same row 10 tolerances off still fails; the hand-worked 62.5
  times is checked, unverifiable under --max-widen 50, and --max-widen 0 checks everything;
- malformed scales (a row too short, a negative scale, an output the graph has not, too few
  images) are refused as malformed, never read as none;
- if torch and torchvision are present: the generator's scales (bench/heldout_det.py's
  corner_allowance and corner_moves over torchvision's own BoxCoder.decode) equal the
  hand-worked ones to 1e-3.

Usage: decode_scale.py BITFLIP_CONFORMANCE (exit 77: no onnx module)"""
import json
import math
import os
import struct
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ref_edits import RefEdits  # noqa: E402

try:
    import onnx
    from onnx import TensorProto, helper
except ImportError:
    print("SKIP: no onnx module")
    sys.exit(77)

NAME = "decode"
W = 160.0
CLIP = math.log(1000.0 / 16)
IMAGES = np.array([[[158.05, 0, 160, 160, 0, 0, 50, 0, 0.9]],
                   [[20, 30, 60, 90, 1, -2, 0.5, -0.5, 0.8]]], np.float32)
DELTA = 0.004          # the reference engine's proposal x1, this much larger (within 0.016)


def model():
    f = lambda name, v: helper.make_tensor(name, TensorProto.FLOAT, [len(v)], v)  # noqa: E731
    i64 = lambda name, v: helper.make_tensor(name, TensorProto.INT64, [len(v)], v)  # noqa: E731
    inits = [f("bias", [0, 0, 0, 0]), f("wts", [10, 10, 5, 5]), f("half", [0.5]), f("clip", [CLIP]),
             f("lo", [0.0]), f("hi", [W]), i64("s0", [0]), i64("s2", [2]), i64("s4", [4]), i64("s8", [8]),
             i64("s9", [9]), i64("ax2", [2]), i64("two", [2]), i64("minus1", [-1]), i64("max_out", [10]),
             helper.make_tensor("iou", TensorProto.FLOAT, [1], [0.5]), i64("shape_s", [1, 1, 1]),
             i64("k4", [-1, 4])]
    sl = lambda src, a, b, out: helper.make_node("Slice", [src, a, b, "ax2"], [out])  # noqa: E731
    nodes = [
        sl("x", "s0", "s2", "p_lo"), sl("x", "s2", "s4", "p_hi"),           # [1, 1, 2] each
        sl("x", "s4", "s8", "t_raw"), sl("x", "s8", "s9", "sc"),
        helper.make_node("Add", ["t_raw", "bias"], ["t"]),                  # a fault flips bias
        helper.make_node("Div", ["t", "wts"], ["d"]),                       # dx, dy, dw, dh
        sl("d", "s0", "s2", "dxy"), sl("d", "s2", "s4", "dwh0"),
        helper.make_node("Min", ["dwh0", "clip"], ["dwh"]),
        helper.make_node("Sub", ["p_hi", "p_lo"], ["wh"]),
        helper.make_node("Mul", ["wh", "half"], ["hwh"]),
        helper.make_node("Add", ["p_lo", "hwh"], ["c"]),
        helper.make_node("Mul", ["dxy", "wh"], ["off"]),
        helper.make_node("Add", ["off", "c"], ["pc"]),
        helper.make_node("Exp", ["dwh"], ["e"]),
        helper.make_node("Mul", ["e", "wh"], ["pwh"]),
        helper.make_node("Mul", ["pwh", "half"], ["hp"]),
        helper.make_node("Sub", ["pc", "hp"], ["b_lo"]),
        helper.make_node("Add", ["pc", "hp"], ["b_hi"]),
        helper.make_node("Concat", ["b_lo", "b_hi"], ["b4"], axis=2),
        helper.make_node("Max", ["b4", "lo"], ["b4a"]),
        helper.make_node("Min", ["b4a", "hi"], ["bx"]),                     # [1, 1, 4]
        helper.make_node("Reshape", ["sc", "minus1"], ["s1"]),              # [1]
        helper.make_node("Reshape", ["s1", "shape_s"], ["sc3"]),            # [1, 1, 1]
        helper.make_node("NonMaxSuppression", ["bx", "sc3", "max_out", "iou"], ["sel"]),
        helper.make_node("Gather", ["sel", "two"], ["idx2"], axis=1),
        helper.make_node("Reshape", ["idx2", "minus1"], ["idx"]),
        helper.make_node("Reshape", ["bx", "k4"], ["bx2"]),
        helper.make_node("Gather", ["bx2", "idx"], ["boxes"], axis=0),
        helper.make_node("Gather", ["s1", "idx"], ["scores"], axis=0),
    ]
    g = helper.make_graph(nodes, NAME, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, 9])],
                          [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["k", 4]),
                           helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["k"])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def decode(p, t):
    """torchvision's BoxCoder.decode of one proposal, clipped to [0, W], in float64"""
    (x1, y1, x2, y2), (tx, ty, tw, th) = p, t
    w, h = x2 - x1, y2 - y1
    cx, cy = x1 + 0.5 * w, y1 + 0.5 * h
    dx, dy, dw, dh = tx / 10, ty / 10, min(tw / 5, CLIP), min(th / 5, CLIP)
    pcx, pcy, pw, ph = dx * w + cx, dy * h + cy, math.exp(dw) * w, math.exp(dh) * h
    return [min(max(v, 0.0), W) for v in (pcx - 0.5 * pw, pcy - 0.5 * ph, pcx + 0.5 * pw, pcy + 0.5 * ph)]


def scales(p, t):
    """By hand: each proposal corner moved by its allowance a = 1e-4 max|p| in the worst signs
    moves a decoded corner by G a, G = |d/dlo| + |d/dhi| of the decode: x1' = c + d w - E w / 2
    gives |1/2 - d + E/2| + |1/2 + d - E/2|, x2' = c + d w + E w / 2 gives |1/2 - d - E/2| +
    |1/2 + d + E/2| (E = exp(dw), d = dx; y likewise); the clip to [0, W] takes what lies past
    it. The scale is the move over 1e-4."""
    (x1, y1, x2, y2), (tx, ty, tw, th) = p, t
    w, h = x2 - x1, y2 - y1
    dx, dy, dw, dh = tx / 10, ty / 10, min(tw / 5, CLIP), min(th / 5, CLIP)
    pcx, pcy, pw, ph = dx * w + x1 + 0.5 * w, dy * h + y1 + 0.5 * h, math.exp(dw) * w, math.exp(dh) * h
    raw = (pcx - 0.5 * pw, pcy - 0.5 * ph, pcx + 0.5 * pw, pcy + 0.5 * ph)
    a = 1e-4 * max(abs(v) for v in p)
    clip = lambda v: min(max(v, 0.0), W)  # noqa: E731
    out = []
    for j, (d, e) in enumerate(((dx, math.exp(dw)), (dy, math.exp(dh))) * 2):
        g = abs(0.5 - d + e / 2) + abs(0.5 + d - e / 2) if j < 2 else abs(0.5 - d - e / 2) + abs(0.5 + d + e / 2)
        move = max(abs(clip(raw[j] + g * a) - clip(raw[j])), abs(clip(raw[j] - g * a) - clip(raw[j])))
        out.append(move / 1e-4)
    return out


def safetensors(path, name, arr):
    head = json.dumps({name: {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [0, arr.nbytes]}}).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(head)) + head + arr.tobytes())


FAULT_TW = 50.0 + 2.0       # bias[2] 0 -> 2 (bit 30): tw 52 on image 0 (still clamped), 2.5 on image 1


def refs(bias_tw):
    """per image the reference engine's outputs (its proposal's x1 DELTA larger) and the scales"""
    golden, sc = [], []
    for x in IMAGES:
        p = [float(v) for v in x[0, :4]]
        t = [float(v) for v in x[0, 4:8]]
        t[2] += bias_tw
        q = [p[0] + DELTA] + p[1:]
        golden.append({"boxes": [decode(q, t)], "scores": [float(x[0, 8])]})
        sc.append({"boxes": [scales(p, t)]})
    return golden, sc


def write(d):
    onnx.save(model(), os.path.join(d, f"{NAME}.onnx"))
    safetensors(os.path.join(d, f"{NAME}.eval.safetensors"), "x", IMAGES)
    golden, gs = refs(0.0)
    fo, fs = refs(2.0)
    ref = {"model": f"{NAME}.onnx", "task": "detection", "inputs": ["x"], "outputs": ["boxes", "scores"],
           "golden": golden, "golden_scale": gs,
           "faults": [{"param": "bias", "index": 2, "bit": 30, "old": 0.0, "new": 2.0, "outputs": fo, "scale": fs}]}
    json.dump(ref, open(os.path.join(d, f"{NAME}.ref.json"), "w"))
    return ref


def generator_agrees():
    """bench/heldout_det.py's allowance and sign patterns over torchvision's own BoxCoder.decode
    give the hand-worked scales (the moves of the unclipped corners over 1e-4)."""
    try:
        import torch
        from torchvision.models.detection._utils import BoxCoder
    except ImportError:
        print("skip generator check: no torch / torchvision")
        return True
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench"))
    import heldout_det as H
    coder = BoxCoder((10.0, 10.0, 5.0, 5.0))
    ok = True
    for x in IMAGES:
        p = torch.tensor(x[:, :4], dtype=torch.float64)
        t = torch.tensor(x[:, 4:8], dtype=torch.float64)
        base = coder.decode_single(t, p).clamp(0, W)
        per = torch.zeros(4, 4, dtype=torch.float64)
        for corner, s in H.corner_moves():
            q = p + H.corner_allowance(p) * torch.from_numpy(s).double()
            per[corner] = torch.maximum(per[corner], (coder.decode_single(t, q).clamp(0, W) - base).abs()[0])
        got = (per.sum(0) / H.RTOL).tolist()
        want = scales([float(v) for v in x[0, :4]], [float(v) for v in x[0, 4:8]])
        good = all(abs(g - w) <= 1e-3 * max(1.0, w) for g, w in zip(got, want))
        print(f"{'ok  ' if good else 'FAIL'} generator's scales {[round(g, 3) for g in got]} vs hand-worked "
              f"{[round(w, 3) for w in want]}")
        ok &= good
    return ok


def main():
    conf = sys.argv[1]
    # the hand-worked numbers the docstring states
    g, s = refs(0.0)
    assert abs(decode([158.05, 0, 160, 160], [0, 0, 50, 0])[0] - 98.0875) < 1e-9
    p0 = [float(v) for v in IMAGES[0, 0, :4]]       # 158.05 as float32, as the engine reads it
    assert abs(g[0]["boxes"][0][0] - decode(p0, [0, 0, 50, 0])[0] - 31.75 * DELTA) < 1e-9
    assert [round(v, 6) for v in s[0]["boxes"][0]] == [10000.0, 160.0, 0.0, 160.0], s[0]
    assert 7.5 < (g[0]["boxes"][0][0] - 98.0875) / (1e-4 * 160) < 8.5, "the old rule must fail the right answer" 
    failures = 0 if generator_agrees() else 1
    with tempfile.TemporaryDirectory() as src:
        write(src)
        with RefEdits(conf, src, NAME) as t:
            def at(ref, i, where):
                return (ref["golden"] if where == "golden" else ref["faults"][0]["outputs"])[i]

            def no_scales(ref):
                del ref["golden_scale"]
                for f in ref["faults"]:
                    del f["scale"]
                return "no scales: the right answer under the old rule"

            def move(i, j, by, where="golden"):
                def edit(ref):
                    b = at(ref, i, where)["boxes"][0]
                    b[j] += by
                    return f"image {i} corner {j} moved by {by:g} ({where})"
                return edit

            def fault_unscaled(ref):
                del ref["faults"][0]["scale"]
                return "the fault's scale left out: its rows keep the old rule"

            def malformed(what):
                def edit(ref):
                    gs = ref["golden_scale"]
                    if what == "short row":
                        gs[0]["boxes"][0] = gs[0]["boxes"][0][:3]
                    elif what == "negative":
                        gs[0]["boxes"][0][0] = -1.0
                    elif what == "unknown output":
                        gs[0]["masks"] = [[1.0]]
                    elif what == "too few images":
                        del gs[1]
                    return f"golden_scale malformed: {what}"
                return edit

            t.case("scales", lambda ref: "the right answer with the hand-worked scales", True,
                   ", 1 of them past their row's own")
            t.case("old rule", no_scales, False)
            t.case("10 tolerances off", move(0, 0, 10 * 1.0), False)
            t.case("y1 by 3 row tolerances", move(0, 1, 3 * 0.016), False)
            t.case("image 1 x1 past its row", move(1, 0, 2e-4 * 90 + 1e-3), False)
            t.case("fault: 10 tolerances off", move(0, 0, 10 * 1.0, "fault"), False)
            t.case("fault: without its scale", fault_unscaled, False)
            # Values no rounding decides (tests/fixtures/README.md): x1's scale raised to 1000
            # times its row's (160: scale 1.6e5, a tolerance of 16 px), past --max-widen's 100.
            # Its value 5 px off (312 of the row's tolerances) is not compared but listed; 1 of
            # the list's 8 box values is 12.5%, past the 1% a verified output may have: NOT
            # VERIFIED (exit 3), neither passed nor failed. Without the limit it would pass.
            def widen_x1(by=0.0, also=None):
                def edit(ref):
                    ref["golden_scale"][0]["boxes"][0][0] = 1000 * 160.0
                    ref["golden"][0]["boxes"][0][0] += by
                    if also:
                        also(ref)
                    return f"x1's scale 1000 times its row's, x1 moved by {by:g}" + (" and y1 by 10 row tolerances" if also else "")
                return edit

            def y1_off(ref):
                ref["golden"][0]["boxes"][0][1] += 10 * 0.016

            t.case("past the factor: listed, not verified", widen_x1(5.0), False,
                   "values: 9 checked, 1 unverifiable (their scale widens the tolerance past 100 times their row's: "
                   "'boxes' 1 of 8)", want_rc=3)
            t.case("past the factor: the verdict", widen_x1(5.0), False, "NOT VERIFIED: 12.5% of 'boxes' unverifiable",
                   want_rc=3)
            t.case("past the factor, a share allowed: passed with its count", widen_x1(5.0), True,
                   "1 unverifiable", args=("--max-unverifiable", "0.2"))
            t.case("past the factor: a checkable value 10 tolerances off still fails", widen_x1(0.0, y1_off), False,
                   "MISMATCH", args=("--max-unverifiable", "0.2"), want_rc=1)
            # past the factor but within its row's own tolerance: checked (it agrees as a value
            # without a scale would); moved 3 row tolerances, the same value is unverifiable
            def widen_y1(by=0.0):
                def edit(ref):
                    ref["golden_scale"][0]["boxes"][0][1] = 1000 * 160.0
                    ref["golden"][0]["boxes"][0][1] += by
                    return f"y1's scale 1000 times its row's, y1 moved by {by:g}"
                return edit

            t.case("past the factor, within its row's own tolerance: checked", widen_y1(), True,
                   "values: 10 checked, 0 unverifiable")
            t.case("past the factor, outside its row's own tolerance: unverifiable", widen_y1(3 * 0.016), False,
                   "values: 9 checked, 1 unverifiable", want_rc=3)
            t.case("within the factor: checked", lambda ref: "x1's scale 62.5 times its row's (the hand-worked)", True,
                   "values: 10 checked, 0 unverifiable")
            t.case("--max-widen 50: x1 (62.5 times) unverifiable", lambda ref: "the hand-worked scales", False,
                   "values: 9 checked, 1 unverifiable", args=("--max-widen", "50"), want_rc=3)
            t.case("--max-widen 0: no limit, the 1000 times widened x1 checked", widen_x1(5.0), True,
                   "values: 10 checked, 0 unverifiable", args=("--max-widen", "0"))
            for what in ("short row", "negative", "unknown output", "too few images"):
                t.case(f"malformed: {what}", malformed(what), False, '"golden_scale" or a fault\'s "scale" is not')
            failures += t.failures
    print("all cases as expected" if not failures else f"{failures} cases wrong")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
