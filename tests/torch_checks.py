#!/usr/bin/python3
"""One Python process for the release suite's small PyTorch checks (ctest torch_checks).

    torch_checks.py OUTDIR -- NAME SCRIPT ARG... [-- NAME SCRIPT ARG...]...
    torch_checks.py --verdict OUTDIR NAME

Why: each of these checks is a script that imports torch (with numpy and onnx, ~3.7
CPU-s a process on the AMD VM, a third of it system time for the pages it touches), most
of them to check one thing in a second or two. Run mode imports them once, then forks a child per
check (sequentially) that runs the script as `python3 SCRIPT ARG...` would (runpy, its
__main__, sys.argv, sys.path[0] its folder), its stdout and stderr (and its
subprocesses') into OUTDIR/NAME.log and its exit status into OUTDIR/NAME.rc. A fork
shares the imported modules, and each check still gets its own process: nothing it sets
(seeds, thread counts, sys.path, modules it imports) reaches the next. Six imports cost
~22 CPU-s, the one import and six forks ~4.3 (tests/README.md, "The nineteenth round").

Verdict mode is each named ctest test (FIXTURES_REQUIRED torch_checks): it prints the
check's log and exits with its status (77: skipped, as before), so a failure is reported
by the test that names the check. No verdict (the runner died first) fails the test.
Run mode exits 0 whatever the checks say; 1 only on a bad command line.
"""
import os
import runpy
import sys
import traceback


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


def child(name, script, args, log):
    """In the forked child: run SCRIPT as its own __main__ and exit with its status."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    script = os.path.abspath(script)
    sys.argv = [script] + args
    sys.path[0] = os.path.dirname(script)
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:   # sys.exit("message"): Python prints it and exits 1
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


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
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            child(name, script, args, log)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code < 0:   # killed by a signal: a failure, as ctest would report it
            with open(log, "a") as f:
                f.write(f"\ntorch_checks: {name} killed by signal {-code}\n")
            code = 1
        with open(os.path.join(outdir, name + ".rc"), "w") as f:
            f.write(f"{code}\n")
        print(f"{name}: exit {code}", flush=True)
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
