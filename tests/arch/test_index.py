#!/usr/bin/env python3
"""The index of which tests cover each product source file (tests/INDEX.md).

Two sources make each row:
  - direct: the C tests (cmocka, fuzz replays, conformance and op checkers)
    that call a function the file defines, found by name, the test named
    after the file (blob.c: test_blob.c), and for an op
    kernel its family's tests/unit/test_ops_<family>.c;
  - through: what reaches the file without naming it (an op kernel through
    the registry, the daemon's files through its HTTP API), from the
    folder table FOLDERS below, kept by hand.

usage:
  test_index.py SOURCE_DIR --write   regenerate tests/INDEX.md
  test_index.py SOURCE_DIR --check   fail unless every product .c has a row,
                                     every row names a file that exists, and
                                     every test file a row names exists
  --self-test (with --check): first check that the check fails on an index
  that misses a file, and on one that names a test that does not exist.
"""
import glob
import os
import re
import sys

# the product: what ships in libbitflip-core, -api, -report, bitflipd and bitflip
PRODUCT = ["core/src/**/*.c", "api/src/*.c", "report/src/*.c", "server/**/*.c", "clients/cli/*.c"]

# tests whose C calls product functions by name
C_TESTS = ["tests/unit/test_*.c", "tests/unit/test_*/*.c", "tests/api/*.c", "tests/api/test_*/*.c",
           "tests/server/test_*.c", "tests/server/test_*/*.c", "tests/report/*.c",
           "tests/fuzz/fuzz_*.c", "tests/ops/opcheck.c", "tests/conformance/*.c"]

# helpers and shims, not tests of their own
NOT_TESTS = {"tests/unit/alloc_fail.c", "tests/unit/op_harness.c", "tests/unit/campaign_check.c",
             "tests/unit/onnx_graph.c", "tests/fuzz/standalone.c", "tests/server/enospc_shim.c"}

# What reaches the files of a folder (the longest matching prefix wins),
# test files or folders, as the README's table names them.
FOLDERS = [
    ("core/src/base/", "every unit test (tests/unit) links it"),
    ("core/src/model/", "tests/unit/test_model.c, tests/unit/test_limits.c, tests/fuzz/fuzz_onnx.c, "
                        "tests/fixtures/conformance (conformance_*)"),
    ("core/src/exec/ops/", "tests/ops (ops_cases), tests/unit/test_ops_*.c, tests/fixtures/conformance and "
                           "tests/fixtures/real (conformance_*), tests/fuzz/fuzz_onnx.c (fuzz_onnx_replay_fixtures)"),
    ("core/src/exec/", "tests/unit/test_eval.c, tests/unit/test_model.c, tests/fixtures/conformance (conformance_*)"),
    ("core/src/diff/", "tests/unit/test_diff*.c (differential vs exact), tests/unit/test_chain.c, "
                       "tests/unit/test_recurrent_diff.c, tests/unit/test_score.c"),
    ("core/src/mitigate/", "tests/unit/test_mitigate.c, tests/unit/test_campaign.c"),
    ("core/src/campaign/", "tests/unit/test_campaign.c, tests/unit/test_campaign_act.c, tests/cli/test_campaign.sh"),
    ("api/src/", "tests/api/test_spec.c, tests/api/test_limits.c, tests/fuzz/fuzz_spec.c, tests/cli, "
                 "tests/integration"),
    ("report/src/", "tests/report/test_report.c, tests/fuzz/fuzz_report.c, tests/cli/test_report.sh, "
                    "tests/integration/test_report.sh"),
    ("server/http/", "tests/integration (daemon_*), tests/server/test_routes.c, tests/fuzz/fuzz_http.c, "
                     "tests/ui"),
    ("server/store/", "tests/server/test_store.c, tests/integration/test_storage.sh, "
                      "tests/integration/test_resilience.sh"),
    ("server/work/", "tests/integration/test_workers.sh, tests/integration/test_resilience.sh, "
                     "tests/integration/test_flow.sh, tests/slurm (slurm_daemon)"),
    ("server/", "tests/integration (daemon_*), tests/server"),
    ("clients/cli/", "tests/cli (cli_*), tests/python, tests/ci, tests/k8s, tests/slurm"),
]

DEF = re.compile(r"^(?!static\b)[A-Za-z_][^;{}()=]*?\b((?:bf|bfd|bfr)_[A-Za-z0-9_]+|bf__[A-Za-z0-9_]+)\s*\(",
                 re.M)


def files(src, patterns):
    out = set()
    for p in patterns:
        out.update(os.path.relpath(f, src) for f in glob.glob(os.path.join(src, p), recursive=True))
    return sorted(out)


