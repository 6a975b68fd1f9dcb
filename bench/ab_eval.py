#!/usr/bin/python3
"""Golden eval of two bitflip builds and PyTorch on one model, alternately in one run:
a kernel change measured against the build before it on a loaded machine, where only
same-run ratios mean anything (docs/BENCHMARKS.md, "Same-run A/B of the eval").

  /usr/bin/python3 bench/ab_eval.py OLD_BITFLIP NEW_BITFLIP [--model dlrm_small]
      [--samples 65536] [--batch 256] [--rounds 5] [--repeat 10] [--threads 1]
      [--also LABEL=BITFLIP ...]

The model's eval set (bench/README.md's --conformance-dir, bench/models) is tiled to
--samples samples (0: as is) in a temporary directory, with its golden outputs tiled the
same way, so PyTorch (bench/torch_eval.py, its best settings: threads pinned,
OMP_WAIT_POLICY=PASSIVE, the golden check on) and both builds (`bitflip eval --repeat R`,
each reporting its best pass) read the same files. Each round runs old, new, PyTorch in
that order; the table gives the best and the median of the rounds' samples/s per peer and
the ratios of the bests. --model may also name a directory holding NAME.onnx, as
bench/big_drs.py writes (--name gives NAME then).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
import benchlib  # noqa: E402


def tiled_dir(src, name, samples, work):
    """work/ with NAME.onnx (a link), the eval set and ref.json tiled to `samples` rows."""
    os.symlink(os.path.join(src, name + ".onnx"), os.path.join(work, name + ".onnx"))
    for ext in (".pt",):
        if os.path.exists(os.path.join(src, name + ext)):
            os.symlink(os.path.join(src, name + ext), os.path.join(work, name + ext))
    data = benchlib.read_safetensors(os.path.join(src, name + ".eval.safetensors"))
    with open(os.path.join(src, name + ".ref.json")) as f:
        ref = json.load(f)
    n = next(iter(data.values())).shape[0]
    idx = np.arange(samples) % n if samples else np.arange(n)
    data = {k: np.ascontiguousarray(v[idx]) for k, v in data.items()}
    ref["golden"] = [ref["golden"][i] for i in idx]
    ref.pop("faults", None)
    if "labels" in data and "golden_auc" in ref:
        ref["golden_auc"] = benchlib.roc_auc(data["labels"].reshape(-1),
                                             benchlib.load_golden(ref).reshape(len(idx), -1)[:, 0])
    benchlib.write_safetensors(os.path.join(work, name + ".eval.safetensors"), data)
    with open(os.path.join(work, name + ".ref.json"), "w") as f:
        json.dump(ref, f)
    return len(idx)


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and "samples_per_s" in obj:
            return obj
    try:
        obj = json.loads(text)
        if isinstance(obj, dict) and "samples_per_s" in obj:
            return obj
    except ValueError:
        pass
    raise RuntimeError("no JSON with samples_per_s in: " + text[-300:])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--model", default="dlrm_small")
    ap.add_argument("--name", help="model name when --model is a directory")
    ap.add_argument("--samples", type=int, default=65536)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--torch-batch", type=int, default=1024)
    ap.add_argument("--interaction", default="matmul", choices=["matmul", "pairs"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=BITFLIP",
                    help="a further build, run after new in each round (repeatable)")
    a = ap.parse_args()

    if os.path.isdir(a.model):
        src, name = a.model, a.name
    else:
        src, name = benchlib.find_model(a.model), a.model
    work = tempfile.mkdtemp(prefix="bf-abeval.")
    try:
        n = tiled_dir(src, name, a.samples, work)
        onnx_path = os.path.join(work, name + ".onnx")
        data_path = os.path.join(work, name + ".eval.safetensors")
        env = benchlib.thread_env(a.threads)
        env["OMP_WAIT_POLICY"] = "PASSIVE"
        builds = [("old", a.old), ("new", a.new)] + [tuple(x.split("=", 1)) for x in a.also]
        peers = [(p, [b, "eval", onnx_path, data_path]) for p, b in builds]
        peers = [(p, c + ["--threads", str(a.threads), "--batch", str(a.batch), "--repeat", str(a.repeat),
                          "--json"]) for p, c in peers]
        if not a.no_torch:
            peers.append(("torch", ["/usr/bin/python3", os.path.join(BENCH, "torch_eval.py"), name, "--dir", work,
                                    "--threads", str(a.threads), "--batch", str(a.torch_batch),
                                    "--repeat", str(a.repeat), "--interaction", a.interaction]))
        rates = {p: [] for p, _ in peers}
        for r in range(a.rounds):
            for p, cmd in peers:
                cp = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if cp.returncode != 0:
                    sys.exit(f"{p} failed ({cp.returncode}): {cp.stderr[-500:]}")
                rates[p].append(last_json(cp.stdout)["samples_per_s"])
            print(f"round {r + 1}: " + ", ".join(f"{p} {rates[p][-1]:,.0f}" for p, _ in peers), flush=True)
        load = os.getloadavg()[0]
        print(f"\n{name}, {n} samples, {a.threads} thread(s), bitflip batch {a.batch}, torch batch "
              f"{a.torch_batch} ({a.interaction}), {a.rounds} rounds x best of {a.repeat} passes; load {load:.1f}")
        best = {p: max(v) for p, v in rates.items()}
        for p, v in rates.items():
            print(f"  {p:6s} best {best[p]:>12,.0f}  median {statistics.median(v):>12,.0f} samples/s")
        print(f"  new / old   {best['new'] / best['old']:.2f}x")
        if "torch" in best:
            for p, _ in builds:
                print(f"  {p} / torch {best[p] / best['torch']:.2f}x (medians {statistics.median(rates[p]) / statistics.median(rates['torch']):.2f}x)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
