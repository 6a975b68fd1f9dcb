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

And the reference's "ties" (tests/fixtures/README.md, "Ties at the cut"), on image 3's
three detections, rows 0 and 1 named tied:
- their boxes swapped passes, every tied box found among ours (0 unverifiable);
- a tied row's box replaced by one bitflip does not output passes, reported as 1
  unverifiable box; without "ties" the same edit is a MISMATCH;
- the untied row's box moved past the tolerance, a tied row's label changed, or a tied
  row's score moved by 2e-4 (the tie list with it) is still a MISMATCH.

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

        def tied(rows=(0, 1), swap=False, far=False, keep_ties=True, untied_box=False, label=False, score=False):
            def edit(ref):
                img = ref["golden"][3]
                assert len(img["scores"]) == 3, "image 3 of the yolo fixture has three detections"
                what = []
                if swap:
                    img["boxes"][0], img["boxes"][1] = img["boxes"][1], img["boxes"][0]
                    what.append("tied rows' boxes swapped")
                if far:
                    img["boxes"][1] = [1000.0, 1000.0, 1010.0, 1010.0]
                    what.append("a tied row's box replaced")
                if untied_box:
                    b = img["boxes"][2]
                    b[2] += 2e-4 * max(abs(v) for v in b) + 1e-3
                    what.append("the untied row's box moved past the tolerance")
                if label:
                    img["labels"][0] = 3 - img["labels"][0]
                    what.append("a tied row's label changed")
                if score:
                    img["scores"][0] *= 1 - 2e-4
                    what.append("a tied row's score moved by 2e-4")
                if keep_ties:
                    ts = [[] for _ in ref["golden"]]
                    ts[3] = [img["scores"][r] for r in rows]
                    ref["ties"] = {"score_output": "scores", "free_outputs": ["boxes"], "tied_scores": ts}
                    what.append("rows 0 and 1 of image 3 tied")
                return "; ".join(what)
            return edit

        case("unedited", lambda ref: "the reference as written", True)
        case("ties: boxes swapped", tied(swap=True), True, "2 rows at a score PyTorch kept only some of, 0 of")
        case("ties: a box not ours", tied(far=True), True, "1 of their boxes unverifiable")
        case("the same edit without ties", tied(far=True, keep_ties=False), False)
        case("ties: untied box", tied(untied_box=True), False)
        case("ties: tied label", tied(label=True), False)
        case("ties: tied score", tied(score=True), False)
        def bad_ties(shape):
            def edit(ref):
                ref["ties"] = shape(len(ref["golden"]))
                return "a malformed ties field"
            return edit

        case("ties: not an object", bad_ties(lambda n: [1, 2]), False, 'its "ties" is not')
        case("ties: tied_scores short", bad_ties(lambda n: {"score_output": "scores", "free_outputs": ["boxes"],
                                                            "tied_scores": [[]] * (n - 1)}), False, 'its "ties" is not')
        case("ties: a score not a number", bad_ties(lambda n: {"score_output": "scores", "free_outputs": ["boxes"],
                                                               "tied_scores": [["0.5"]] * n}), False, 'its "ties" is not')
        case("ties: free_outputs not names", bad_ties(lambda n: {"score_output": "scores", "free_outputs": [3],
                                                                 "tied_scores": [[]] * n}), False, 'its "ties" is not')
        case("corner within the row's scale", corner(0.6e-4), True)
        case("corner past the row's scale", corner(1.5e-4), False)
        case("label", label, False)
        case("score", score, False)
    sys.exit(1 if t.failures else 0)


if __name__ == "__main__":
    main()
