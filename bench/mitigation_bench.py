#!/usr/bin/python3
"""What each protection recovers, and what it costs: the results tables of docs/MITIGATIONS.md.

  /usr/bin/python3 bench/mitigation_bench.py [--bitflip build/bitflip] [--threads 2]
        [--repeats 200] [--per-bit 100] [--cov-trials 500] [--quick] [--cases a,b]
        [--write-doc docs/MITIGATIONS.md] [--out bench/out/mitigations.json]
  /usr/bin/python3 bench/mitigation_bench.py --render bench/out/mitigations.json [--write-doc ...]

Each case is one campaign spec with "mitigations": [...] (written to bench/out/mitigations/),
run once with
    bitflip run --local SPEC --threads N --stats --format json --out RESULT.json
which runs the campaign once per protection configuration on the same faults (a paired
comparison) and reports, per configuration, outcome rates, the metric under faults, the
recovery with its paired-bootstrap interval, and the cost (docs/MITIGATIONS.md). The
configurations, the same in every case:

    none          the unprotected model (the baseline)
    clip          activation clipping, bounds profiled on the golden pass (min/max), clamp,
                  at the engine's default places (every Gemm, MatMul and Conv output that is
                  not a graph output)
    clip-pytei    PyTEI's clipping: fixed [-100, 100] with NaN -> 0, on every Linear (Gemm)
                  and Conv output but the last Linear's
    sbp           selective bit protection of the sign and exponent bits (fp32: 31..23)
    abft-detect   Huang-Abraham checksums; a mismatch makes the trial DUE
    abft-correct  the same, correcting a single wrong channel per row

Cases:
    drs_dlrm_small   the DRS experiment (Terrorch/PyTEI): BER over every fp32 weight
                     (embeddings and MLPs) of dlrm_small, rates 1e-7 .. 1e-3, AUC
    drs_dlrm_op13    the same on the project's fixture tests/fixtures/conformance/dlrm_ops_op13
    cnn_digits       the same sweep on digits_cnn (else the fixture cnn_ops_op17), accuracy
    bits_digits_cnn  single-bit weight flips, "sampling": "per_bit" (equal trials per bit)
    bits_dlrm_small  the same on dlrm_small (else dlrm_ops_op13)
    cov_digits_cnn   coverage per fault model: one campaign per fault model (bitflip, stuck_at_0,
                     stuck_at_1, random_value, ber at one rate) on every weight of digits_cnn
                     (else cnn_ops_op17), --cov-trials trials each; per-trial records
                     (--trials-out) pair each trial's outcome with the unprotected one's
    cov_dlrm_small   the same on dlrm_small (else dlrm_ops_op13), with the effective faults in
                     the embedding tables (read by Gather) and in the other weights apart
dlrm_small and digits_cnn come from ../shared/conformance if present (--conformance-dir).

Raw results (the specs, every configuration's result without per-trial data, run times):
bench/out/mitigations.json. --write-doc rewrites only the part of that file between
<!-- mitigation-bench:start --> and <!-- mitigation-bench:end --> (appended if the markers are
absent). Exit status 1 if a campaign failed (a case whose model is missing is skipped).
Standard library only (and benchlib's machine helpers, which need no numpy).
"""
import argparse
import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

# the parts, each a module of its own beside this script (the house's 900 lines)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mitigation_doc import print_tables, section, write_doc  # noqa: E402
from mitigation_runs import run_case  # noqa: E402
from mitigation_setup import (BENCH, CASES, COV_TRIALS, PER_BIT, REPEATS, ROOT,  # noqa: E402
                              default_conformance_dir, file_id, log, machine_info)


# ---------------------------------------------------------------- main


