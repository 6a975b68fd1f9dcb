#!/usr/bin/python3
"""Time to an answer (issue 32): trials and wall time until the critical rate is known to
±0.5% overall and ±2% for every tensor at 95%, with `adaptive` and with `uniform` + `stop`,
and what PyTorch's flip-and-rerun loop would need for the uniform design.

  /usr/bin/python3 bench/answer_bench.py [--models digits_mlp,resnet18,mobilenet_v2,dlrm_criteo]
        [--samples N] [--uniform-cap T] [--torch-trials K] [--timeout S] [--out bench/out/answer.json]
  /usr/bin/python3 bench/answer_bench.py --floors --models resnet18,mobilenet_v2   # bounds, runs nothing

Per model, 1 thread, each a whole `bitflip run --local` process (setup counted):
  adaptive  "sampling": "adaptive", "stop": {"margin": M, "per_tensor_margin": MT}: the trials it
            ran (pilot included) and its wall time.
  uniform   "sampling": "uniform" with the same stop, at most --uniform-cap trials. When the cap
            comes first (every tensor's ±2% under uniform needs its smallest tensor to draw ~300
            trials, i.e. ~300 x population / that tensor's faults in all), the trials it needs are
            projected from the adaptive run's rates: for each tensor the n whose Wilson interval at
            its rate is within ±MT, divided by its share of the population; the largest of those and
            the overall rate's own n. Its wall time = those trials x its measured seconds per trial.
  torch     PyTorch's flip-and-rerun loop at 1 thread: XOR one bit of one parameter, forward the
            eval set at its best batch, compare, XOR back, over --torch-trials uniform faults
            (bench/real_bench.py --torch-peer for resnet18 and mobilenet_v2, on the same first N
            samples with --samples; bench/torch_campaign.py --flip replaying the uniform campaign's
            own faults, from its --trials-out, for dlrm_criteo): seconds per trial, times the
            uniform trials.
Models: digits_mlp (tests/fixtures/conformance), resnet18_c32 and mobilenet_v2_c32 (torchvision's
architectures at 3x32x32, 10 classes, 64 images: small_image_model), dlrm_large (bench/make_models.py), resnet18 and mobilenet_v2 (bench/real_bench.py's
exports, 224x224, 64 samples unless --samples N takes the first N), dlrm_criteo (bench/big_drs.py
--cap 200000 --name dlrm_criteo_200k, 24.2M parameters, into build/big_drs/). Results: --out; the table on stdout in the
form of docs/BENCHMARKS.md's "Time to an answer" section.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

PY = "/usr/bin/python3"
BENCH = benchlib.BENCH_DIR
ROOT = benchlib.REPO_ROOT
OUT = os.path.join(BENCH, "out", "answer")
Z95 = 1.959963984540054


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def model_files(name, samples):
    """(onnx, eval set, batch) of a model; the eval set cut to `samples` when asked."""
    if name == "digits_mlp":
        d = os.path.join(ROOT, "tests", "fixtures", "conformance")
        return os.path.join(d, "digits_mlp.onnx"), os.path.join(d, "digits_mlp.eval.safetensors"), 64
    if name == "dlrm_large":
        stem = os.path.join(benchlib.MODELS_DIR, "dlrm_large")
        if not os.path.exists(stem + ".onnx"):
            subprocess.run([PY, os.path.join(BENCH, "make_models.py")], check=True)
        return stem + ".onnx", stem + ".eval.safetensors", 1024
    if name == "dlrm_criteo":
        d = os.path.join(ROOT, "build", "big_drs")
        stem = os.path.join(d, "dlrm_criteo_200k")
        if not os.path.exists(stem + ".onnx"):
            subprocess.run([PY, os.path.join(BENCH, "big_drs.py"), "--cap", "200000", "--out", d, "--name", "dlrm_criteo_200k"],
                           check=True)
        return stem + ".onnx", stem + ".eval.safetensors", 256
    if name.endswith("_c32"):
        return small_image_model(name[:-4]) + (16,)
    import real_bench
    stem = real_bench.make_model(name)
    data = stem + ".eval.safetensors"
    if samples:
        data = os.path.join(OUT, f"{name}_{samples}.eval.safetensors")
        if not os.path.exists(data):
            t = benchlib.read_safetensors(stem + ".eval.safetensors")
            benchlib.write_safetensors(data, {k: v[:samples] for k, v in t.items()})
    return stem + ".onnx", data, 8


def small_image_model(arch):
    """torchvision's resnet18 or mobilenet_v2 (weights=None, 10 classes) at CIFAR's 3x32x32, 64
    random images labelled with the model's own top-1: every tensor and layer of the 224x224
    network (the same 26 or 67 fp32 tensors bar the classifier's size), at about 1/50 of the work
    per trial, so that adaptive's tens of thousands of trials run in minutes here, not hours."""
    stem = os.path.join(OUT, f"{arch}_c32")
    if os.path.exists(stem + ".onnx") and os.path.exists(stem + ".eval.safetensors"):
        return stem + ".onnx", stem + ".eval.safetensors"
    import numpy as np
    import torch
    import torchvision
    torch.manual_seed(0)
    m = getattr(torchvision.models, arch)(weights=None, num_classes=10).eval()
    x = torch.randn((64, 3, 32, 32), generator=torch.Generator().manual_seed(1))
    torch.onnx.export(m, x[:2], stem + ".onnx", opset_version=13, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    with torch.inference_mode():
        labels = m(x).argmax(1).numpy().astype(np.int64)
    benchlib.write_safetensors(stem + ".eval.safetensors", {"input": x.numpy(), "labels": labels})
    return stem + ".onnx", stem + ".eval.safetensors"


def campaign(name, design, a, files, cap, trials_out=None):
    onnx, data, batch = files
    spec = {"model": onnx, "dataset": data, "seed": 7, "trials": cap, "batch": batch,
            "faults": {"target": "weights", "tensors": ["*"], "model": "bitflip", "bits": 1, "representation": "fp32"},
            "sampling": design, "stop": {"margin": a.margin, "per_tensor_margin": a.tensor_margin, "confidence": 0.95}}
    base = os.path.join(OUT, f"{name}_{design}")
    with open(base + ".spec.json", "w") as f:
        json.dump(spec, f)
    cmd = [a.bitflip, "run", "--local", base + ".spec.json", "--threads", "1", "--stats", "--progress", "none",
           "--format", "json", "--out", base + ".result.json"]
    if trials_out:
        cmd += ["--trials-out", trials_out]
    log("answer_bench: " + " ".join(cmd))
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=benchlib.thread_env(1), capture_output=True, text=True, timeout=a.timeout)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"answer_bench: {name} {design} failed: {p.stderr[-2000:]}")
    r = json.load(open(base + ".result.json"))
    s = r["summary"]
    pilot = (s.get("adaptive") or {}).get("pilot", 0)
    met = all(v.get("met") for v in s.get("stop", {}).values())
    return {"trials": s["trials"] + pilot, "counted": s["trials"], "pilot": pilot, "met": met, "stop": s.get("stop"),
            "wall": wall, "result": r}


