#!/usr/bin/python3
"""The Python suite's ctest entry points (tests/CMakeLists.txt):

  run.py client      the client against a real bitflipd, local runs, results, plots,
                     safetensors, LM eval sets (pytest; numpy, pandas, matplotlib)
  run.py export      bitflip.export on torch models, language models too (pytest;
                     exit 77 without torch)
  run.py install     the documented install: a venv with --system-site-packages and
                     pip install --no-build-isolation ./clients/python, no index
  run.py quickstart  examples/python/quickstart.py in a temporary directory
  run.py drs_study   examples/python/drs_study.py in a temporary directory

The binaries come from $BITFLIP_BIN and $BITFLIPD_BIN (ctest sets them).
Exit 77 (ctest's SKIP_RETURN_CODE) says why when optional software is missing.
"""
import importlib.util
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
import forkrun  # noqa: E402  (tests/forkrun.py)
SKIP = 77


def have(*mods):
    return [m for m in mods if importlib.util.find_spec(m) is None]


def require(*mods):
    missing = have(*mods)
    if missing:
        print(f"missing {', '.join(missing)}: scripts/install-deps.sh installs them "
              f"({' '.join('python3-' + m for m in missing)})")
        sys.exit(1)


def skip_without(*mods):
    missing = have(*mods)
    if missing:
        print(f"SKIP: {', '.join('python3-' + m for m in missing)} not installed; "
              "scripts/install-deps.sh installs it")
        sys.exit(SKIP)


def forked(cwd, fn, out=None):
    """fn() in a forked child of this process, in CWD, its stdout and stderr into OUT (a path;
    None: this process's): its exit status. What `python3 -m pytest` or `python3 EXAMPLE` in a
    new interpreter was, without the new interpreter (tests/forkrun.py says why)."""
    return forkrun.forked(fn, out, cwd)


def pytest(*files):
    require("pytest", "numpy")

    def run():
        import pytest as pt
        return int(pt.main(["-q", "-c", os.path.join(HERE, "pytest.ini"), "--rootdir", HERE,
                            *[os.path.join(HERE, f) for f in files]]))
    return forked(HERE, run)


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = os.path.join(ROOT, "clients", "python") + os.pathsep + e.get("PYTHONPATH", "")
    e.setdefault("MPLBACKEND", "Agg")
    return e


def example(name, want, text):
    with tempfile.TemporaryDirectory(prefix="bitflip-example-") as d:
        script = os.path.join(ROOT, "examples", "python", name)

        def run():   # as `python3 SCRIPT` with env()'s PYTHONPATH and MPLBACKEND
            os.environ.update(env())
            sys.path[:0] = [os.path.dirname(script), os.path.join(ROOT, "clients", "python")]
            sys.argv = [script]
            import runpy
            runpy.run_path(script, run_name="__main__")
            return 0
        log = os.path.join(d, ".example.log")
        rc = forked(d, run, log)
        with open(log, errors="replace") as f:
            stdout = f.read()
        os.remove(log)
        print(stdout)
        if rc != 0:
            print(f"FAIL: {name} exited {rc}")
            return 1
        for t in text:
            if t not in stdout:
                print(f"FAIL: {name} did not print {t!r} (its result table)")
                return 1
        for f in want:
            path = os.path.join(d, f)
            if not os.path.isfile(path) or open(path, "rb").read(8) != b"\x89PNG\r\n\x1a\n":
                print(f"FAIL: {name} did not write the figure {f}")
                return 1
        print(f"ok: {name} wrote {', '.join(want)}")
        return 0


def install():
    """The command docs/PYTHON.md gives, as a user runs it from the checkout."""
    with tempfile.TemporaryDirectory(prefix="bitflip-venv-") as d:
        venv = os.path.join(d, "venv")
        e = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")   # no index is reachable
        e.pop("PYTHONPATH", None)
        for cmd in (["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv],
                    [os.path.join(venv, "bin", "pip"), "install", "--no-build-isolation", "./clients/python"]):
            p = subprocess.run(cmd, cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if p.returncode != 0:
                print(p.stdout)
                print(f"FAIL: {' '.join(cmd)} exited {p.returncode}")
                return 1
        check = (
            "import json, os, sys, bitflip\n"
            "assert bitflip.__file__.startswith(sys.prefix), bitflip.__file__\n"
            "r = bitflip.run({'model': sys.argv[1], 'dataset': sys.argv[2], 'trials': 20,\n"
            "                 'faults': {'model': 'bitflip'}})\n"
            "assert r.summary['trials'] == 20 and len(r.trials.to_list()) == 20\n"
            "import importlib.util\n"
            "print('installed at', os.path.dirname(bitflip.__file__),\n"
            "      '; torch visible:', importlib.util.find_spec('torch') is not None)\n")
        fix = os.path.join(ROOT, "tests", "fixtures", "conformance")
        p = subprocess.run([os.path.join(venv, "bin", "python"), "-c", check, os.path.join(fix, "demo_digits.onnx"),
                            os.path.join(fix, "demo_digits.eval.safetensors")], cwd=d, env=e,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(p.stdout)
        if p.returncode != 0:
            print("FAIL: the installed package does not work")
            return 1
        if have("torch") == [] and "torch visible: True" not in p.stdout:
            print("FAIL: Debian's torch is not visible in the venv (--system-site-packages)")
            return 1
        return 0


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "client"
    if what == "client":
        require("pandas", "matplotlib")
        return pytest("test_client.py", "test_local.py", "test_results.py", "test_safetensors.py",
                      "test_hostile.py", "test_lm_eval_set.py", "test_vision_eval_set.py")
    if what == "export":
        skip_without("torch")
        return pytest("test_export.py", "test_lm_export.py", "test_vision_export.py", "test_kernel_record.py")
    if what == "install":
        return install()
    if what == "quickstart":
        skip_without("torch", "torchvision", "pandas", "matplotlib")
        return example("quickstart.py", ["resnet18_faults.png"], ["outcome", "tolerable", "critical_rate"])
    if what == "drs_study":
        skip_without("torch", "pandas", "matplotlib")
        return example("drs_study.py", ["drs_auc_vs_ber.png"], ["golden AUC", "clip", "sbp", "abft", "recovery"])
    print(f"usage: run.py client|export|install|quickstart|drs_study (got {what!r})")
    return 2


if __name__ == "__main__":
    sys.exit(main())
