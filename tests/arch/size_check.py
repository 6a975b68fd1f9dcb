#!/usr/bin/env python3
"""The house's size rules, checked (ctest size_rules): no product C file over
900 lines, and no function over 120 lines unless the comment just above it
says why it must be one function (the words "one function" in it); no test
C file (every .c under tests/), no Python script under tests/, bench/, study/
or clients/ (the fixture generators among them) and no web page script
(server/**/*.js) over 900 lines either: a test too long is split by subject
into parts linked into its one executable (tests/CMakeLists.txt, unit/NAME/),
a script into modules (tests/fixtures/make_real_models.py and real_*.py).

Product files: every .c under core/, api/, server/, clients/ and report/.
Functions are found by a top-level brace scan with strings and comments
taken out: a `{` at depth 0 after a `)` opens a function body. With
--self-test it first checks that it catches a planted long function and a
planted long file in a temporary copy, so that a checker that stopped
checking cannot pass.

The docs' rules run here too (doc_check.py beside this file, its own
self-test with ours): no Markdown file over 900 lines, and every citation
`<file>.md, "<title>"` finds its section.

usage: size_check.py [--self-test] SOURCE_DIR
"""
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import doc_check  # noqa: E402  (beside this file)

FOLDERS = ["core", "api", "server", "clients", "report"]
# held to the file size alone: (folder, ending, below its top folder too)
SIZE_ONLY = [("tests", ".c", True), ("tests", ".py", True), ("bench", ".py", True), ("study", ".py", True),
             ("clients", ".py", True), ("server", ".js", True)]
MAX_FILE = 900
MAX_FUNC = 120
STRING = re.compile(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'')


def code_of(lines):
    """Each line with strings, character constants and comments blanked."""
    out, in_comment = [], False
    for line in lines:
        s, res, j = STRING.sub('""', line), "", 0
        while j < len(s):
            if in_comment:
                k = s.find("*/", j)
                if k < 0:
                    j = len(s)
                    break
                in_comment, j = False, k + 2
            elif s.startswith("/*", j):
                in_comment, j = True, j + 2
            elif s.startswith("//", j):
                break
            else:
                res += s[j]
                j += 1
        out.append(res)
    return out


def functions(lines):
    """(first line, last line, name) of each function body, 0-based."""
    code = code_of(lines)
    depth, start, found = 0, None, []
    for i, line in enumerate(code):
        for ch in line:
            if ch == "{":
                if depth == 0:
                    head = " ".join(code[max(0, i - 3):i + 1])
                    before = head[:head.rfind("{")]
                    is_func = before.rstrip().endswith(")") and "=" not in code[i].split("{")[0]
                    names = re.findall(r"(\w+)\s*\(", before)
                    start = (i, names[0] if names else "?") if is_func else None
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0 and start:
                    found.append((start[0], i, start[1]))
                    start = None
    return found


def justified(lines, first):
    """Whether the comment right above line `first` (the function's head
    may start up to 3 lines earlier) says why it must be one function."""
    j = first
    while j > 0 and not lines[j - 1].strip().endswith("*/") and first - j < 4:
        j -= 1
    if j == 0 or not lines[j - 1].strip().endswith("*/"):
        return False
    k = j - 1
    text = []
    while k >= 0:
        text.append(lines[k])
        if "/*" in lines[k]:
            break
        k -= 1
    return "one function" in " ".join(text).lower()


def line_count(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().count("\n")


def check_sizes(src):
    """The test, bench, study, client and page script files over MAX_FILE lines (SIZE_ONLY)."""
    errors = []
    for folder, ending, deep in SIZE_ONLY:
        top = os.path.join(src, folder)
        for root, dirs, files in os.walk(top):
            if not deep:
                dirs[:] = []
            dirs[:] = [d for d in dirs if d != "node_modules"]
            for name in sorted(files):
                path = os.path.join(root, name)
                if name.endswith(ending) and not os.path.islink(path):
                    n = line_count(path)
                    if n > MAX_FILE:
                        errors.append(f"{os.path.relpath(path, src)}: {n} lines, over {MAX_FILE}: split it by subject")
    return errors


def check(src):
    errors = check_sizes(src)
    for folder in FOLDERS:
        for root, _dirs, files in os.walk(os.path.join(src, folder)):
            for name in sorted(files):
                if not name.endswith(".c"):
                    continue
                path = os.path.join(root, name)
                rel = os.path.relpath(path, src)
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = f.read().split("\n")
                if len(lines) - 1 > MAX_FILE:
                    errors.append(f"{rel}: {len(lines) - 1} lines, over {MAX_FILE}: split it by concern")
                for first, last, fname in functions(lines):
                    n = last - first + 1
                    if n > MAX_FUNC and not justified(lines, first):
                        errors.append(f"{rel}:{first + 1}: {fname} is {n} lines, over {MAX_FUNC}: split it, or say "
                                      "in the comment above it why it must be one function")
    return errors


def self_test(src):
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "src")
        os.makedirs(os.path.join(copy, "core"))
        body = "\n".join("    x += %d;" % i for i in range(MAX_FUNC + 5))
        with open(os.path.join(copy, "core", "long.c"), "w") as f:
            f.write("/* a long function */\nint long_one(int x)\n{\n%s\n    return x;\n}\n" % body)
        with open(os.path.join(copy, "core", "ok.c"), "w") as f:
            f.write("/* must be one function: planted */\nint long_ok(int x)\n{\n%s\n    return x;\n}\n" % body)
        with open(os.path.join(copy, "core", "big.c"), "w") as f:
            f.write("int a;\n" * (MAX_FILE + 1))
        os.makedirs(os.path.join(copy, "tests", "unit", "test_x"))
        os.makedirs(os.path.join(copy, "bench"))
        with open(os.path.join(copy, "tests", "unit", "test_x", "part.c"), "w") as f:
            f.write("int a;\n" * (MAX_FILE + 1))
        with open(os.path.join(copy, "bench", "big_bench.py"), "w") as f:
            f.write("a = 1\n" * (MAX_FILE + 1))
        with open(os.path.join(copy, "bench", "ok_bench.py"), "w") as f:
            f.write("a = 1\n" * MAX_FILE)
        os.makedirs(os.path.join(copy, "tests", "fixtures", "gen"))   # a generator two folders down
        with open(os.path.join(copy, "tests", "fixtures", "gen", "make_big.py"), "w") as f:
            f.write("a = 1\n" * (MAX_FILE + 1))
        errors = check(copy)
        want = [("core/long.c:", "long_one"), ("core/big.c:", "lines"), ("tests/unit/test_x/part.c:", "lines"),
                ("bench/big_bench.py:", "lines"), ("tests/fixtures/gen/make_big.py:", "lines")]
        for w, word in want:
            if not any(e.startswith(w) and word in e for e in errors):
                print(f"size_check: self-test: the check missed the planted {w}", file=sys.stderr)
                return False
        if any(e.startswith("core/ok.c") for e in errors):
            print("size_check: self-test: a function whose comment says why was refused", file=sys.stderr)
            return False
        if any(e.startswith("bench/ok_bench.py") for e in errors):
            print(f"size_check: self-test: a script of {MAX_FILE} lines was refused", file=sys.stderr)
            return False
    return True


def main(argv):
    return doc_check.run_checker(
        argv, __doc__, [self_test, lambda _src: doc_check.self_test()], [check, doc_check.check], "size_check",
        f"no product, test, bench or Markdown file over {MAX_FILE} lines, no function over {MAX_FUNC} "
        "without its reason, every cited section found")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
