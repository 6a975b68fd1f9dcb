#!/usr/bin/env python3
"""Every product .c and every fuzz target's .c compiles without a warning
under clang (-std=c11 -Wall -Wextra -Werror), as the fuzz build compiles them.

Why: the build is GCC; the fuzz build (clang) used to be part of `make test`
and was then the only place a clang-only warning failed a run. It left
`make test` for `make fuzz-smoke` (15 minutes of CPU on two cores; tests/README.md,
"The seventeenth round"), and this keeps its warnings gate at a tenth of its
cost: clang -fsyntax-only over the same files, with the fuzz build's sanitizer
flags (-fsanitize=address,undefined, so __has_feature(address_sanitizer) and
__SANITIZE_ADDRESS__ branches read as they do there).

The files and their include paths and defines come from the build's
compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS): every file under core/,
api/, report/, server/, clients/ and tests/fuzz/ of SOURCE_DIR (generated code
in the build tree is not ours to warn about), once per distinct set of
defines. Only -I, -isystem, -D and -U are taken from the build's command:
the GCC build's other options (-fno-tree-loop-distribute-patterns, -O3) are
GCC's and not what the fuzz build gives clang.

usage: clang_gate.py SOURCE_DIR BUILD_DIR [--jobs N] [--self-test]
Exit 0 all clean, 1 a warning or error (clang's output printed), 77 (skip) no
clang. --self-test first checks that the gate fails on a file with an unused
variable (given after a clean one, in one clang run) and passes a clean one.
"""
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

CLANG = os.environ.get("CLANG_FOR_GATE", "clang")
FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
         "-fsanitize=address,undefined", "-fsanitize=fuzzer-no-link"]
PRODUCT = ("core/", "api/", "report/", "server/", "clients/", "tests/fuzz/")


def kept_args(args):
    """The include paths and defines of one compile command."""
    out = []
    i = 0
    while i < len(args):
        a = args[i]
        for p in ("-I", "-isystem", "-D", "-U"):
            if a == p and i + 1 < len(args):
                out += [a, args[i + 1]]
                i += 1
                break
            if a.startswith(p) and a != p and p != "-isystem":
                out.append(a)
                break
        i += 1
    return out


