"""Hand edits of a conformance reference, each checked against bitflip-conformance: the
matching rules' tests (det_tolerance.py, seg_tolerance.py) copy a fixture's model, eval
set and ref.json to a temporary directory, and each case writes an edited copy of the
reference and says whether the runner passed it or reported it, as the case wants."""
import json
import os
import shutil
import subprocess
import tempfile


class RefEdits:
    def __init__(self, conf, src_dir, name):
        self.conf, self.name, self.failures = conf, name, 0
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        for ext in ("onnx", "eval.safetensors", "ref.json"):
            shutil.copy(os.path.join(src_dir, f"{name}.{ext}"), self.dir)
        self.ref_path = os.path.join(self.dir, f"{name}.ref.json")
        self.base = json.load(open(self.ref_path))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._tmp.cleanup()

    def run(self, args=()):
        p = subprocess.run([self.conf, *args, "--only", self.name, self.dir], capture_output=True, text=True, timeout=300)
        return p.returncode, p.stdout + p.stderr

    def case(self, label, edit, want_pass, want_text=None, args=(), want_rc=None):
        """edit(ref) changes a fresh copy of the reference and returns what it did; want_text,
        if given, must appear in the runner's output. A case that must fail fails as a
        MISMATCH, or with want_text (a malformed reference's own message). args: the runner's
        flags; want_rc: the exit status wanted exactly (3: not verified), else 0 or not 0 as
        want_pass says."""
        ref = json.loads(json.dumps(self.base))
        note = edit(ref)
        json.dump(ref, open(self.ref_path, "w"))
        rc, out = self.run(args)
        ok = (rc == 0) == want_pass and (want_pass or want_text or "MISMATCH" in out) and (not want_text or want_text in out)
        if want_rc is not None:
            ok = rc == want_rc and (not want_text or want_text in out)
        print(f"{'ok  ' if ok else 'FAIL'} {label}: {note}; runner {'passed' if rc == 0 else 'reported it'} ({rc})")
        if not ok:
            print(out)
            self.failures += 1
