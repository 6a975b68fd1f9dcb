#!/usr/bin/python3
"""ctest drs_render: render.py on a small made-up study (one model, three rates, the
five configurations none, clip, sbp, abft and ecc, one per-table campaign), whose numbers
are chosen here so that every cell the section should show can be written down by hand.
Standard library only (the figures are drawn only where matplotlib is installed, and
their absence is not a failure here); no bitflip binary (render.py then skips the HTML).

    /usr/bin/python3 study/drs/test_render.py WORKDIR

* the per-rate table of the fp32 sweep: each configuration's mean AUC with its critical /
  DUE shares side by side ("0.7000 · 0% / 40%" for ecc at 1e-5), and ecc's recovery
* the first table's ecc cell: its critical trials over the sweep, the highest rate it
  corrected everything at, and its DUE share at each rate above up to the first all-DUE
* the best-recovery table and the cost table have an ecc column (storage 12.5%: 8 check
  bits per 64 data bits)
* a study made before ecc (no ecc configuration in its results) renders with "–" there
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FAILS = []
RATES = [1e-6, 1e-5, 1e-4]
GOLDEN = 0.8


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}", file=sys.stdout if cond else sys.stderr, flush=True)
    if not cond:
        FAILS.append(what)


def metric(mean):
    return {"n": 10, "mean": mean, "ci": [mean - 0.01, mean + 0.01]}


def by_rate(rate, auc, crit, due, faulty):
    """One rate's row of a configuration: 10 trials, CRIT and DUE of them critical / DUE."""
    rec = None
    if faulty is not None and faulty < GOLDEN:
        v = (auc - faulty) / (GOLDEN - faulty)
        rec = {"metric": "auc", "golden": GOLDEN, "faulty": faulty, "mitigated": auc, "value": v, "ci": [v, v]}
    return {"rate": rate, "trials": 10,
            "outcomes": {"masked": 10 - crit - due, "tolerable": 0, "critical": crit, "due": due},
            "critical": {"rate": crit / 10, "ci": [0, 1]}, "due": {"rate": due / 10, "ci": [0, 1]},
            "metrics": {"auc": metric(auc)}, "recovery": rec}


# per configuration and rate: (mean AUC, critical trials, DUE trials) of 10
ROWS = {
    "none": [(0.79, 3, 0), (0.7, 8, 1), (0.5, 0, 10)],
    "clip": [(0.8, 2, 0), (0.75, 9, 0), (0.6, 10, 0)],
    "sbp": [(0.8, 0, 0), (0.8, 1, 0), (0.8, 6, 0)],
    "abft": [(0.8, 0, 3), (0.8, 0, 10), (0.8, 0, 10)],
    "ecc": [(0.8, 0, 0), (0.8, 0, 4), (0.8, 0, 10)],
}
COST = {"none": (1.0, 0.0), "clip": (1.1, 1e-6), "sbp": (1.0, 9 / 32), "abft": (1.2, 1e-4), "ecc": (1.0, 0.125)}


def sweep(configs):
    faulty = [a for a, _, _ in ROWS["none"]]
    mits = []
    for name in configs:
        rows = [by_rate(r, a, c, d, None if name == "none" else faulty[j])
                for j, (r, (a, c, d)) in enumerate(zip(RATES, ROWS[name]))]
        crit = sum(c for _, c, _ in ROWS[name])
        due = sum(d for _, _, d in ROWS[name])
        mits.append({"name": name, "golden": {"auc": GOLDEN}, "by_rate": rows,
                     "summary": {"trials": 30, "outcomes": {"critical": crit, "due": due}},
                     "recovery": None, "cost": {"time_ratio": COST[name][0], "storage_overhead": COST[name][1]}})
    return {"golden": {"auc": GOLDEN}, "campaign": {"population": 1_000_000}, "by_rate": mits[0]["by_rate"],
            "mitigations": mits}


def table():
    return {"golden": {"auc": GOLDEN}, "campaign": {"population": 64_000},
            "summary": {"metrics": {"auc": metric(0.799)}, "rates": {"due": {"rate": 0.0}}}}


