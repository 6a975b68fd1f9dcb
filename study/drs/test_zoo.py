#!/usr/bin/python3
"""ctest drs_zoo: a tiny DRS zoo (tables capped at 500 rows) made by make_zoo.py, checked
against independent computations; exits 77 (skipped) where PyTorch or scikit-learn is
missing (scripts/install-deps.sh --bench installs them).

    /usr/bin/python3 study/drs/test_zoo.py BITFLIP WORKDIR

* cardinalities: every id is inside its table; the small tables (3 .. 27 rows) are all
  read; the capped ones have 500 rows
* Zipf: the rank-frequency slope of the capped tables' ids is the exponent asked for
  (a least-squares fit of log count against log rank, by numpy here)
* the teacher: its logits recomputed here from teacher.npz with the formula of
  synth.py's docstring (this file's own numpy, not synth.py's), and its AUC by
  scikit-learn, equal to what the manifest says
* each of the five models: bitflip eval's outputs match PyTorch's (NAME.ref.npy) to
  1e-4 relative / 1e-5 absolute, and bitflip's golden AUC equals scikit-learn's on them
* the Criteo converter's output feeds the DLRM: a TSV whose ids are known, converted
  with --rows from the manifest, evaluated by bitflip
* run_study.py and render.py run end to end on the DLRM (two rates, two repeats, fp32,
  and per-table campaigns for two tables): the sweep carries ecc (no critical trial, all
  DUE at BER 1e-2, 12.5% storage), the section, the figures, bitflip report's HTML and
  Markdown
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests"))
import forkrun  # noqa: E402  (tests/forkrun.py)
FAILS = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}", file=sys.stdout if cond else sys.stderr, flush=True)
    if not cond:
        FAILS.append(what)


def make_zoo(args, work):
    """make_zoo.py ARGS in a forked child of this process, its stderr kept: (exit status, stderr).
    Not a new interpreter: under ctest torch_checks (tests/torch_checks.py), which runs this
    test with torch already imported, the child does not import it again (~3.7 CPU-s); run
    alone, the child imports it as make_zoo.py's own process did."""
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "make_zoo.log")
    rc = forkrun.forked(forkrun.script(os.path.join(HERE, "make_zoo.py"), args), log)
    with open(log, errors="replace") as f:   # make_zoo.py writes its log to stderr, nothing to stdout
        return rc, f.read()


