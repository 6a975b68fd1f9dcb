#!/usr/bin/python3
"""ctest conformance_lm_refs: bitflip-conformance on malformed or wrong
language_model references (tests/fixtures/README.md, "Language models"). Each
case is a copy of a fixture with one field changed, and must fail (exit 1)
with the message naming what is wrong; the unchanged copy must pass.

usage: lm_refs.py BITFLIP_CONFORMANCE FIXTURES_DIR

Cases on an LM fixture need an engine that runs a symbolic sequence axis and
the language_model task; on an engine that refuses those, they are reported
skipped and the script exits 77 (ctest's skip) after the cases that need
neither have passed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

REFUSED = ("may be symbolic", "may stay symbolic", "must hold one label per sample")


def run(conf, d):
    p = subprocess.run([conf, d], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def copy(src_dir, name, d, edit, new_name=None):
    new_name = new_name or name
    for ext in (".onnx", ".eval.safetensors"):
        shutil.copy(os.path.join(src_dir, name + ext), os.path.join(d, new_name + ext))
    ref = json.load(open(os.path.join(src_dir, name + ".ref.json")))
    ref["model"] = new_name + ".onnx"
    edit(ref)
    json.dump(ref, open(os.path.join(d, new_name + ".ref.json"), "w"))


def main():
    conf, fix = sys.argv[1], sys.argv[2]
    lm_dir, cls_dir = os.path.join(fix, "lm"), os.path.join(fix, "conformance")
    failed, skipped = 0, 0

    def task_lm(ref):
        ref["task"] = "language_model"
        ref["golden_perplexity"], ref["golden_token_accuracy"] = 1.0, 1.0

    def drop(key):
        return lambda ref: ref.pop(key)

    def setf(key, v):
        return lambda ref: ref.__setitem__(key, v)

    def scale_fault(ref):
        f = next(f for f in ref["faults"] if isinstance(f.get("perplexity"), float))
        f["perplexity"] *= 1.001

    def null_acc(ref):
        for f in ref["faults"]:
            f["token_accuracy"] = None

    cases = [  # (name, source dir, model, edit, want exit, words in the output, needs the LM engine)
        ("a classifier's ref claiming language_model", cls_dir, "demo_digits", task_lm, 1,
         "the engine scored the eval set as classification", False),
        ("unchanged", lm_dir, "lm_gpt2_op14", lambda ref: None, 0, "all match", True),
        ("faults' token accuracy null", lm_dir, "lm_gpt2_op14", null_acc, 0, "all match", True),
        ("no golden_perplexity", lm_dir, "lm_gpt2_op14", drop("golden_perplexity"), 1,
         "reference malformed: no golden_perplexity", True),
        ("golden_token_accuracy a word", lm_dir, "lm_gpt2_op14", setf("golden_token_accuracy", "high"), 1,
         "reference malformed: golden_token_accuracy", True),
        ("golden with no rows", lm_dir, "lm_gpt2_op14", setf("golden", []), 1,
         "golden outputs   1 samples x 1024: reference malformed", True),
        ("golden perplexity off by 1e-3", lm_dir, "lm_gpt2_op14",
         lambda ref: ref.__setitem__("golden_perplexity", ref["golden_perplexity"] * 1.001), 1,
         "MISMATCH", True),
        ("a fault's perplexity off by 1e-3 (direct and campaign path)", lm_dir, "lm_gpt2_op14", scale_fault, 1,
         "MISMATCH: 1 faults' perplexity or token accuracy differ", True),
    ]
    for title, src, model, edit, want_rc, words, needs_lm in cases:
        with tempfile.TemporaryDirectory(prefix="bitflip-lmref-") as d:
            copy(src, model, d, edit)
            rc, out = run(conf, d)
        if needs_lm and rc != 0 and any(r in out for r in REFUSED) and "MISMATCH" not in out:
            print(f"skip: {title}: this engine cannot run an LM fixture yet")
            skipped += 1
            continue
        ok = rc == want_rc and words in out
        print(f"{'ok' if ok else 'FAIL'}: {title}: exit {rc} (want {want_rc}), {words!r} "
              f"{'found' if words in out else 'missing'}")
        if not ok:
            print(out)
            failed += 1
    if failed:
        return 1
    return 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