def entries(src, build, n):
    """(files, clang command, folder): the product files, each once per set
    of defines, in n batches per set of flags, each batch one clang -cc1
    process (cc1_command: 268 files, one clang each, were 62 CPU-s)."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        db = json.load(f)
    seen = set()
    groups = {}
    for e in db:
        path = os.path.realpath(os.path.join(e["directory"], e["file"]))
        rel = os.path.relpath(path, src)
        if not rel.startswith(PRODUCT) or not rel.endswith(".c"):
            continue
        args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
        kept = kept_args(args)
        key = (path, tuple(kept))
        if key in seen:
            continue
        seen.add(key)
        groups.setdefault(tuple(kept), []).append((rel, path))
    jobs = []
    for kept, files in sorted(groups.items()):
        for i in range(n):
            part = files[i::n]
            if part:
                jobs.append(([r for r, _ in part], [CLANG] + FLAGS + list(kept) + [p for _, p in part], build))
    return jobs


def cc1_command(cmd, nfiles, cwd):
    """The driver command CMD (clang FLAGS... and its last NFILES arguments
    the files) as one clang -cc1 over all its files, or None where the driver's plan is not the expected one.

    Why: a clang process costs ~0.16 CPU-s before it reads a line (loading
    libLLVM and libclang-cpp: `clang -fsyntax-only` on an empty file), most
    of a gate file's ~0.23; and the driver given several files runs one cc1
    process per file. One cc1 given several inputs parses each as its own
    translation unit (macros, include guards and declarations start afresh;
    the self-test checks it) in one process. The cc1 line is the driver's own
    (`clang -###` on the batch's first file), so its flags are the driver's."""
    files = cmd[len(cmd) - nfiles:]
    p = subprocess.run(cmd[:len(cmd) - nfiles] + ["-###", files[0]], cwd=cwd, capture_output=True, text=True)
    lines = [ln for ln in p.stderr.splitlines() if '"-cc1"' in ln]
    if p.returncode != 0 or len(lines) != 1:
        return None
    cc1 = shlex.split(lines[0])
    if cc1[-3:] != ["-x", "c", files[0]] or "-fsyntax-only" not in cc1:
        return None
    if "-main-file-name" in cc1:   # the first file's name, for debug information only
        i = cc1.index("-main-file-name")
        del cc1[i:i + 2]
    return cc1[:-1] + files


def run(job):
    rel, cmd, cwd = job
    cc1 = cc1_command(cmd, len(rel), cwd) if len(rel) > 1 else None
    p = subprocess.run(cc1 or cmd, cwd=cwd, capture_output=True, text=True)
    return rel, p.returncode, p.stdout + p.stderr


def gate(jobs, n):
    bad = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=n) as ex:
        for rel, rc, out in ex.map(run, jobs):
            if rc != 0:
                bad.append((rel, out))
    return bad


def self_test():
    d = tempfile.mkdtemp(prefix="clang_gate_")
    try:
        bad = os.path.join(d, "bad.c")
        good = os.path.join(d, "good.c")
        open(bad, "w").write("int f(void) { int unused; return 0; }\n")
        open(good, "w").write("int f(int x);\nint f(int x) { return x + 1; }\n")
        if not gate([(["good.c", "bad.c"], [CLANG] + FLAGS + [good, bad], d)], 1):
            print("self-test: the gate passed a file with an unused variable")
            return False
        if gate([(["good.c"], [CLANG] + FLAGS + [good], d)], 1):
            print("self-test: the gate refused a clean file")
            return False
        # several files in one clang -cc1 (run above): each must be its own
        # translation unit, or a file could pass on what the one before it
        # defined (a macro, a declaration) and a header's include guard would
        # hide its text from every file after the first
        defs = os.path.join(d, "defs.c")
        uses = os.path.join(d, "uses.c")
        hdr = os.path.join(d, "h.h")
        open(hdr, "w").write("#ifndef H_H\n#define H_H\nstatic inline int h(void) { return 1; }\n#endif\n")
        open(defs, "w").write('#define ONE 1\n#include "h.h"\nint g(void);\nint g(void) { return ONE + h(); }\n')
        open(uses, "w").write('#include "h.h"\nint u(void);\nint u(void) { return h(); }\n')
        if gate([(["defs.c", "uses.c"], [CLANG] + FLAGS + [defs, uses], d)], 1):
            print("self-test: the gate refused two clean files in one run (a header's include guard kept)")
            return False
        open(uses, "w").write("int u(void);\nint u(void) { return ONE + g(); }\n")
        if not gate([(["defs.c", "uses.c"], [CLANG] + FLAGS + [defs, uses], d)], 1):
            print("self-test: a file passed on a macro and a function the file before it defined")
            return False
        return True
    finally:
        shutil.rmtree(d)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = 2
    if "--jobs" in sys.argv:
        n = int(sys.argv[sys.argv.index("--jobs") + 1])
        args.remove(str(n))
    if len(args) != 2:
        print(__doc__)
        return 2
    if shutil.which(CLANG) is None:
        print("clang_gate: SKIP: no %s (scripts/install-deps.sh --test installs it), "
              "so clang's warnings were not checked" % CLANG)
        return 77
    src, build = (os.path.realpath(a) for a in args)
    if "--self-test" in sys.argv and not self_test():
        return 1
    jobs = entries(src, build, n)
    files = [rel for rels, _, _ in jobs for rel in rels]
    # a compile database that lost the product's files would pass an empty gate
    dirs = set(rel.split("/")[0] + "/" + rel.split("/")[1] for rel in files)
    for need in ("core/src", "api/src", "report/src", "server/http", "clients/cli", "tests/fuzz"):
        if need not in dirs:
            print("clang_gate: no file of %s in %s/compile_commands.json" % (need, build))
            return 1
    bad = gate(jobs, n)
    for rels, out in bad:
        print("== %s\n%s" % (" ".join(rels), out))
    print("clang_gate: %d files in %d clang runs, %d runs with warnings or errors" % (len(files), len(jobs), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
