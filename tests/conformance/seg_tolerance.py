#!/usr/bin/python3
"""bitflip-conformance's matching rule for a segmenter's logits (tests/fixtures/README.md,
"Matching for segmentation"), checked both ways on tests/fixtures/det/fcn with its
reference edited by hand. A row is C·H·W logits; a pixel's C logits are one object:

- a logit moved by 0.6e-4 of its pixel's largest class magnitude passes, though it is
  past the value-relative rule (1e-4 of itself, 1e-5 absolute);
- moved by 1.5e-4 of that magnitude, it is reported (MISMATCH);
- the scale is the pixel's, not the row's: a logit at the pixel whose largest logit is
  smallest, moved by 1.5e-4 of that pixel's scale (under 1e-4 of the row's largest), is
  reported;
- the unedited reference matches.

Usage: seg_tolerance.py BITFLIP_CONFORMANCE FIXTURES_DIR"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_edits import RefEdits  # noqa: E402


def labels_hw(path):
    """H, W of the eval set's labels [N, H, W], from the safetensors header."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
    shape = head["labels"]["shape"]
    assert len(shape) == 3, shape
    return shape[1] * shape[2]


def main():
    conf, fixtures = sys.argv[1], sys.argv[2]
    with RefEdits(conf, os.path.join(fixtures, "det"), "fcn") as t:
        base = t.base
        plane = labels_hw(os.path.join(t.dir, "fcn.eval.safetensors"))
        row = base["golden"][0]
        assert len(row) % plane == 0 and len(row) // plane > 1, (len(row), plane)
        pix = [max(abs(row[j]) for j in range(p, len(row), plane)) for p in range(plane)]
        row_max = max(pix)

        def case(name, edit, want_pass):
            t.case(name, lambda ref: edit(ref["golden"][0]), want_pass)

        def smallest_rel():
            # the logit smallest against its pixel's scale: the one the rule helps most
            return min(range(len(row)), key=lambda j: abs(row[j]) / pix[j % plane])

        def moved(frac, j_of):
            def edit(r):
                j = j_of()
                scale = pix[j % plane]
                r[j] = row[j] + frac * scale
                return f"logit {row[j]:.6g} at a pixel whose largest is {scale:.6g} moved by {frac:g} x it"
            return edit

        def quiet_pixel(r):
            # the pixel with the smallest scale; the row's scale would allow this edit
            p = min(range(plane), key=lambda q: pix[q])
            j = max(range(p, len(row), plane), key=lambda k: abs(row[k]))
            step = 1.5e-4 * pix[p]
            assert step > 1e-5 and step < 1e-4 * row_max, "the fixture's pixels must differ in scale"
            r[j] = row[j] + step
            return f"logit {row[j]:.6g}, its pixel's largest, moved by 1.5e-4 of it (row's largest {row_max:.6g})"

        j = smallest_rel()
        assert 0.6e-4 * pix[j % plane] > max(1e-5, 1e-4 * abs(row[j])), "the edit must exceed the value-relative rule"
        case("unedited", lambda r: "the reference as written", True)
        case("logit within its pixel's scale", moved(0.6e-4, smallest_rel), True)
        case("logit past its pixel's scale", moved(1.5e-4, smallest_rel), False)
        case("the pixel's scale, not the row's", quiet_pixel, False)
    sys.exit(1 if t.failures else 0)


if __name__ == "__main__":
    main()