def make_study(work, configs):
    os.makedirs(os.path.join(work, "results"), exist_ok=True)
    zoo = {"cap": 200000, "table_rows": [1000, 3], "dim": 16, "zipf": 1.1, "train_samples": 1000, "epochs": 1,
           "eval_samples": 100, "click_rate_eval": 0.25, "teacher_auc": 0.81,
           "models": {"dlrm": {"parameters": 20000, "table_parameters": 16048, "golden_auc_torch": GOLDEN,
                               "train_seconds": 1, "onnx_bytes": 80000}}}
    camps = []
    for kind, name, res, extra in (("sweep", "sweep_dlrm_fp32", sweep(configs), {"representation": "fp32"}),
                                   ("table", "table_dlrm_emb.C1", table(), {"table": "emb.C1", "rows": 1000, "dim": 16})):
        rp = os.path.join(work, "results", name + ".json")
        with open(rp, "w") as f:
            json.dump(res, f)
        camps.append(dict(kind=kind, name=name, model="dlrm", spec="", result=rp, seconds=1.0, command="", **extra))
    study = {"zoo": zoo, "rates": RATES, "repeats": 10, "table_rate": 1e-5, "representations": ["fp32"],
             "threads": 2, "seed": 7, "mitigations": configs, "campaigns": camps, "started": "2026-11-30T00:00:00+00:00",
             "machine": {"nproc": 2, "loadavg_start": [1.0], "loadavg_end": [1.0]}, "seconds": 2.0}
    path = os.path.join(work, "study.json")
    with open(path, "w") as f:
        json.dump(study, f)
    return path


def render(work, configs):
    path = make_study(work, configs)
    p = subprocess.run([sys.executable, os.path.join(HERE, "render.py"), "--study", path, "--figures",
                        os.path.join(work, "fig"), "--bitflip", os.path.join(work, "no-bitflip"), "--print"],
                       capture_output=True, text=True)
    check(p.returncode == 0, f"render.py renders {', '.join(configs)} {p.stderr.strip()[-2000:]}")
    return p.stdout


def row(text, start, having=""):
    """The first table row of TEXT that starts with START (and holds HAVING), split into cells."""
    for line in text.splitlines():
        if line.startswith(start) and having in line:
            return [c.strip() for c in line.strip().strip("|").split("|")]
    return None


def main():
    work = sys.argv[1]
    shutil.rmtree(work, ignore_errors=True)
    out = render(os.path.join(work, "ecc"), ["none", "clip", "sbp", "abft", "ecc"])
    hdr = row(out, "| rate | none |")
    check(hdr == ["rate", "none", "clip", "sbp", "abft", "ecc", "clip recovery", "sbp recovery", "abft recovery",
                  "ecc recovery"], f"per-rate header has ecc and its recovery: {hdr}")
    r = row(out, "| 1e-5 | 0.7000")
    # by hand: ecc at 1e-5 keeps AUC 0.8, 0 of 10 critical, 4 of 10 DUE; recovery
    # (0.8 - 0.7) / (0.8 - 0.7) = 1; clip (0.75 - 0.7) / 0.1 = 0.5
    check(r is not None and r[5] == "0.8000 · 0% / 40%" and r[9] == "1.00 [1.00, 1.00]",
          f"1e-5: ecc's AUC · critical / DUE and its recovery: {r}")
    check(r is not None and r[1] == "0.7000 · 80% / 10%" and r[2] == "0.7500 · 90% / 0%" and r[6] == "0.50 [0.50, 0.50]",
          f"1e-5: none's and clip's cells beside ecc's: {r}")
    b = row(out, "| dlrm | 1e-5 |")   # the first table: onset 1e-5 (0.7 < 0.8 - 0.01)
    # ecc: 0 critical of 30; no DUE at 1e-6; 40% at 1e-5, 100% at 1e-4
    check(b is not None and "0 of 30; 0% to 1e-6, 1e-5: 40%, 1e-4: 100%" in b,
          f"first table: ecc's critical trials and DUE by rate: {b}")
    best = row(out, "| dlrm | fp32 | ", having=" @ ")
    # the faults cost 0.01 AUC at 1e-6 already, and ecc recovered all of it there, with no DUE
    check(row(out, "| model | format | clip") == ["model", "format", "clip", "sbp", "abft", "ecc"]
          and best is not None and best[5] == "1.00 [1.00, 1.00] @ 1e-6 (DUE 0%)",
          f"best recovery: ecc's first full recovery at 1e-6 with its DUE share: {best}")
    cost = row(out, "| dlrm | 1.10x |")
    check(cost is not None and cost[4] == "1.00x" and cost[8] == "12.5%" and cost[6] == "28.1%",
          f"cost: ecc's time ratio and storage 12.5% beside sbp's 28.1%: {cost}")
    check("configurations none, clip, sbp, abft, ecc on the same faults" in out,
          "the campaigns line names the five configurations")
    try:
        import matplotlib  # noqa: F401
        check(os.path.exists(os.path.join(work, "ecc", "fig", "protections.png")), "protections.png drawn")
    except ImportError:
        print("ok   (matplotlib missing: no figures to check)")
    old = render(os.path.join(work, "old"), ["none", "clip", "sbp", "abft"])
    r = row(old, "| 1e-5 | 0.7000")
    check(r is not None and r[5] == "–" and r[9] == "–", f"a study without ecc: '–' in its ecc cells: {r}")
    check("configurations none, clip, sbp, abft on the same faults" in old, "and its campaigns line has no ecc")
    if FAILS:
        print(f"{len(FAILS)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
