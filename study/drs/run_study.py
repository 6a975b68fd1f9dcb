#!/usr/bin/python3
"""Runs the DRS study's campaigns on a zoo made by make_zoo.py (docs/STUDY.md).

    /usr/bin/python3 study/drs/run_study.py --zoo build/study/drs/zoo --out build/study/drs
        [--bitflip build/bitflip] [--threads 2] [--repeats 10] [--rates 1e-10,...,1e-3]
        [--table-rate 1e-5] [--representations fp32,fp16,int8] [--models a,b]
        [--skip-tables | --tables C1,C2] [--resume] [--specs-only] [--exact-models M1,M2]

For each model of the zoo's manifest.json, with `bitflip run --local SPEC --out RESULT`:

  sweep_MODEL_REPR   BER over every weight (tables and MLPs), --rates (default 1e-10 ..
                     1e-3 by decades), --repeats independent trials per rate, in storage
                     REPR (fp32, fp16, int8), AUC and log loss; the configurations none,
                     clip (activation clipping, bounds profiled on the golden pass), sbp
                     (ECC on the sign and exponent bits; int8: its sign bit) and abft
                     (checksums on every Gemm/MatMul, correcting one wrong channel) and
                     ecc (SECDED (72,64) over every 64-bit word of the stored weights,
                     check bits flipping at the rate too) run on the same faults (the
                     spec's "mitigations": docs/MITIGATIONS.md)
  table_MODEL_T      BER at --table-rate confined to one weight tensor T (each embedding
                     table, and the MLPs together as "mlp"), fp32, --repeats trials: which
                     tables' errors hurt, against their size and embedding dim

--exact-models runs those models' campaigns with `bitflip run --exact` (every trial re-runs
the whole eval set; the outcomes are the same, docs/ENGINE.md), for checking.  Default: none.
FM's campaigns used to: on FM at BER 1e-3 the differential engine took 24 times as long as
--exact (33 s against 1.4 s for 2 trials on 2026-11-26); it now runs a trial whose faults
reach nearly the whole pass as a full pass itself, and is as fast (docs/ENGINE.md).

Writes OUT/specs/NAME.json, OUT/results/NAME.json (bitflip's result), OUT/campaigns.tsv
(spec and result path per line) and OUT/study.json (the zoo's manifest, each campaign's
spec path, result path and wall time, the whole run's time and the machine), which
render.py turns into docs/STUDY.md's tables and figures.  --specs-only writes the specs,
campaigns.tsv and study.json but runs nothing (except one one-trial campaign per model
that lists its tables), for running the campaigns on a cluster: each line of
campaigns.tsv is one `bitflip run --local SPEC --out RESULT`; render.py then reads the
results where study.json says they are.  A campaign that fails stops the study with bitflip's error.  Standard library
only.
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time

# Up to 1e-3, past where ECC stops correcting everything: a (72,64) word holds two or
# more errors with probability about C(72,2) p^2, so a zoo model of 12M words (24M fp32
# weights) has an uncorrectable word in 3% of its trials at 1e-6, 95% at 1e-5 and all of
# them from 1e-4 (where one word in 40,000 is; one in 400 at 1e-3).
RATES = [1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3]
REPRESENTATIONS = ["fp32", "fp16", "int8"]
MITIGATIONS = [
    "none",
    {"name": "clip", "clip": {"bounds": "profile"}},
    "sbp",
    {"name": "abft", "abft": {"mode": "correct"}},
    "ecc",
]


def log(msg):
    print(f"[study-drs] {msg}", file=sys.stderr, flush=True)


def table_tensors(sites, table_rows):
    """(label, tensor, rows, dim) of each embedding table among a result's campaign.sites:
    the tensors read by Gather or bf.EmbeddingBag, labelled by PyTorch name without
    ".weight" (models.py names them <part>.C<k>.weight, Wide&Deep's bag wide.weight)."""
    out = []
    for s in sites:
        if s["op"] not in ("Gather", "bf.EmbeddingBag"):
            continue
        name = s.get("torch_name", s["name"])
        lab = name[:-len(".weight")] if name.endswith(".weight") else name
        feat = lab.split(".")[-1]
        if feat.startswith("C") and feat[1:].isdigit() and 1 <= int(feat[1:]) <= len(table_rows):
            rows = table_rows[int(feat[1:]) - 1]
        else:
            rows = sum(table_rows)   # the wide part's one bag over every field's ids
        out.append((lab, s["name"], rows, s["elements"] // rows))
    return out


def load_json(path):
    with open(path) as f:
        return json.load(f)


def run(bitflip, spec, spec_path, result_path, threads, exact=False):
    with open(spec_path, "w") as f:
        json.dump(spec, f, indent=1)
    cmd = [bitflip, "run", "--local", spec_path, "--threads", str(threads), "--out", result_path]
    if exact:
        cmd.append("--exact")
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    secs = time.time() - t0
    if p.returncode not in (0,) or not os.path.exists(result_path):
        raise RuntimeError(f"{' '.join(map(shlex.quote, cmd))} failed ({p.returncode}):\n{p.stderr}")
    return secs, " ".join(map(shlex.quote, cmd))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zoo", default="build/study/drs/zoo")
    ap.add_argument("--out", default="build/study/drs")
    ap.add_argument("--bitflip", default="build/bitflip")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--rates", default=",".join(f"{r:g}" for r in RATES))
    ap.add_argument("--table-rate", type=float, default=1e-5)
    ap.add_argument("--representations", default=",".join(REPRESENTATIONS))
    ap.add_argument("--models", help="a subset of the zoo's models (default: all)")
    ap.add_argument("--skip-tables", action="store_true", help="no per-table campaigns")
    ap.add_argument("--tables", help="per-table campaigns only for these features (C1..C26, comma-separated)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--exact-models", default="",
                    help="models whose campaigns run with `bitflip run --exact`, comma-separated "
                         "(default: none; the outcomes are the same, for checking)")
    ap.add_argument("--resume", action="store_true",
                    help="keep a campaign's result when OUT already holds it for the same spec")
    ap.add_argument("--specs-only", action="store_true",
                    help="write the specs, OUT/campaigns.tsv and OUT/study.json without running "
                         "the campaigns (to run them elsewhere: docs/STUDY.md, on a Slurm cluster)")
    a = ap.parse_args(argv)
    try:
        rates = [float(r) for r in a.rates.split(",") if r]
    except ValueError:
        ap.error(f"--rates: not a comma-separated list of numbers: {a.rates!r}")
    if not rates or any(not 0 < r <= 1 for r in rates):
        ap.error("--rates must be in (0, 1]")
    if a.repeats < 1 or a.threads < 1 or not 0 < a.table_rate <= 1:
        ap.error("--repeats and --threads must be at least 1, --table-rate in (0, 1]")
    exact_models = set(m for m in a.exact_models.split(",") if m)
    reprs = [r for r in a.representations.split(",") if r]
    for r in reprs:
        if r not in REPRESENTATIONS:
            ap.error(f"--representations: {r!r} is not one of {', '.join(REPRESENTATIONS)}")
    man_path = os.path.join(a.zoo, "manifest.json")
    if not os.path.exists(man_path):
        print(f"run_study: {man_path} is missing: make the zoo first "
              f"(/usr/bin/python3 study/drs/make_zoo.py --out {a.zoo})", file=sys.stderr)
        return 1
    if not os.access(a.bitflip, os.X_OK):
        print(f"run_study: {a.bitflip} is not an executable: build it (make build) or pass --bitflip",
              file=sys.stderr)
        return 1
    with open(man_path) as f:
        info = json.load(f)
    names = list(info["models"])
    if a.models:
        want = a.models.split(",")
        for m in want:
            if m not in info["models"]:
                ap.error(f"--models: {m!r} is not in {man_path} (it has {', '.join(names)})")
        names = want
    os.makedirs(os.path.join(a.out, "specs"), exist_ok=True)
    os.makedirs(os.path.join(a.out, "results"), exist_ok=True)
    dataset = os.path.join(a.zoo, "eval.safetensors")
    study = {"zoo": info, "rates": rates, "repeats": a.repeats, "table_rate": a.table_rate,
             "representations": reprs, "threads": a.threads, "seed": a.seed,
             "mitigations": MITIGATIONS, "campaigns": [],
             "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
             "machine": {"nproc": os.cpu_count(), "platform": platform.platform(),
                         "loadavg_start": os.getloadavg()}}
    t0 = time.time()
    before = {}   # --resume: the earlier run's campaigns, for their times
    if a.resume and os.path.exists(os.path.join(a.out, "study.json")):
        before = {c["name"]: c for c in load_json(os.path.join(a.out, "study.json"))["campaigns"]}

    def campaign(kind, name, model, spec, **extra):
        sp = os.path.join(a.out, "specs", name + ".json")
        rp = os.path.join(a.out, "results", name + ".json")
        if a.resume and os.path.exists(rp) and os.path.exists(sp) and load_json(sp) == spec \
                and kind != "sites":
            old = before.get(name, {})
            log(f"{name}: kept from the earlier run (--resume)")
            study["campaigns"].append(dict(kind=kind, name=name, model=model, spec=sp, result=rp,
                                           seconds=old.get("seconds"), command=old.get("command", ""),
                                           resumed=True, **extra))
            return
        if a.specs_only and kind != "sites":
            with open(sp, "w") as f:
                json.dump(spec, f, indent=1)
            secs, cmd = None, f"bitflip run --local {shlex.quote(sp)} --out {shlex.quote(rp)}"
        else:
            secs, cmd = run(a.bitflip, spec, sp, rp, a.threads, exact=model in exact_models)
            log(f"{name}: {secs:.1f} s")
        study["campaigns"].append(dict(kind=kind, name=name, model=model, spec=sp, result=rp,
                                       seconds=None if secs is None else round(secs, 2),
                                       command=cmd, **extra))

    for m in names:
        onnx_path = os.path.join(a.zoo, info["models"][m]["onnx"])
        for rep in reprs:
            spec = {"model": onnx_path, "dataset": dataset, "seed": a.seed,
                    "faults": {"target": "weights", "model": "ber", "rates": rates,
                               "repeats": a.repeats, "representation": rep},
                    "metrics": ["auc", "logloss"], "mitigations": MITIGATIONS}
            campaign("sweep", f"sweep_{m}_{rep}", m, spec, representation=rep)
        if a.skip_tables:
            continue
        want = set(a.tables.split(",")) if a.tables else None
        if reprs and not a.specs_only:
            sites = load_json(study["campaigns"][-1]["result"])["campaign"]["sites"]
        else:   # no sweep to read the sites from: a one-trial campaign lists them
            campaign("sites", f"sites_{m}", m, {"model": onnx_path, "dataset": dataset, "trials": 1,
                                                "faults": {"model": "bitflip"}})
            sites = load_json(study["campaigns"][-1]["result"])["campaign"]["sites"]
        groups = [(lab, [t], rows, d) for lab, t, rows, d in table_tensors(sites, info["table_rows"])
                  if want is None or lab.split(".")[-1] in want]
        groups.append(("mlp", ["op:Gemm"], None, None))
        for lab, tensors, rows, d in groups:
            spec = {"model": onnx_path, "dataset": dataset, "seed": a.seed,
                    "faults": {"target": "weights", "tensors": tensors, "model": "ber",
                               "rates": [a.table_rate], "repeats": a.repeats, "representation": "fp32"},
                    "metrics": ["auc", "logloss"]}
            campaign("table", f"table_{m}_{lab}", m, spec, table=lab, rows=rows, dim=d)
    study["campaigns"] = [c for c in study["campaigns"] if c["kind"] != "sites"]
    study["seconds"] = None if a.specs_only else round(time.time() - t0, 1)
    with open(os.path.join(a.out, "campaigns.tsv"), "w") as f:
        for c in study["campaigns"]:
            f.write(f"{c['spec']}\t{c['result']}\n")
    study["machine"]["loadavg_end"] = os.getloadavg()
    with open(os.path.join(a.out, "study.json"), "w") as f:
        json.dump(study, f, indent=1)
    if a.specs_only:
        log(f"{len(study['campaigns'])} campaigns written, none run: {os.path.join(a.out, 'campaigns.tsv')}")
    else:
        log(f"{len(study['campaigns'])} campaigns in {study['seconds']:.0f} s: {os.path.join(a.out, 'study.json')}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print(f"run_study: {e}", file=sys.stderr)
        sys.exit(1)