def wilson_n(p, margin):
    """The fewest trials whose 95% Wilson interval at rate p has a half-width within margin."""
    def half(n):
        d = 1 + Z95 * Z95 / n
        return Z95 / d * math.sqrt(p * (1 - p) / n + Z95 * Z95 / (4 * n * n))
    lo, hi = 1.0, 1e15
    while hi / lo > 1.0001:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if half(mid) > margin else (lo, mid)
    return math.ceil(hi)


def uniform_projection(res, a):
    """Trials uniform + stop needs, from the adaptive run's rates (critical and DUE, the stop's)."""
    tensors = res["by_tensor"]
    need = 0
    for o in ("critical", "due"):
        p = res["summary"]["rates"][o]["rate"]
        need = max(need, wilson_n(p, a.margin))
    shares = a.shares
    worst = None
    for t in tensors:
        n_t = max(wilson_n(t[o]["rate"], a.tensor_margin) for o in ("critical", "due"))
        n = n_t / shares[t["tensor"]]
        if n > need:
            need, worst = n, t["tensor"]
    return math.ceil(need), worst


def tensor_shares(onnx, names):
    import onnx as ox
    from onnx import numpy_helper
    m = ox.load(onnx)
    sizes = {i.name: int(numpy_helper.to_array(i).size) for i in m.graph.initializer if i.name in names}
    tot = sum(sizes.values())
    return {k: v / tot for k, v in sizes.items()}


def cell_var(p, n):
    """campaign_estimate.c's variance of a cell's rate after n trials at rate p (per W_h^2)."""
    q = (p * n + 0.5) / (n + 1)
    return q * (1 - q) / n


def floors(name, a):
    """Without running: the fewest trials adaptive can stop at for the per-tensor target (every
    cell's rate 0, so that only the estimator's half-trial prior is left: 32 equal cells per
    tensor, each with the n where the tensor's variance reaches (MT/z)^2, plus the pilot's 2),
    and uniform's trials for the smallest tensor at a rate of 1/32 (bit 30 alone critical)."""
    import onnx as ox
    from onnx import numpy_helper
    m = ox.load(model_files(name, 0)[0])
    sizes = [int(numpy_helper.to_array(i).size) for i in m.graph.initializer
             if numpy_helper.to_array(i).dtype.name == "float32"]
    target = (a.tensor_margin / Z95) ** 2
    lo, hi = 1.0, 1e7
    while hi - lo > 1e-3:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if 32 * (1 / 32) ** 2 * cell_var(0, mid) > target else (lo, mid)
    return {"model": name, "tensors": len(sizes), "parameters": sum(sizes), "smallest": min(sizes),
            "cell_trials_at_rate_0": hi, "adaptive_floor": math.ceil(len(sizes) * 32 * (2 + hi)),
            "pilot_and_first_round": len(sizes) * 32 * 3,
            "uniform_smallest_tensor": math.ceil(wilson_n(1 / 32, a.tensor_margin) * sum(sizes) / min(sizes)),
            "uniform_overall_only": {p: wilson_n(p, a.margin) for p in (0.01, 0.03)}}


