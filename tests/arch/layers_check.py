#!/usr/bin/env python3
"""core/ is layered (docs/ARCHITECTURE.md): each folder of core/src may include
headers of its own folder and of the folders below it, never above. This reads
every #include "..." of core/src and fails naming the file, the line and the
arrow that runs up. With --self-test it first checks that it catches an upward
include planted in a temporary copy, so that a checker that stopped checking
cannot pass.

usage: layers_check.py [--self-test] CORE_SRC_DIR
"""
import os
import re
import shutil
import sys
import tempfile

# lowest first; exec/ops is part of exec
LAYERS = ["base", "model", "exec", "diff", "mitigate", "campaign"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    """The layer of a path relative to core/src ("exec/ops/x.c" -> exec)."""
    top = path.split("/", 1)[0]
    return top if top in LAYERS else None


def check(src):
    errors = []
    for root, _dirs, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            full = os.path.join(root, name)
            rel = os.path.relpath(full, src)
            mine = layer_of(rel)
            if mine is None:
                errors.append(f"{rel}: not inside a layer folder ({', '.join(LAYERS)})")
                continue
            with open(full, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    if inc.startswith("bitflip/") or "/" not in inc:
                        continue  # public header, or a file of the same folder
                    theirs = layer_of(os.path.normpath(os.path.join(os.path.dirname(rel), inc))
                                      if inc.startswith("..") else inc)
                    if theirs is None:
                        continue
                    if LAYERS.index(theirs) > LAYERS.index(mine):
                        errors.append(f"{rel}:{lineno}: {mine}/ includes \"{inc}\" of {theirs}/, a layer above it")
    return errors


def self_test(src):
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "src")
        shutil.copytree(src, copy)
        with open(os.path.join(copy, "model", "planted.c"), "w") as f:
            f.write('#include "campaign/campaign_impl.h"\n')
        errs = check(copy)
        if not any("planted.c:1" in e for e in errs):
            print("layers_check self-test: an upward include planted in model/ was not caught")
            return False
    return True


def main(argv):
    args = [a for a in argv[1:] if a != "--self-test"]
    if len(args) != 1:
        print(__doc__.strip())
        return 2
    src = args[0]
    if "--self-test" in argv and not self_test(src):
        return 1
    errors = check(src)
    for e in errors:
        print(e)
    if errors:
        print(f"layers_check: {len(errors)} include(s) against the layering of core/src")
        return 1
    print(f"layers_check: core/src includes only downward ({' < '.join(LAYERS)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