def defined(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    names = []
    for m in DEF.finditer(text):
        # a definition: the parameter list is followed by a body, not ';'
        rest = text[m.end():]
        depth, i = 1, 0
        while i < len(rest) and depth:
            depth += {"(": 1, ")": -1}.get(rest[i], 0)
            i += 1
        if rest[i:].lstrip().startswith("{") and m.group(1) not in names:
            names.append(m.group(1))
    return names


def through(path):
    best = ""
    for prefix, what in FOLDERS:
        if path.startswith(prefix) and len(prefix) > len(best):
            best, found = prefix, what
    return found if best else ""


def owner(t):
    """The test a file belongs to: a part of a test split by subject
    (tests/unit/test_x/part.c) is its test's (tests/unit/test_x.c), one
    executable; any other test file is its own."""
    d = os.path.dirname(t)
    return d + ".c" if os.path.basename(d).startswith("test_") else t


def generate(src):
    tests = [t for t in files(src, C_TESTS) if t not in NOT_TESTS]
    bodies = {t: open(os.path.join(src, t), encoding="utf-8", errors="replace").read() for t in tests}
    rows = []
    for f in files(src, PRODUCT):
        names = defined(os.path.join(src, f))
        direct = []
        for t in tests:
            if owner(t) not in direct and any(re.search(r"\b%s\b" % re.escape(n), bodies[t]) for n in names):
                direct.append(owner(t))
        # a test named after the file (server/store/blob.c -> tests/server/test_blob.c)
        stem = os.path.basename(f)[:-2]
        for t in tests:
            if os.path.basename(t) == "test_%s.c" % stem and t not in direct:
                direct.append(t)
        # an op kernel is reached through the registry, by op name: its
        # family's test (ops/nn_einsum.c -> tests/unit/test_ops_nn.c)
        if f.startswith("core/src/exec/ops/"):
            fam = "tests/unit/test_ops_%s.c" % os.path.basename(f).split("_")[0].split(".")[0]
            if fam in bodies and fam not in direct:
                direct.append(fam)
        rows.append((f, direct, through(f)))
    out = ["# Which tests cover each source file",
           "",
           "Generated by `tests/arch/test_index.py . --write` (from the repository root); the",
           "`test_index` check (ctest -L unit) fails when a product `.c` has no row. *Direct*: C",
           "tests that call a function the file defines. *Through*: what reaches it without",
           "naming it (the folder table in the script). How to run each kind: tests/README.md.",
           "",
           "| source | direct | through |",
           "| --- | --- | --- |"]
    for f, direct, thr in rows:
        d = ", ".join("`%s`" % os.path.basename(t) for t in direct) or "-"
        out.append("| `%s` | %s | %s |" % (f, d, thr))
    return "\n".join(out) + "\n"


ROW = re.compile(r"^\| `([^`]+)` \| (.*) \| (.*) \|$")


def check_text(src, text):
    problems = []
    listed = set()
    for line in text.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        f = m.group(1)
        listed.add(f)
        if not os.path.exists(os.path.join(src, f)):
            problems.append("%s: listed but no such file (regenerate: tests/arch/test_index.py . --write)" % f)
        for t in re.findall(r"`([^`]+)`", m.group(2)):
            if not glob.glob(os.path.join(src, "tests", "*", t)):
                problems.append("%s: names test %s, which no tests/ folder holds" % (f, t))
        for t in re.findall(r"tests/[A-Za-z0-9_./*-]+", m.group(3)):
            if not glob.glob(os.path.join(src, t.rstrip("."))):
                problems.append("%s: names %s, which does not exist" % (f, t))
    for f in files(src, PRODUCT):
        if f not in listed:
            problems.append("%s: a product source file with no row (regenerate: tests/arch/test_index.py . --write)" % f)
    return problems


def self_test(src, text):
    ok = True
    rows = [l for l in text.splitlines() if ROW.match(l)]
    if not rows:
        print("self-test: the index has no rows")
        return False
    missing_row = text.replace(rows[0] + "\n", "")
    if not any("no row" in p for p in check_text(src, missing_row)):
        print("self-test: an index without %s's row passed" % rows[0])
        ok = False
    m = ROW.match(rows[0])
    bad_test = text.replace(rows[0], "| `%s` | `test_no_such_thing.c` | %s |" % (m.group(1), m.group(3)))
    if not any("test_no_such_thing.c" in p for p in check_text(src, bad_test)):
        print("self-test: an index naming a test that does not exist passed")
        ok = False
    return ok


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1 or not ({"--write", "--check"} & set(sys.argv)):
        print(__doc__)
        return 2
    src = args[0]
    index = os.path.join(src, "tests", "INDEX.md")
    if "--write" in sys.argv:
        open(index, "w").write(generate(src))
        print("wrote %s" % index)
        return 0
    text = open(index, encoding="utf-8").read() if os.path.exists(index) else ""
    if "--self-test" in sys.argv and not self_test(src, text):
        return 1
    problems = check_text(src, text)
    for p in problems:
        print(p)
    print("%d product source files, %d problems" % (len(files(src, PRODUCT)), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
