#!/usr/bin/python3
"""bitflip-conformance's rule for rows tied at a cut when the reference has no "ties" field
(tests/fixtures/README.md, "Ties at the cut"; docs/OPS.md, "Ties"), checked both ways on
tests/fixtures/ties/tiecut (a detector whose scores tie exactly: image 0 is a full list of 6
whose last 5 rows share a score PyTorch had more boxes of; image 1 a short list of 3 equal
scores; image 2 a full list of 5 equal scores above one row) with its reference edited by hand. What another tie-break
would legitimately give must pass, and say what it could not verify:

- the unedited reference (PyTorch's own rows) passes, its tied boxes all found;
- image 0's tied rows (box with label) in another order pass, 0 unverifiable;
- image 0's tied box replaced by a box ours does not output (a cut that kept another box of
  the same score) passes, reported as 1 unverifiable box; the same edit with the row's
  score no longer equal to the group's is a MISMATCH (no tie, so no set matching);
- image 1's tied rows in another order pass (a short list: the same rows);
- image 0's tied rows reordered with one score a last bit lower passes (equal within the
  tolerance: another summation order gives PyTorch's equal scores a bit apart);
- image 2's first five rows (one score, above its last row) in another order pass, and one of
  their boxes replaced passes as 1 unverifiable (a full list: NMS and the sort chose among
  equal scores there too).

A real error must still fail (MISMATCH):

- a box moved outside any tie (image 0's untied first row, image 2's last row);
- a label changed inside a tied group (images 0, 1 and 2: the labels' multiset differs), or a
  tied score moved by 2e-4 of itself;
- a box replaced inside image 1's tie (a short list: nothing was cut, so every box must be found),
  or inside image 0's group with one score a last bit lower (scores only near each other are
  ordered by their last bits, not cut by a tie-break, so every box must be found);
- a row missing, a row extra (row counts);
- a tied group whose count differs: image 0's first row given the group's score (golden's
  group is 6 rows, ours 5), or its last row given another score (golden's group is 4);
- the same edits on a fault's outputs (faults are checked by the same rule).

Usage: det_ties.py BITFLIP_CONFORMANCE FIXTURES_DIR"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_edits import RefEdits  # noqa: E402

ALIEN = [0.25, 0.25, 1.75, 1.75]    # a box the model does not output for these images


def ulp_down(v):
    """v as float32 one last bit lower"""
    return float(np.nextafter(np.float32(v), np.float32(0)))


def main():
    conf, fixtures = sys.argv[1], sys.argv[2]
    with RefEdits(conf, os.path.join(fixtures, "ties"), "tiecut") as t:
        case = t.case

        def img(ref, i, where="golden"):
            return ref["golden"][i] if where == "golden" else ref["faults"][0]["outputs"][i]

        def shape_ok(ref):
            a, b, c = (img(ref, i) for i in range(3))
            assert len(a["scores"]) == 6 and a["scores"][0] > a["scores"][1] == a["scores"][5], "image 0: 1 + 5 tied"
            assert len(b["scores"]) == 3 and b["scores"][0] == b["scores"][2], "image 1: 3 tied"
            assert c["scores"][4] > c["scores"][5], "image 2: its last row alone"
            assert len(set(a["labels"][1:])) == 2, "image 0's group has two labels"

        def rows(i, order, where="golden"):
            def edit(ref):
                shape_ok(ref)
                m = img(ref, i, where)
                for k in ("boxes", "labels", "scores"):
                    m[k] = [m[k][r] for r in order]
                return f"image {i}'s rows in the order {order} ({where})"
            return edit

        def set_(i, r, key, value, where="golden", also=None):
            def edit(ref):
                shape_ok(ref)
                m = img(ref, i, where)
                was = m[key][r]
                m[key][r] = value(was) if callable(value) else value
                if also:
                    also(m)
                return f"image {i} row {r} {key} {was} -> {m[key][r]} ({where})"
            return edit

        def drop(i, r):
            def edit(ref):
                m = img(ref, i)
                for k in ("boxes", "labels", "scores"):
                    del m[k][r]
                return f"image {i} row {r} removed"
            return edit

        def extra(i):
            def edit(ref):
                m = img(ref, i)
                for k in ("boxes", "labels", "scores"):
                    m[k].append(m[k][-1])
                return f"image {i}'s last row doubled"
            return edit

        moved = lambda b: [b[0], b[1], b[2] + 0.05, b[3]]  # noqa: E731
        flip = lambda v: 1 - v  # noqa: E731
        case("unedited", lambda ref: "the reference as written", True, "0 of their boxes unverifiable")
        case("full list, tied rows reordered", rows(0, [0, 5, 3, 1, 4, 2]), True, "0 of their boxes unverifiable")
        case("full list, a tied box not ours", set_(0, 2, "boxes", ALIEN), True, "1 of their boxes unverifiable")
        case("short list, tied rows reordered", rows(1, [2, 0, 1]), True, "0 of their boxes unverifiable")
        case("mid-list group reordered (image 2)", rows(2, [3, 0, 4, 1, 2, 5]), True, "0 of their boxes unverifiable")
        case("mid-list group, a box not ours (full list)", set_(2, 1, "boxes", ALIEN), True,
             "1 of their boxes unverifiable")
        case("a tied score a last bit off, rows reordered", lambda ref: (rows(0, [0, 2, 1, 3, 5, 4])(ref), set_(
            0, 5, "scores", ulp_down)(ref))[1],
            True, "0 of their boxes unverifiable")
        case("a box not ours in a group a last bit apart", lambda ref: (set_(0, 4, "boxes", ALIEN)(ref), set_(
            0, 5, "scores", ulp_down)(ref))[1],
            False)
        case("a tied score moved by 2e-4 of itself", set_(0, 3, "scores", lambda v: v * (1 - 2e-4)), False)
        case("mid-list group, a label changed", set_(2, 2, "labels", flip), False)
        case("fault: full list, a tied box not ours", set_(0, 4, "boxes", ALIEN, "fault"), True,
             "1 of their boxes unverifiable")
        case("an untied box moved (image 0)", set_(0, 0, "boxes", moved), False)
        case("an untied box moved (image 2)", set_(2, 5, "boxes", moved), False)
        case("a tied label changed (full list)", set_(0, 3, "labels", flip), False)
        case("a tied label changed (short list)", set_(1, 0, "labels", flip), False)
        case("a tied box not ours (short list)", set_(1, 1, "boxes", ALIEN), False)
        case("a tied box not ours, its score off the group", set_(0, 2, "boxes", ALIEN,
             also=lambda m: m["scores"].__setitem__(2, m["scores"][2] * (1 - 2e-4))), False)
        case("a row missing (full list)", drop(0, 5), False)
        case("a row missing (short list)", drop(1, 2), False)
        case("a row extra", extra(1), False)
        case("tied group grown by one", set_(0, 0, "scores", lambda v: 0.5), False)
        case("tied group shrunk by one", set_(0, 5, "scores", lambda v: 0.25), False)
        case("fault: a tied label changed", set_(0, 3, "labels", flip, "fault"), False)
        case("fault: an untied box moved", set_(0, 0, "boxes", moved, "fault"), False)
    sys.exit(1 if t.failures else 0)


if __name__ == "__main__":
    main()
