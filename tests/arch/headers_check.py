#!/usr/bin/env python3
"""Every public header compiles on its own, as C11 and as C++, and gives
C++ callers C linkage.

The public headers (core/include/bitflip, api/include/bitflip/api,
report/include/bitflip, and the configured bitflip/version.h) are the engine's
vocabulary for other programs: each must be includable first and alone (it
includes what it uses), under the project's warnings, and from C++ (the
libraries are C, so a function a C++ program declares without extern "C"
would be looked up by a mangled name and fail to link).

For C++ the check compiles, per header, a file that takes the address of
every function the header declares and lists the object's undefined symbols:
a mangled one (_Z...) is a function left outside extern "C".

usage: headers_check.py SOURCE_DIR BUILD_INCLUDE_DIR WORK_DIR [--self-test]
--self-test first checks that the check fails on a header that is not
self-contained, on one that is not C++, and on one without extern "C".
"""
import glob
import os
import re
import subprocess
import sys

CC = os.environ.get("CC_FOR_HEADERS", "gcc")
CXX = os.environ.get("CXX_FOR_HEADERS", "g++")
C_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-D_POSIX_C_SOURCE=200809L"]
CXX_FLAGS = ["-std=c++17", "-Wall", "-Wextra", "-Werror"]

# a declaration at file scope: a line that does not start with a blank, a
# comment or a directive, naming bf_/bfr_ function followed by its parameters
DECL = re.compile(r"^(?![\s#/*}]).*?\b((?:bf|bfr)_[A-Za-z0-9_]+)\s*\(", re.M)


def headers(src, gen):
    found = sorted(glob.glob(os.path.join(src, "core/include/bitflip/*.h")))
    found += sorted(glob.glob(os.path.join(src, "api/include/bitflip/api/*.h")))
    found += sorted(glob.glob(os.path.join(src, "report/include/bitflip/*.h")))
    found.append(os.path.join(gen, "bitflip/version.h"))
    return found


def functions(path):
    text = open(path, encoding="utf-8").read()
    # comments may hold example calls: drop them first
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    names = []
    for m in DECL.finditer(text):
        line = text[text.rfind("\n", 0, m.start(1)) + 1 : m.start(1)]
        if "typedef" in line or "(*" in line or line.lstrip().startswith("static"):
            continue
        if m.group(1) not in names:
            names.append(m.group(1))
    return names


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def check(header, incs, work):
    """Problems with one header: [] if none."""
    problems = []
    base = re.sub(r"[^A-Za-z0-9]", "_", os.path.relpath(header, os.path.dirname(os.path.dirname(header))))
    c_src = os.path.join(work, base + ".c")
    with open(c_src, "w") as f:
        f.write('#include "%s"\n' % header)
    rc, out = run([CC] + C_FLAGS + incs + ["-fsyntax-only", c_src])
    if rc != 0:
        problems.append("as C11, alone:\n" + out)
    names = functions(header)
    cxx_src = os.path.join(work, base + ".cc")
    obj = os.path.join(work, base + ".o")
    with open(cxx_src, "w") as f:
        f.write('#include "%s"\n' % header)
        if names:
            f.write("extern void *const bf_header_refs[];\n")
            f.write("void *const bf_header_refs[] = {\n")
            for n in names:
                f.write("    reinterpret_cast<void *>(&%s),\n" % n)
            f.write("};\n")
    rc, out = run([CXX] + CXX_FLAGS + incs + ["-c", "-o", obj, cxx_src])
    if rc != 0:
        problems.append("as C++, alone:\n" + out)
        return problems
    rc, out = run(["nm", "-u", obj])
    mangled = [line.split()[-1] for line in out.splitlines() if line.split() and line.split()[-1].startswith("_Z")]
    mangled = [s for s in mangled if any(n in s for n in names)]
    if mangled:
        problems.append("from C++, functions without C linkage (no extern \"C\"): " + ", ".join(mangled))
    if names and not any(n in out for n in names):
        problems.append("from C++, none of its functions is referenced by the object: the check saw nothing")
    return problems


def self_test(work):
    """The check must fail on each kind of header it is there to catch."""
    bad = {
        # uses size_t without including stddef.h
        "not_alone.h": "#ifndef A\n#define A\nsize_t bf_size(void);\n#endif\n",
        # C that is not C++ (a parameter named like a C++ keyword)
        "not_cxx.h": "#ifndef B\n#define B\nint bf_new(int new);\n#endif\n",
        # no extern "C"
        "no_linkage.h": "#ifndef C\n#define C\nint bf_plain(void);\n#endif\n",
    }
    good = ('#ifndef D\n#define D\n#include <stddef.h>\n#ifdef __cplusplus\nextern "C" {\n#endif\n'
            "size_t bf_fine(const char *s);\ntypedef void (*bf_cb)(int);\n"
            "#ifdef __cplusplus\n}\n#endif\n#endif\n")
    d = os.path.join(work, "self")
    os.makedirs(d, exist_ok=True)
    ok = True
    for name, text in bad.items():
        p = os.path.join(d, name)
        open(p, "w").write(text)
        if not check(p, [], d):
            print("self-test: the check passed %s, which it must refuse" % name)
            ok = False
    p = os.path.join(d, "good.h")
    open(p, "w").write(good)
    probs = check(p, [], d)
    if probs:
        print("self-test: the check refused a good header:\n" + "\n".join(probs))
        ok = False
    if functions(p) != ["bf_fine"]:
        print("self-test: functions() found %s in good.h, not ['bf_fine']" % functions(p))
        ok = False
    return ok


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 3:
        print(__doc__)
        return 2
    src, gen, work = (os.path.abspath(a) for a in args)
    os.makedirs(work, exist_ok=True)
    if "--self-test" in sys.argv and not self_test(work):
        return 1
    incs = ["-I" + os.path.join(src, "core/include"), "-I" + gen, "-I" + os.path.join(src, "api/include"),
            "-I" + os.path.join(src, "report/include")]
    failed = 0
    hs = headers(src, gen)
    for h in hs:
        if not os.path.exists(h):
            print("missing: %s" % h)
            failed += 1
            continue
        probs = check(h, incs, work)
        for p in probs:
            print("%s: %s" % (os.path.relpath(h, src) if h.startswith(src) else h, p))
        failed += bool(probs)
    print("%d public headers, %d failing" % (len(hs), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
