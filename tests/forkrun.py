"""A function or a script in a forked child of this Python process (tests/torch_checks.py,
tests/python/run.py, study/drs/test_zoo.py).

Why a fork and not a new interpreter: under ctest torch_checks the parent has torch, onnx and
numpy imported (~3.7 CPU-s a process on the AMD VM), and a forked child shares them; run
alone, the child imports what it needs, as a new process did. The child is its own process
still: nothing it sets (seeds, thread counts, sys.argv, sys.path, modules) reaches the parent.
"""
import os
import runpy
import sys
import traceback


def forked(fn, log=None, cwd=None):
    """fn() in a forked child, in CWD (None: this one), its stdout and stderr (and its
    subprocesses') into LOG (a path; None: this process's); returns its exit status as
    os.waitstatus_to_exitcode gives it (negative: killed by that signal). fn's return value is
    the exit code (None: 0); SystemExit as Python's own exit gives it (an int its code, None 0,
    a message printed to stderr and 1); any other exception printed, 1."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if log is not None:
                fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.close(fd)
            if cwd is not None:
                os.chdir(cwd)
            r = fn()
            code = 0 if r is None else (r if isinstance(r, int) else 1)
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
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def script(path, args):
    """For forked: PATH run as `python3 PATH ARG...` would (its __main__, sys.argv,
    sys.path[0] its folder)."""
    def run():
        p = os.path.abspath(path)
        sys.argv = [p] + list(args)
        sys.path[0] = os.path.dirname(p)
        runpy.run_path(p, run_name="__main__")
    return run