def main():
    bitflip, work = sys.argv[1], sys.argv[2]
    # torch is make_zoo.py's, in a process of its own: here only whether it is
    # installed (an import here as well was ~2.7 of this test's ~26 CPU-s)
    try:
        import numpy as np
        from sklearn.metrics import roc_auc_score
        if importlib.util.find_spec("torch") is None:
            raise ImportError(name="torch")
    except ImportError as e:
        print(f"SKIP: {e.name} is missing: install Debian's python3-torch, python3-sklearn and "
              f"python3-numpy (scripts/install-deps.sh --bench)")
        return 77
    sys.path.insert(0, HERE)
    import criteo
    zoo = os.path.join(work, "zoo")
    shutil.rmtree(work, ignore_errors=True)   # make_zoo.py would keep an earlier run's models
    cap, zipf = 500, 1.1
    rc, err = make_zoo(["--out", zoo, "--cap", str(cap), "--dim", "4", "--train", "30000", "--batch", "256",
                        "--eval", "4000", "--zipf", str(zipf), "--seed", "3"], work)
    print(err[-3000:])
    if rc != 0:
        print("FAIL make_zoo.py", file=sys.stderr)
        return 1
    man = json.load(open(os.path.join(zoo, "manifest.json")))
    ev = criteo.read_safetensors_numpy(os.path.join(zoo, "eval.safetensors"))
    dense, sparse, labels = ev["dense"], ev["sparse"], ev["labels"]
    rows = man["table_rows"]
    check(rows == [min(c, cap) for c in criteo.KAGGLE_CARDINALITIES], "table rows: Kaggle's cardinalities capped at 500")
    check(dense.shape == (4000, 13) and sparse.shape == (4000, 26) and labels.shape == (4000,),
          "eval set shapes dense [4000,13], sparse [4000,26], labels [4000]")
    check(bool(np.all(sparse >= 0) and np.all(sparse < np.array(rows))), "every id is inside its table")
    small = [t for t, r in enumerate(rows) if r <= 27]
    check(all(len(np.unique(sparse[:, t])) == rows[t] for t in small),
          f"the small tables ({', '.join(f'C{t + 1}' for t in small)}) have every row read")
    check(set(np.unique(labels)) <= {0.0, 1.0} and 0.15 < labels.mean() < 0.4,
          f"labels 0/1, click rate {labels.mean():.3f} near Criteo's 0.26")
    # Zipf: counts by rank, summed over the capped tables, ranks 1..30
    capped = [t for t, r in enumerate(rows) if r == cap]
    counts = np.zeros(30)
    for t in capped:
        c = np.sort(np.bincount(sparse[:, t], minlength=cap))[::-1]
        counts += c[:30]
    slope = np.polyfit(np.log(np.arange(1, 31)), np.log(counts), 1)[0]
    check(abs(slope + zipf) < 0.15, f"rank-frequency slope {slope:.3f} of the {len(capped)} capped tables ~ -{zipf}")
    # teacher, recomputed from its parameters (synth.py's docstring)
    T = np.load(os.path.join(zoo, "teacher.npz"))
    offs = np.concatenate([[0], np.cumsum(T["rows"])[:-1]])
    z = (dense.astype(np.float64) - T["mu"]) @ T["a"]
    V = np.zeros((len(dense), 4))
    VV = np.zeros(len(dense))
    for t in range(26):
        g = offs[t] + sparse[:, t]
        z += T["w"][g]
        v = T["v"][g].astype(np.float64)
        V += v
        VV += (v * v).sum(1)
    z = float(T["scale"]) * (z + 0.5 * ((V * V).sum(1) - VV)) + float(T["b0"])
    saved = np.load(os.path.join(zoo, "teacher_logit.npy"))
    check(np.allclose(z, saved, rtol=1e-9, atol=1e-9), "the teacher's logits recomputed from teacher.npz")
    tauc = roc_auc_score(labels, z)
    check(abs(tauc - man["teacher_auc"]) < 1e-9 and 0.7 < tauc < 0.9,
          f"teacher AUC {tauc:.4f} (scikit-learn) = manifest's {man['teacher_auc']:.4f}, in (0.7, 0.9)")
    # the models: bitflip against PyTorch
    for name, info in man["models"].items():
        ref = np.load(os.path.join(zoo, f"{name}.ref.npy"))
        out = os.path.join(work, f"{name}.out.csv")
        p = subprocess.run([bitflip, "eval", os.path.join(zoo, info["onnx"]), os.path.join(zoo, "eval.safetensors"),
                            "--outputs", out, "--json"], capture_output=True, text=True)
        if p.returncode != 0:
            check(False, f"{name}: bitflip eval: {p.stderr.strip()}")
            continue
        got = np.loadtxt(out, dtype=np.float64)
        ok = got.shape == ref.shape and bool(np.all(np.abs(got - ref) <= np.maximum(1e-5, 1e-4 * np.abs(ref))))
        check(ok, f"{name}: bitflip's outputs match PyTorch's (max diff "
                  f"{np.max(np.abs(got - ref)) if got.shape == ref.shape else 'shape'})")
        gold = json.loads(p.stdout)
        bauc = gold.get("golden", gold).get("auc") if isinstance(gold, dict) else None
        sk = roc_auc_score(labels, got)
        check(bauc is not None and abs(bauc - sk) < 1e-6 and abs(info["golden_auc_torch"] - roc_auc_score(labels, ref)) < 1e-6,
              f"{name}: bitflip's golden AUC {bauc} = scikit-learn's {sk:.6f} on its outputs; the manifest's PyTorch AUC too")
        check(sk > 0.6, f"{name}: trained (AUC {sk:.3f} > 0.6 after 30,000 samples)")
    # converter -> bitflip
    tsv = os.path.join(work, "ids.tsv")
    with open(tsv, "w") as f:
        for n in range(8):
            f.write("\t".join([str(n % 2)] + [str(n)] * 13 + [f"{n * 1000 + t:08x}" for t in range(26)]) + "\n")
    est = os.path.join(work, "ids.safetensors")
    p = subprocess.run([sys.executable, os.path.join(HERE, "criteo_tsv.py"), tsv, "--out", est,
                        "--rows", os.path.join(zoo, "manifest.json")], capture_output=True, text=True)
    got = criteo.read_safetensors_numpy(est)["sparse"] if p.returncode == 0 else None
    want = np.array([[(n * 1000 + t) % rows[t] for t in range(26)] for n in range(8)])
    check(got is not None and np.array_equal(got, want), "converter: ids = hash mod the manifest's rows")
    p = subprocess.run([bitflip, "eval", os.path.join(zoo, "dlrm.onnx"), est, "--json"], capture_output=True, text=True)
    check(p.returncode == 0, f"bitflip eval runs the DLRM on the converted TSV {p.stderr.strip()}")
    # the study, end to end on a sliver
    out = os.path.join(work, "study")
    p = subprocess.run([sys.executable, os.path.join(HERE, "run_study.py"), "--zoo", zoo, "--out", out,
                        "--bitflip", bitflip, "--models", "dlrm", "--rates", "1e-4,1e-2", "--repeats", "2",
                        "--representations", "fp32", "--tables", "C3,C9", "--threads", "1"],
                       capture_output=True, text=True)
    check(p.returncode == 0, f"run_study.py on the DLRM {p.stderr.strip()[-2000:]}")
    if p.returncode == 0:
        st = json.load(open(os.path.join(out, "study.json")))
        kinds = sorted(c["name"] for c in st["campaigns"])
        check(kinds == ["sweep_dlrm_fp32", "table_dlrm_emb.C3", "table_dlrm_emb.C9", "table_dlrm_mlp"],
              f"campaigns: {kinds}")
        r = json.load(open(os.path.join(out, "results", "sweep_dlrm_fp32.json")))
        names = [m["name"] for m in r["mitigations"]]
        check(names == ["none", "clip", "sbp", "abft", "ecc"] and r["summary"]["trials"] == 4,
              f"the sweep ran none, clip, sbp, abft, ecc on 2 rates x 2 repeats: {names}")
        # ecc: a word with one error is corrected, so a trial is the golden model or DUE; at
        # 1e-2 each 72-bit word holds two or more errors with probability 16%, and a model
        # of thousands of words has such a word in every trial
        ecc = [m for m in r["mitigations"] if m["name"] == "ecc"]
        top = ecc[0]["by_rate"][-1] if ecc else None
        check(bool(ecc) and ecc[0]["summary"]["outcomes"]["critical"] == 0 and top["rate"] == 1e-2
              and top["outcomes"]["due"] == top["trials"],
              f"ecc: no critical trial, every trial DUE at 1e-2: {top and top['outcomes']}")
        check(bool(ecc) and abs(ecc[0]["cost"]["storage_overhead"] - 0.125) < 0.01,
              f"ecc's storage: 8 check bits per 64 (12.5%, a little more for padded last words): "
              f"{ecc and ecc[0]['cost']['storage_overhead']}")
        t = json.load(open(os.path.join(out, "results", "table_dlrm_emb.C3.json")))
        check([s["name"] for s in t["campaign"]["sites"]] == ["emb.C3.weight"], "a table campaign hits one table")
        p = subprocess.run([sys.executable, os.path.join(HERE, "render.py"), "--study", os.path.join(out, "study.json"),
                            "--figures", os.path.join(work, "fig"), "--bitflip", bitflip, "--print"],
                           capture_output=True, text=True)
        check(p.returncode == 0 and "| dlrm | fp32 |" in p.stdout and "emb.C3" in p.stdout
              and "| rate | none | clip | sbp | abft | ecc |" in p.stdout,
              f"render.py renders the section {p.stderr.strip()[-2000:]}")
        check(all(os.path.exists(os.path.join(work, f)) for f in ("fig/auc_vs_ber.png", "fig/report.md",
                                                                 "fig/report-figures/ber_curve.svg",
                                                                 "study/report_dlrm.html")),
              "render.py wrote the figures and bitflip report's Markdown and HTML")
    if FAILS:
        print(f"{len(FAILS)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
