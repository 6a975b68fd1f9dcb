#!/usr/bin/env python3
"""Writes the op cases of tests/ops/cases/*.py into tests/fixtures/ops/
(or --out DIR). Needs Debian's python3-torch, python3-onnx, python3-numpy;
run with /usr/bin/python3. Deterministic: the same files every run.

A family may also define `dyn_cases()`: cases that need the run-time
preparation of steps whose output shape is data (NonMaxSuppression of fed
boxes); they go to tests/fixtures/ops_dyn/ (or --out-dyn DIR).

usage: /usr/bin/python3 tests/ops/make_cases.py [--out DIR] [--out-dyn DIR] [--only FAMILY]
"""
import argparse
import importlib
import os
import pkgutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import opcase  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
import refjson  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "fixtures", "ops"))
    ap.add_argument("--out-dyn", default=os.path.join(HERE, "..", "fixtures", "ops_dyn"))
    ap.add_argument("--only", help="family module name (cases/NAME.py)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import torch
    torch.manual_seed(0)
    blas = refjson.blas("make_cases")   # recorded in each case's metadata
    seen = set()
    total = 0
    for mod in sorted(m.name for m in pkgutil.iter_modules([os.path.join(HERE, "cases")])):
        if args.only and mod != args.only:
            continue
        family = importlib.import_module("cases." + mod)
        dyn = list(family.dyn_cases()) if hasattr(family, "dyn_cases") else []
        if dyn:
            os.makedirs(args.out_dyn, exist_ok=True)
        for case, out in [(c, args.out) for c in family.cases()] + [(c, args.out_dyn) for c in dyn]:
            if case.name in seen:
                sys.exit(f"make_cases: two cases named {case.name}")
            seen.add(case.name)
            opcase.write(case, out, blas)
            total += 1
        print(f"{mod}: written")
    print(f"make_cases: {total} cases in {os.path.normpath(args.out)}")


if __name__ == "__main__":
    main()
