#!/usr/bin/python3
"""The NMS near-tie rule (tests/fixtures/README.md, "NMS near-ties") on a real export: the
YOLOv8-style detector of bench/heldout_det.py (plain PyTorch, torchvision's batched_nms at IoU
0.45, the best 100, untrained heads), exported at opset 11 on 64x64 images
(tests/fixtures/nmsties/, "NMS near-ties on a real export"), whose untrained class head scores
neighbouring cells' overlapping boxes within rounding of each other, so bitflip's own NMS takes
a decision within the margins at each image's second row. PyTorch's outputs are the reference.

Checked both ways:
- the reference as is passes, with images cut and rows after the cuts checked outside the near
  ties' reach (the finer rule) as well as rows unverifiable;
- each golden row's box moved by one pixel, one row at a time: a row before a cut is a
  MISMATCH; after a cut, the moves the runner reports are exactly as many as the rows it said it
  checked there (a row outside the reach moved is caught; one in the reach is unverifiable);
  at least one of each kind.

Usage: nms_ties_yolo.py BITFLIP_CONFORMANCE FIXTURE_DIR (exit 77: none)"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_edits import RefEdits  # noqa: E402

NAME = "yolo_v8_o11"


def run_edit(t, edit):
    """the runner on an edited copy of the reference: (exit code, output)"""
    ref = json.loads(json.dumps(t.base))
    edit(ref)
    json.dump(ref, open(t.ref_path, "w"))
    return t.run()


def main():
    conf, src = sys.argv[1], sys.argv[2]
    if not os.path.exists(os.path.join(src, f"{NAME}.onnx")):
        print(f"SKIP: no {NAME} in {src}")
        return 77
    with RefEdits(conf, src, NAME) as t:
        rc, out = t.run()
        line = next((x for x in out.splitlines() if "golden outputs" in x), "")
        m = re.search(r"NMS near-ties: (\d+) images cut \(([^)]*)\), (\d+) rows after the cuts checked outside the "
                      r"near ties' reach, (\d+) unverifiable", line)
        if rc != 0 or not m or int(m.group(3)) < 1 or int(m.group(4)) < 1:
            print(f"FAIL unedited: rc {rc}, want a pass with rows checked and unverifiable after the cuts:\n{out}")
            return 1
        checked = int(m.group(3))
        cuts = {int(i): int(r) for i, r in re.findall(r"image (\d+) from row (\d+)", m.group(2))}
        print(f"ok   unedited: {line.strip()}")
        caught_after = passed_after = 0
        for i, cut in sorted(cuts.items()):
            for r in range(len(t.base["golden"][i]["scores"])):
                def edit(ref, i=i, r=r):
                    ref["golden"][i]["boxes"][r] = [v + 1.0 for v in ref["golden"][i]["boxes"][r]]
                    return f"image {i} row {r}'s box moved by 1 px"
                if r < cut:
                    t.case(f"before the cut, image {i} row {r}", edit, False)
                    continue
                rc, out = run_edit(t, edit)
                if rc != 0 and "MISMATCH" not in out:
                    print(f"FAIL image {i} row {r}: the runner failed otherwise than by a MISMATCH:\n{out}")
                    return 1
                caught_after += rc != 0
                passed_after += rc == 0
                print(f"{'caught' if rc else 'passed'} after the cut, image {i} row {r}")
        ok = caught_after == checked and caught_after >= 1 and passed_after >= 1
        print(f"{'ok  ' if ok else 'FAIL'} after the cuts: {caught_after} moved rows caught (the runner checked "
              f"{checked}), {passed_after} unverifiable")
        if t.failures or not ok:
            return 1
    print("all cases as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