def engine_commit():
    """HEAD's short hash, +dirty if the engine's sources (not docs or bench/) have changes."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "core", "api",
                                "clients", "server", "CMakeLists.txt", "cmake"],
                               cwd=ROOT, capture_output=True, text=True).stdout.strip()
        return rev.stdout.strip() + (" with uncommitted changes to the engine" if dirty else "")
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser(description="what each protection recovers and costs (docs/MITIGATIONS.md)")
    ap.add_argument("--bitflip", default="build/bitflip")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true",
                    help=f"{REPEATS[1]} repeats per rate, {PER_BIT[1]} trials per bit, {COV_TRIALS[1]} per fault model")
    ap.add_argument("--repeats", type=int, default=None,
                    help=f"BER trials per rate (default {REPEATS[0]}, {REPEATS[1]} with --quick)")
    ap.add_argument("--per-bit", type=int, default=None,
                    help=f"trials per bit position (default {PER_BIT[0]}, {PER_BIT[1]} with --quick)")
    ap.add_argument("--cov-trials", type=int, default=None,
                    help=f"trials per fault model in the coverage campaigns (default {COV_TRIALS[0]}, "
                         f"{COV_TRIALS[1]} with --quick)")
    ap.add_argument("--cases", default=",".join(CASES), help="subset of: " + ", ".join(CASES))
    ap.add_argument("--conformance-dir", default=None,
                    help="where dlrm_small and digits_cnn live (default ../shared/conformance)")
    ap.add_argument("--quiet-wait", type=float, default=10,
                    help="before each campaign, wait up to this many seconds for other processes to go quiet")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--write-doc", metavar="PATH")
    ap.add_argument("--out", default=os.path.join(BENCH, "out", "mitigations.json"))
    ap.add_argument("--render", metavar="JSON", help="run nothing: tables (and --write-doc) from a saved file")
    a = ap.parse_args()

    if a.render:
        saved = json.load(open(a.render))
        return report(saved["meta"], saved["rows"], a.write_doc)

    a.repeats = a.repeats or REPEATS[1 if a.quick else 0]
    a.per_bit = a.per_bit or PER_BIT[1 if a.quick else 0]
    a.cov_trials = a.cov_trials or COV_TRIALS[1 if a.quick else 0]
    cases = [c for c in a.cases.split(",") if c]
    bad = [c for c in cases if c not in CASES]
    if bad:
        ap.error(f"unknown case(s) {bad}; known: {list(CASES)}")
    a.bitflip = a.bitflip if os.path.isabs(a.bitflip) else os.path.join(ROOT, a.bitflip)
    if not (os.path.isfile(a.bitflip) and os.access(a.bitflip, os.X_OK)):
        sys.exit(f"mitigation_bench: {a.bitflip} not found (build it: make build)")
    a.cdir = a.conformance_dir or default_conformance_dir()
    a.cdir = a.cdir if os.path.isabs(a.cdir) else os.path.join(ROOT, a.cdir)
    a.outdir = os.path.join(os.path.dirname(os.path.abspath(a.out)), "mitigations")
    os.makedirs(a.outdir, exist_ok=True)
    # every number from one binary: a private copy (the CLI may be rebuilt meanwhile)
    a.bitflip_copy = os.path.join(a.outdir, "bitflip")
    binary = file_id(a.bitflip)
    shutil.copy2(a.bitflip, a.bitflip_copy)

    minfo = machine_info()
    date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    argv = [os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)] + sys.argv[1:]
    t0 = time.time()
    rows = []
    for c in cases:
        rows.append(run_case(a, c, CASES[c]))
    minfo["loadavg_end"] = os.getloadavg()
    meta = {"date": date, "command": "/usr/bin/python3 " + shlex.join(argv),
            "is_make": argv[1:] == ["--bitflip", "build/bitflip", "--write-doc", "docs/MITIGATIONS.md"],
            "machine": minfo, "commit": engine_commit(), "binary": binary, "threads": a.threads,
            "quick": a.quick, "repeats": a.repeats, "per_bit": a.per_bit, "cov_trials": a.cov_trials,
            "elapsed_s": time.time() - t0,
            "campaign_s": sum(r.get("wall") or 0 for r in rows), "quiet_wait": a.quiet_wait}
    with open(a.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    log(f"raw results: {os.path.relpath(os.path.abspath(a.out), ROOT)}")
    return report(meta, rows, a.write_doc)


def report(meta, rows, doc):
    print_tables(rows)
    if doc:
        path = doc if os.path.isabs(doc) else os.path.join(ROOT, doc)
        write_doc(path, section(meta, rows))
        log(f"wrote the results section of {os.path.relpath(path, ROOT)}")
    return 1 if any((not r.get("ok") or r.get("error")) and not r.get("skipped") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