def torch_trial_seconds(name, a, trials_out=None):
    """Seconds per trial of PyTorch's flip-and-rerun loop on the same model and eval set, at 1
    thread: real_bench.py's loop (uniform faults of its own draw) for the torchvision models,
    torch_campaign.py --flip replaying the uniform campaign's own faults for dlrm_criteo."""
    if name in ("resnet18", "mobilenet_v2"):
        cmd = [PY, os.path.join(BENCH, "real_bench.py"), "--torch-peer", name, "--threads", "1",
               "--batch", "32", "--repeat", "1", "--trials", str(a.torch_trials), "--samples", str(a.samples)]
    elif name == "dlrm_criteo" and trials_out:
        cmd = [PY, os.path.join(BENCH, "torch_campaign.py"), "dlrm_criteo_200k", trials_out, "--flip", "--threads", "1",
               "--dir", os.path.join(ROOT, "build", "big_drs"), "--max-trials", str(a.torch_trials)]
    else:
        return None
    p = subprocess.run(cmd, env=benchlib.thread_env(1), capture_output=True, text=True, timeout=a.timeout)
    line = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode != 0 or not line:
        log(f"answer_bench: the PyTorch loop failed on {name}: {p.stderr[-500:]}")
        return None
    return 1 / json.loads(line[-1])["trials_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bitflip", default=os.path.join(ROOT, "build", "bitflip"))
    ap.add_argument("--models", default="digits_mlp,resnet18,mobilenet_v2,dlrm_criteo")
    ap.add_argument("--samples", type=int, default=0, help="first N eval samples of resnet18/mobilenet_v2 (0: all 64)")
    ap.add_argument("--margin", type=float, default=0.005)
    ap.add_argument("--tensor-margin", type=float, default=0.02)
    ap.add_argument("--adaptive-cap", type=int, default=2_000_000)
    ap.add_argument("--uniform-cap", type=int, default=3_000_000)
    ap.add_argument("--torch-trials", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=36000)
    ap.add_argument("--out", default=os.path.join(BENCH, "out", "answer.json"))
    ap.add_argument("--floors", action="store_true", help="print the analytic bounds only (floors()), run nothing")
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    if a.floors:
        for name in a.models.split(","):
            print(json.dumps(floors(name, a)))
        return
    rows = []
    for name in a.models.split(","):
        files = model_files(name, a.samples)
        ad = campaign(name, "adaptive", a, files, a.adaptive_cap)
        res = ad.pop("result")
        a.shares = tensor_shares(files[0], {t["tensor"] for t in res["by_tensor"]})
        trials_out = os.path.join(OUT, f"{name}_uniform.trials.jsonl")
        un = campaign(name, "uniform", a, files, a.uniform_cap, trials_out)
        un.pop("result")
        proj, worst = uniform_projection(res, a)
        per_trial = un["wall"] / max(un["trials"], 1)
        u_trials = un["trials"] if un["met"] else proj
        torch_s = torch_trial_seconds(name, a, trials_out)
        row = {"model": name, "samples": a.samples or None, "tensors": len(res["by_tensor"]), "adaptive": ad,
               "uniform": un, "uniform_projected": proj, "uniform_worst_tensor": worst,
               "uniform_trials": u_trials, "uniform_wall": un["wall"] if un["met"] else proj * per_trial,
               "torch_trial_seconds": torch_s, "torch_wall": torch_s * u_trials if torch_s else None}
        rows.append(row)
        log(json.dumps({k: v for k, v in row.items() if k not in ("adaptive", "uniform")}))
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    print("| model | tensors | adaptive trials (pilot) | adaptive wall | uniform+stop trials | uniform wall | "
          "trials ratio | PyTorch loop (uniform) | wall ratio vs PyTorch |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ad = r["adaptive"]
        u = f"{r['uniform_trials']:,}" + ("" if r["uniform"]["met"] else " (projected)")
        tw = f"{r['torch_wall']:.3g} s" if r["torch_wall"] else "–"
        tr = f"{r['torch_wall'] / ad['wall']:.0f}x" if r["torch_wall"] else "–"
        print(f"| {r['model']} | {r['tensors']} | {ad['trials']:,} ({ad['pilot']:,}) | {ad['wall']:.1f} s | {u} | "
              f"{r['uniform_wall']:.3g} s | {r['uniform_trials'] / ad['trials']:.0f}x | {tw} | {tr} |")


if __name__ == "__main__":
    main()
