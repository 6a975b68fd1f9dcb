#!/usr/bin/python3
"""bitflip-conformance's matching rule for a detector's rows (tests/fixtures/README.md,
"Matching for detection"), checked both ways on tests/fixtures/det/yolo with its
reference edited by hand:

- a box corner moved by 0.6e-4 of the box's largest coordinate passes (the row's scale),
  though it is past 1e-4 of the corner itself (the rule for a plain output's value);
- moved by 1.5e-4 of that largest coordinate, it is reported (MISMATCH);
- a label changed, or a score moved by 2e-4 of itself, is reported (one value a row:
  the value's own scale);
- the unedited reference matches.

Usage: det_tolerance.py BITFLIP_CONFORMANCE FIXTURES_DIR"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_edits import RefEdits  # noqa: E402


def main():
    conf, fixtures = sys.argv[1], sys.argv[2]
    with RefEdits(conf, os.path.join(fixtures, "det"), "yolo") as t:
        case = t.case

        def corner(frac):
            def edit(ref):
                # the smallest corner of the golden boxes: the one the row's scale helps most
                best = None
                for i, img in enumerate(ref["golden"]):
                    for r, box in enumerate(img["boxes"]):
                        for j, v in enumerate(box):
                            if best is None or abs(v) < abs(best[3]):
                                best = (i, r, j, v)
                i, r, j, v = best
                box = ref["golden"][i]["boxes"][r]
                scale = max(abs(x) for x in box)
                box[j] = v + frac * scale
                assert frac * scale > 1e-4 * abs(v) and frac * scale > 1e-5, "the edit must exceed the value-relative rule"
                return f"corner {v:.6g} of a box whose largest coordinate is {scale:.6g} moved by {frac:g} x {scale:.6g}"
            return edit

        def label(ref):
            ref["golden"][0]["labels"][0] = 3 - ref["golden"][0]["labels"][0]
            return "the first label changed"

        def score(ref):
            s = ref["golden"][0]["scores"][0]
            ref["golden"][0]["scores"][0] = s * (1 - 2e-4)
            return f"the first score {s:.7g} moved by 2e-4 of itself"

        case("unedited", lambda ref: "the reference as written", True)
        case("corner within the row's scale", corner(0.6e-4), True)
        case("corner past the row's scale", corner(1.5e-4), False)
        case("label", label, False)
        case("score", score, False)
    sys.exit(1 if t.failures else 0)


if __name__ == "__main__":
    main()
