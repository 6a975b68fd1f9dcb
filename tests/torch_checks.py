#!/usr/bin/python3
"""One Python process for the release suite's small PyTorch checks (ctest torch_checks).

    torch_checks.py OUTDIR -- NAME SCRIPT ARG... [-- NAME SCRIPT ARG...]...
    torch_checks.py --verdict OUTDIR NAME

Why: each of these checks is a script that imports torch (with numpy and onnx, ~3.7
CPU-s a process on the AMD VM, a third of it system time for the pages it touches), most
of them to check one thing in a second or two. Run mode imports them once, then forks a child per
check (sequentially) that runs the script as `python3 SCRIPT ARG...` would (runpy, its
__main__, sys.argv, sys.path[0] its folder), its stdout and stderr (and its
subprocesses') into OUTDIR/NAME.log and its exit status into OUTDIR/NAME.rc, and prints
each check's exit status and CPU-s (user + system of the child and the processes it
waited for: its bitflip runs), which ctest's one wall time for torch_checks does not
give (tests/history/round22-h26-suite.md has a run's). A fork
shares the imported modules, and each check still gets its own process: nothing it sets
(seeds, thread counts, sys.path, modules it imports) reaches the next. Six imports cost
~22 CPU-s, the one import and six forks ~4.3 (tests/README.md, "The nineteenth round").

Verdict mode is each named ctest test (FIXTURES_REQUIRED torch_checks): it prints the
check's log and exits with its status (77: skipped, as before), so a failure is reported
by the test that names the check. No verdict (the runner died first) fails the test.
Run mode exits 0 whatever the checks say; 1 only on a bad command line.
"""
import os
import resource
import sys

import forkrun   # tests/forkrun.py: this script's folder is sys.path[0]


def verdict(outdir, name):
    log, rc = os.path.join(outdir, name + ".log"), os.path.join(outdir, name + ".rc")
    if os.path.exists(log):
        with open(log, errors="replace") as f:
            sys.stdout.write(f.read())
    try:
        with open(rc) as f:
            code = int(f.read().strip())
    except (OSError, ValueError):
        print(f"torch_checks: FAIL: no verdict for {name} in {outdir} (ctest torch_checks did not run it)")
        return 1
    print(f"torch_checks: {name} exited {code} (run in ctest torch_checks' process)")
    return code


def run(outdir, groups):
    os.makedirs(outdir, exist_ok=True)
    for name, _, _ in groups:
        for ext in (".log", ".rc"):
            if os.path.exists(os.path.join(outdir, name + ext)):
                os.remove(os.path.join(outdir, name + ext))
    # the shared imports; where one is missing each check says so itself (SKIP 77)
    for mod in ("numpy", "onnx", "torch", "torchvision"):
        try:
            __import__(mod)
        except ImportError:
            pass
    for name, script, args in groups:
        log = os.path.join(outdir, name + ".log")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        code = forkrun.forked(forkrun.script(script, args), log)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if code < 0:   # killed by a signal: a failure, as ctest would report it
            with open(log, "a") as f:
                f.write(f"\ntorch_checks: {name} killed by signal {-code}\n")
            code = 1
        with open(os.path.join(outdir, name + ".rc"), "w") as f:
            f.write(f"{code}\n")
        print(f"{name}: exit {code}, {cpu:.1f} CPU-s", flush=True)
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "--verdict":
        return verdict(argv[2], argv[3])
    if len(argv) < 3 or argv[2] != "--":
        sys.exit(__doc__)
    groups, cur = [], None
    for a in argv[3:]:
        if a == "--":
            cur = None
        elif cur is None:
            cur = [a, None, []]
            groups.append(cur)
        elif cur[1] is None:
            cur[1] = a
        else:
            cur[2].append(a)
    if not groups or any(g[1] is None for g in groups):
        sys.exit(__doc__)
    return run(argv[1], groups)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
