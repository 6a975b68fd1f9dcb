#!/usr/bin/python3
"""Real networks at real sizes: `bitflip eval` and `bitflip run` vs PyTorch eager and ONNX Runtime.

  /usr/bin/python3 bench/real_bench.py [--bitflip build/bitflip] [--models resnet18,mobilenet_v2,vit_s16,lstm]
        [--threads 1,2] [--quick] [--write-doc docs/BENCHMARKS.md] [--out bench/out/real.json]
  /usr/bin/python3 bench/real_bench.py --render bench/out/real.json [--write-doc docs/BENCHMARKS.md]

Models (built here with torchvision / torch.nn, weights=None, seeded; written to bench/models/real/,
never committed): resnet18 and mobilenet_v2 (torchvision constructors, 224x224 images), vit_s16
(torchvision's VisionTransformer at ViT-S/16 size: 12 layers, 6 heads, width 384, 224x224) and an
LSTM classifier (nn.LSTM 2 layers, hidden 256, 32 features, sequences of 64, batch_first). Each is
exported as users export (torch.onnx.export, opset 13, dynamic batch, default constant folding:
BatchNorm folded into the convolutions); its eval set is random inputs labelled by the model's own
predictions (golden accuracy 1.0, so every fault that changes a prediction shows).

Per model and thread count, each peer in its own process, one at a time, after waiting for the
machine to go quiet:
  eval      bitflip eval --batch B --repeat R --json and ONNX Runtime (bench/ort_eval.js,
            onnxruntime-node, same file, batch B), each at batch 4 and B, in three rounds (one
            with --quick) alternating the two peers, each peer's fastest process kept; PyTorch
            eager (the very nn.Module exported, under torch.inference_mode(), best of batches B
            and the whole set). All check their outputs against the golden ones (PyTorch's)
            before timing.
  campaign  bitflip run --local on a spec of T uniform single-bit weight faults (every bit of every
            fp32 parameter equally likely), timed as a whole process (load, golden pass, checks,
            cache: setup counted; the median of 5 runs, 1 with
            --quick, the thread counts' runs alternated and the 2-thread aim judged on adjacent
            pairs) and by its --stats line
            (trials alone, setup alone); PyTorch's
            flip-and-rerun loop (PyTEI style: XOR one bit of one parameter in place, forward the
            whole eval set at its best batch, compare with golden, XOR back) over its own uniform
            draw of the same number of faults (a forward pass costs the same wherever the bit is).
Every peer gets OMP_NUM_THREADS/OPENBLAS_NUM_THREADS/MKL_NUM_THREADS = threads and
OMP_WAIT_POLICY=PASSIVE. Results go to bench/out/real.json; --write-doc rewrites the section
between <!-- real-bench:start --> and <!-- real-bench:end --> of the doc.
"""
import argparse
import datetime
import json
import os
import re
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

PY = "/usr/bin/python3"
BENCH = benchlib.BENCH_DIR
ROOT = benchlib.REPO_ROOT
MODELS_DIR = os.path.join(BENCH, "models", "real")
START, END = "<!-- real-bench:start -->", "<!-- real-bench:end -->"

# samples in the eval set, eval batch, repeats (full / quick), campaign trials (full / quick)
PLAN = {
    # campaign_batch: the batch of the campaign's passes. Its records are the same at any batch
    # (none of these normalises with batch statistics); its speed is not: a trial re-runs whole
    # batches from its fault on, and at 4 images a batch's activations of the layers most faults
    # land in stay in L2. resnet18's trials ran 11% faster at 4 than at 32 and mobilenet_v2's 2-4%
    # faster than at 8, on the Zen 2 host (docs/perf/trials/resnet18.md, h48-batch), as PyTorch's
    # loop runs at its own best batch (4 or the model's, below). At 32 mobilenet_v2 and ViT-S/16
    # would need more than the default 4 GiB job memory (a campaign keeps every activation of a
    # batch).
    "resnet18": dict(samples=64, batch=32, campaign_batch=4, repeat=(3, 1), trials=(40, 10),
                     what="torchvision resnet18(weights=None), 3x224x224, 11.7M params"),
    "mobilenet_v2": dict(samples=64, batch=32, campaign_batch=4, repeat=(3, 1), trials=(40, 10),
                         what="torchvision mobilenet_v2(weights=None), 3x224x224, 3.5M params"),
    "vit_s16": dict(samples=32, batch=32, campaign_batch=4, repeat=(2, 1), trials=(20, 5),
                    what="torchvision VisionTransformer, ViT-S/16 (12 layers, 6 heads, 384 wide), 3x224x224, 22M params"),
    "lstm": dict(samples=256, batch=32, repeat=(5, 2), trials=(100, 20),
                 what="nn.LSTM(32, 256, num_layers=2, batch_first) + Linear(256, 10) on the last step, sequences of 64"),
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --- the models -----------------------------------------------------------------------------

def build_module(name):
    import torch
    import torchvision
    torch.manual_seed(0)
    if name == "resnet18":
        return torchvision.models.resnet18(weights=None), (3, 224, 224)
    if name == "mobilenet_v2":
        return torchvision.models.mobilenet_v2(weights=None), (3, 224, 224)
    if name == "vit_s16":
        from torchvision.models.vision_transformer import VisionTransformer
        return VisionTransformer(image_size=224, patch_size=16, num_layers=12, num_heads=6, hidden_dim=384,
                                 mlp_dim=1536, num_classes=1000), (3, 224, 224)
    if name == "lstm":
        class LSTMClassifier(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = torch.nn.LSTM(32, 256, num_layers=2, batch_first=True)
                self.fc = torch.nn.Linear(256, 10)

            def forward(self, x):
                y, _ = self.lstm(x)
                return self.fc(y[:, -1, :])
        return LSTMClassifier(), (64, 32)
    raise SystemExit(f"real_bench: unknown model {name}")


def load_module(name):
    """The exported module again: built as make_model built it, its weights from the state_dict saved then."""
    import torch
    m, _ = build_module(name)
    m.load_state_dict(torch.load(os.path.join(MODELS_DIR, name + ".pt")))
    return m.eval()


def make_model(name, force=False):
    """bench/models/real/NAME.{onnx,eval.safetensors,ref.json,pt}; returns the paths' stem."""
    stem = os.path.join(MODELS_DIR, name)
    if not force and all(os.path.exists(stem + s) for s in (".onnx", ".eval.safetensors", ".ref.json", ".pt")):
        return stem
    import numpy as np
    import torch
    os.makedirs(MODELS_DIR, exist_ok=True)
    torch.set_num_threads(2)
    m, shape = build_module(name)
    m.eval()
    g = torch.Generator().manual_seed(1)
    x = torch.randn((PLAN[name]["samples"],) + shape, generator=g)
    log(f"real_bench: exporting {name}")
    torch.onnx.export(m, x[:2], stem + ".onnx", opset_version=13, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    with torch.inference_mode():
        out = torch.cat([m(x[i:i + 16]) for i in range(0, len(x), 16)])
    labels = out.argmax(1).numpy().astype(np.int64)
    benchlib.write_safetensors(stem + ".eval.safetensors", {"input": x.numpy(), "labels": labels})
    with open(stem + ".ref.json", "w") as f:
        json.dump({"model": name, "task": "classification", "golden_accuracy": 1.0,
                   "golden": out.numpy().tolist()}, f)
    torch.save(m.state_dict(), stem + ".pt")
    return stem


# --- the arithmetic and the machine's peak (percent of the peak) -----------------------------

def macs_per_sample(name):
    """Multiply-adds per sample of the model's matrix products (convolutions, linear layers, batched
    products, attention, LSTM cells), counted by running the very nn.Module once at batch 1 under a
    TorchFunctionMode that sees every torch call. Everything else (pooling, activations, norms,
    softmax) is under 1% of these models' arithmetic and left out. (ONNX shape inference cannot
    size the ViT's MatMuls behind their computed Reshapes, so the module is counted instead; on
    resnet18 and mobilenet_v2 the two counts are equal.)"""
    import torch
    from torch.overrides import TorchFunctionMode
    m, shape = build_module(name)
    m.eval()
    total = [0]

    class Count(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            f = getattr(func, "__name__", "")
            if f in ("linear", "matmul", "__matmul__", "bmm"):
                total[0] += out.numel() * args[0].shape[-1]
            elif f == "baddbmm":
                total[0] += out.numel() * args[1].shape[-1]
            elif f in ("conv1d", "conv2d", "conv3d"):
                total[0] += out.numel() * args[1][0].numel()
            elif f == "multi_head_attention_forward":   # seen whole (a mode sees no call inside a call)
                q, e = args[0], args[3]   # query [L, N, E]: in-projections, scores, context, out-projection
                length, n = q.shape[0], q.shape[1]
                total[0] += n * (length * e * 3 * e + 2 * length * length * e + length * e * e)
            elif f in ("lstm", "gru"):   # input, hx, flat weights (w_ih, w_hh[, biases]) per layer
                x, flat = args[0], args[2]
                steps = x.shape[0] * x.shape[1]   # batch x sequence, whichever order
                per = 4 if flat and len(flat) % 4 == 0 and args[3] else 2
                total[0] += steps * sum(w.numel() for i, w in enumerate(flat) if i % per < 2)
            return out

    with torch.no_grad(), Count():
        m(torch.randn((1,) + shape))
    return total[0]


def measure_peak(bitflip):
    """This core's fp32 peak in GFLOP/s (bench/peak_flops.c --peak-only, next to the bitflip binary):
    {"ymm": 8-lane FMA chains, "zmm": 16-lane where the CPU has them, "peak": the larger}."""
    exe = os.path.join(os.path.dirname(os.path.abspath(bitflip)), "bitflip-bench-peak")
    if not os.access(exe, os.X_OK):
        log(f"real_bench: {exe} not built (cmake --build build --target bitflip-bench-peak): no percent of the peak")
        return None
    out = subprocess.run([exe, "--peak-only"], capture_output=True, text=True, timeout=300).stdout
    r = {}
    for lane, key in (("ymm", "ymm"), ("zmm", "zmm")):
        mm = re.search(r"peak, .*\(" + lane + r"\):\s*([0-9.]+)", out)
        if mm:
            r[key] = float(mm.group(1))
    if r:
        r["peak"] = max(r.values())
        # the host's fresh memory (bench/peak_flops.c says why): campaigns' setup pays it
        mm = re.search(r"first touch: ([0-9.]+) GB/s; written again: ([0-9.]+) GB/s", out)
        if mm:
            r["fresh_gbs"], r["again_gbs"] = float(mm.group(1)), float(mm.group(2))
    return r or None


# --- the PyTorch peers (run in a subprocess: python3 real_bench.py --torch-peer ...) ----------

def torch_peer(args):
    for k in benchlib.THREAD_ENV:
        os.environ[k] = str(args.threads)
    import numpy as np
    import torch
    torch.set_num_threads(args.threads)
    malloc = benchlib.torch_keep_memory()
    stem = os.path.join(MODELS_DIR, args.torch_peer)
    m = load_module(args.torch_peer)
    data = benchlib.read_safetensors(stem + ".eval.safetensors")
    x = torch.from_numpy(np.array(data["input"]))
    golden = torch.tensor(json.load(open(stem + ".ref.json"))["golden"], dtype=torch.float32)
    if args.samples:  # the first N samples, as bench/answer_bench.py --samples cuts the eval set
        x, golden = x[:args.samples], golden[:args.samples]
    n = len(x)

    def full_pass(batch):
        b = batch or n
        with torch.inference_mode():
            return torch.cat([m(x[i:i + b]) for i in range(0, n, b)])

    # check, then find the best batch
    out = full_pass(args.batch)
    if not torch.allclose(out, golden, rtol=1e-4, atol=1e-5):
        print(json.dumps({"ok": False, "error": "outputs differ from golden"}))
        return 3
    best = None
    for b in sorted({4, args.batch, 0}):
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            full_pass(b)
            times.append(time.perf_counter() - t0)
        t = min(times)
        if best is None or t < best[1]:
            best = (b or n, t)
    res = {"samples": n, "batch": best[0], "seconds": best[1], "samples_per_s": n / best[1],
           "blas": benchlib.loaded_blas(), "malloc": malloc}
    if args.trials:
        params = [p for p in m.parameters() if p.dtype == torch.float32]
        sizes = np.array([p.numel() for p in params], dtype=np.int64)
        rng = np.random.default_rng(7)
        picks = rng.integers(0, int(sizes.sum()) * 32, size=args.trials)
        cum = np.cumsum(sizes)
        changed = 0
        t0 = time.perf_counter()
        for pick in picks:
            elem, bit = divmod(int(pick), 32)
            k = int(np.searchsorted(cum, elem, side="right"))
            local = elem - (int(cum[k - 1]) if k else 0)
            with torch.no_grad():
                flat = params[k].data.view(-1).view(torch.int32)
                flat[local] ^= (1 << bit) if bit < 31 else -(1 << 31)
                o = full_pass(best[0])
                flat[local] ^= (1 << bit) if bit < 31 else -(1 << 31)
            changed += int((o.argmax(1) != golden.argmax(1)).any())
        loop = time.perf_counter() - t0
        res.update(trials=args.trials, trial_seconds=loop, trials_per_s=args.trials / loop,
                   trials_changing_a_prediction=changed)
    print(json.dumps(res))
    return 0


# --- running the peers ------------------------------------------------------------------------

def parse_json(out):
    for line in reversed(out.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    try:
        return json.loads(out)
    except ValueError:
        return None


def best_of(runs):
    """The fastest successful run (samples/s of its JSON), else the first failure."""
    ok = [r for r in runs if r.get("ok") and (r.get("json") or {}).get("samples_per_s")]
    return max(ok, key=lambda r: r["json"]["samples_per_s"]) if ok else runs[0]


def run(cmd, threads, timeout, quiet):
    log("real_bench: " + " ".join(shlex.quote(c) for c in cmd))
    r = benchlib.measure_process(cmd, benchlib.thread_env(threads), timeout, quiet, tag="real")
    r["json"] = parse_json(r.get("out", "")) if r.get("ok") else None
    return r


# --stats' first line (trials, rate, setup); the engine's parts follow on lines of their own
STATS = re.compile(r"^bitflip run: (\d+) trials in ([0-9.]+) s \(([0-9.]+) trials/s\).*?setup ([0-9.]+) s", re.M)
GOLDEN = re.compile(r"golden pass with the cache ([0-9.]+) s")
RERAN = re.compile(r"the trials re-ran ([0-9.]+)% of the work.*?; most in (\S+) '([^']*)' ([0-9]+)%")


def bitflip_campaigns(a, name, stem, model_rows, trials, runs):
    """Each row's campaign: the median of `runs` whole processes (benchlib.median_run), each with
    its --stats parsed; the thread counts' runs alternated (1, 2, 1, 2, ...), and each row past
    the first given its rate over the first row's in the run just before it ("scaling_pairs").
    The 2-thread aim is a ratio of two rates, and this host's speed moves 10-20% over minutes:
    measured a row at a time, several minutes apart (the evals, ONNX Runtime and PyTorch
    between), ViT-S/16's 2-thread rate came out 1.86x its 1-thread one in a table (c8228901)
    where the same binary's adjacent pairs gave 1.99x, 2.00x and 1.87x (2026-12-04).
    Five rounds (`runs`), whatever a round takes: with three, one slow 2-thread run among them
    moves the median pair by the host's spread. mobilenet_v2's adjacent pairs read 1.87-2.37x
    on one afternoon (0.6 s at 2 threads), and the LSTM's (a round of 19 s) 1.89x, 2.14x and
    2.01x in one run, 1.85x to 2.00x over an hour, where its two workers' CPU and their wait for
    the last trial leave about 1.96x (docs/perf/lstm.md, h50-pairs)."""
    done = {r["threads"]: [] for r in model_rows}
    for _ in range(runs):
        for r in model_rows:
            done[r["threads"]].append(campaign_once(a, name, stem, r["threads"], trials, a.quiet_wait))
    first = model_rows[0]["threads"]
    for r in model_rows:
        r["bitflip_campaign"] = benchlib.median_run(done[r["threads"]])
        if r["threads"] != first:
            r["scaling_pairs"] = [round(y / x, 4) for x, y in
                                  ((trials_alone(o), trials_alone(m)) for o, m in zip(done[first], done[r["threads"]]))
                                  if x and y]


def eval_rounds(a, stem, threads, rep, batches, rounds):
    """bitflip's and ONNX Runtime's evals: `rounds` rounds, each running both peers at every
    batch, alternated (bitflip, ORT, bitflip, ORT, ...); each peer's row is its fastest process
    over all rounds (best_of), and "eval_pairs" gives each round's ratio (bitflip's fastest that
    round over ORT's). The eval aim is a ratio of two peers' rates, and this host's speed moves
    10-20% over minutes: one process a peer, a minute apart, mobilenet_v2's 1-thread ratio read
    0.98x in three of five runs and 1.10x in another (2026-12-04), and in three alternated
    rounds of bench/ab_cpu.sh minutes later a bitflip pass took 0.270-0.376 CPU-s, ORT's
    0.288-0.316. Alternated rounds give both peers the same chances."""
    peers = {"bitflip_eval": lambda b: [a.bitflip, "eval", stem + ".onnx", stem + ".eval.safetensors",
                                        "--threads", str(threads), "--batch", str(b), "--repeat", str(rep), "--json"],
             "ort_eval": lambda b: ["node", os.path.join(BENCH, "ort_eval.js"), stem + ".onnx",
                                    stem + ".eval.safetensors", "--threads", str(threads), "--batch", str(b),
                                    "--repeat", str(rep), "--ref", stem + ".ref.json", "--json"]}
    done = {k: [] for k in peers}
    pairs = []
    for _ in range(rounds):
        this = {k: [] for k in peers}
        for b in batches:
            for k, cmd in peers.items():
                this[k].append(run(cmd(b), threads, 3600, a.quiet_wait))
        for k in peers:
            done[k] += this[k]
        bf, ort = rate(best_of(this["bitflip_eval"])), rate(best_of(this["ort_eval"]))
        if bf and ort:
            pairs.append(round(bf / ort, 4))
    out = {k: best_of(v) for k, v in done.items()}
    out["eval_pairs"] = pairs
    return out


def ratios(xs):
    """A list of ratios as the aims table prints them: "1.03x, 0.99x"."""
    return ", ".join(f"{x:.2f}x" for x in xs)


def trials_alone(c):
    """A campaign run's trials per second of its trial loop alone, from its --stats (None if it failed)."""
    st = c.get("stats") or {}
    trials, loop = st.get("trials"), st.get("trial_seconds")
    # from the count and seconds: `--stats` prints the rate to one decimal, which made ViT-S/16's
    # 20 trials in 53.05 and 27.72 s "0.4" and "0.7" trials/s, 1.75x for 1.91x
    return trials / loop if trials and loop else st.get("trials_per_s")


def campaign_once(a, name, stem, threads, trials, quiet):
    spec = {"model": stem + ".onnx", "dataset": stem + ".eval.safetensors", "seed": 7, "trials": trials,
            "batch": PLAN[name].get("campaign_batch", PLAN[name]["batch"]),
            "faults": {"target": "weights", "tensors": ["*"], "model": "bitflip", "bits": 1,
                       "representation": "fp32"}, "sampling": "uniform"}
    path = os.path.join(BENCH, "out", f"real_{name}_spec.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(spec, f)
    r = run([a.bitflip, "run", "--local", path, "--threads", str(threads), "--stats", "--format", "json",
             "--out", os.path.join(BENCH, "out", f"real_{name}_result.json")], threads, 3600, quiet)
    if r.get("ok"):
        m = STATS.search(r.get("err", ""))
        if m:
            r["stats"] = {"trials": int(m.group(1)), "trial_seconds": float(m.group(2)),
                          "trials_per_s": float(m.group(3)), "setup_seconds": float(m.group(4)),
                          "line": [l for l in r["err"].splitlines() if "trials/s" in l][-1]}
            g, w = GOLDEN.search(r["err"]), RERAN.search(r["err"])
            if g:
                r["stats"]["golden_seconds"] = float(g.group(1))
            if w:
                r["stats"].update(work_percent=float(w.group(1)), top_op=w.group(2), top_node=w.group(3),
                                  top_share=float(w.group(4)))
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bitflip", default=os.path.join(ROOT, "build", "bitflip"))
    ap.add_argument("--models", default=",".join(PLAN))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument("--quiet-wait", type=float, default=30)
    ap.add_argument("--out", default=os.path.join(BENCH, "out", "real.json"))
    ap.add_argument("--write-doc")
    ap.add_argument("--render")
    ap.add_argument("--keep", help="results JSON of an earlier run: its rows for the models not run now are kept")
    ap.add_argument("--torch-peer", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, default=32, help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=3, help=argparse.SUPPRESS)
    ap.add_argument("--trials", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--samples", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_peer:
        a.threads = int(a.threads)
        return torch_peer(a)
    if a.render:
        doc = json.load(open(a.render))
        return write(doc, a.write_doc)

    q = 1 if a.quick else 0
    mi = benchlib.machine_info()
    t_start = time.time()
    peak = measure_peak(a.bitflip)
    rows = []
    for name in a.models.split(","):
        p = PLAN[name]
        stem = make_model(name, a.regenerate)
        model_rows = []
        for threads in [int(t) for t in a.threads.split(",")]:
            row = {"model": name, "threads": threads, "batch": p["batch"], "what": p["what"],
                   "macs_per_sample": macs_per_sample(name)}
            rep = p["repeat"][q]
            # each peer at its best of a small and the plan's batch (memory-bound nets such as
            # mobilenet_v2 run faster at 4, compute-bound ones at 32)
            row.update(eval_rounds(a, stem, threads, rep, sorted({4, p["batch"]}), 1 if a.quick else 3))
            trials = p["trials"][q]
            row["torch"] = run([PY, os.path.abspath(__file__), "--torch-peer", name, "--threads", str(threads),
                                "--batch", str(p["batch"]), "--repeat", str(rep), "--trials", str(trials)],
                               threads, 7200, a.quiet_wait)
            model_rows.append(row)
        bitflip_campaigns(a, name, stem, model_rows, p["trials"][q], runs=1 if a.quick else 5)
        for row in model_rows:
            for k in ("bitflip_eval", "ort_eval", "torch", "bitflip_campaign"):
                for drop in ("out",):
                    row[k].pop(drop, None)
                if row[k].get("ok"):
                    row[k].pop("err", None)
            rows.append(row)
            log(f"real_bench: {name} x{row['threads']}: {summary(row)}")
    if a.keep:
        done = {r["model"] for r in rows}
        old = json.load(open(a.keep))
        kept = sorted({r["model"] for r in old["rows"] if r["model"] not in done})
        rows = [r for r in old["rows"] if r["model"] not in done] + rows
        rows.sort(key=lambda r: (list(PLAN).index(r["model"]), r["threads"]))
    mi["loadavg_end"] = os.getloadavg()
    doc = {"meta": {"date": datetime.datetime.fromtimestamp(t_start, datetime.timezone.utc).isoformat(timespec="seconds"),
                    "machine": mi, "seconds": time.time() - t_start, "peak_gflops": peak, "commit": benchlib_commit(),
                    "command": "/usr/bin/python3 bench/real_bench.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])},
           "rows": rows}
    if a.keep and kept:
        doc["meta"]["kept"] = (f"rows of {', '.join(kept)} from the run of {old['meta']['date']} "
                               f"(`{old['meta']['command']}`)")
    benchlib.save_results(a.out, doc["meta"], rows)
    return write(doc, a.write_doc)


def benchlib_commit():
    """The commit the measured build was made from, with "+dirty" when the tree has changes."""
    try:
        c = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        d = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
        return c + ("+dirty" if d else "")
    except OSError:
        return None


def rate(r, key="samples_per_s"):
    return (r or {}).get("json", {}) and r["json"].get(key) if (r or {}).get("ok") else None


def ratio(x, y):
    return f"{x / y:.2f}x" if x and y else "–"


def summary(row):
    bf, ort, tt = rate(row["bitflip_eval"]), rate(row["ort_eval"]), rate(row["torch"])
    return f"eval bitflip {bf} ort {ort} torch {tt}"


def fmt(x, nd=1):
    return f"{x:,.{nd}f}" if isinstance(x, (int, float)) else "–"


def pct_peak(rate_, row, pk):
    """A samples/s as a percent of the peak at the row's thread count."""
    macs = row.get("macs_per_sample")
    if not (rate_ and macs and pk):
        return "–"
    return f"{100 * rate_ * 2 * macs * 1e-9 / (pk['peak'] * row['threads']):.0f}%"


BUSY_ROW = 0.5   # cores other processes used during a run, past which its row is marked


def busy(row, keys):
    """The most cores other processes used during the row's runs (benchlib.measure_process's
    others_cores), marked LOADED past BUSY_ROW: such a row's times do not measure the code."""
    x = max((row[k].get("others_cores") or 0.0) for k in keys)
    return f"**{x:.2f}: LOADED**" if x > BUSY_ROW else f"{x:.2f}"


def campaign_rates(r):
    """(trials/s counting setup, trials/s of the trials alone, PyTorch loop trials/s) of a row."""
    c, tj = r["bitflip_campaign"], r["torch"].get("json") or {}
    st = c.get("stats") or {}
    whole = c.get("wall") if c.get("ok") else None
    trials = st.get("trials")
    return (trials / whole if whole and trials else None), trials_alone(c), tj.get("trials_per_s")


# issue 33's aims, per model: (campaign x the PyTorch loop with setup counted, at 1 thread)
CAMPAIGN_AIMS = {"resnet18": 15, "mobilenet_v2": 40}


def aims(rows):
    """Issue 33's aims against this run, worked from the rows: met or by how much not."""
    out = ["", "Issue 33's aims against this run (worked by the script from the rows above):", "",
           "| aim | model | threads | measured | met |", "|---|---|---|---|---|"]
    by = {(r["model"], r["threads"]): r for r in rows}
    loaded = lambda r, keys: any((r[k].get("others_cores") or 0.0) > BUSY_ROW for k in keys)
    cam = ("bitflip_campaign", "torch")
    for r in rows:
        bf, ort = rate(r["bitflip_eval"]), rate(r["ort_eval"])
        if r["model"] in ("resnet18", "mobilenet_v2", "vit_s16") and bf and ort:
            verdict = ("not judged: LOADED" if loaded(r, ("bitflip_eval", "ort_eval"))
                       else "yes" if bf >= ort else f"no: {100 * (1 - bf / ort):.0f}% short")
            how = f" (rounds {ratios(r['eval_pairs'])})" if r.get("eval_pairs") else ""
            out.append(f"| golden eval at least ONNX Runtime | {r['model']} | {r['threads']} | {bf / ort:.2f}x{how} | "
                       f"{verdict} |")
    for (m, t), r in sorted(by.items()):
        aim = CAMPAIGN_AIMS.get(m)
        ws, _, loop = campaign_rates(r)
        if aim and t == 1 and ws and loop:
            x = ws / loop
            verdict = ("not judged: LOADED" if loaded(r, cam)
                       else "yes" if x >= aim else f"no: {x / aim:.0%} of the aim")
            out.append(f"| campaign at least {aim}x the PyTorch loop, setup counted | {m} | 1 | {x:.1f}x | {verdict} |")
    for (m, t), r in sorted(by.items()):
        one = by.get((m, 1))
        if t == 2 and one:
            _, a2, _ = campaign_rates(r)
            _, a1, _ = campaign_rates(one)
            pairs = sorted(r.get("scaling_pairs") or [])
            # the median of the adjacent pairs' ratios (bitflip_campaigns); a run of
            # older results, without pairs, by the rows' medians
            x = pairs[(len(pairs) - 1) // 2] if pairs else (a2 / a1 if a1 and a2 else None)
            if x:
                verdict = ("not judged: LOADED" if loaded(r, cam[:1]) or loaded(one, cam[:1])
                           else "yes" if x >= 1.9 else "no")
                how = f" (pairs {ratios(r['scaling_pairs'])})" if pairs else ""
                out.append(f"| campaign at 2 threads at least 1.9x its 1-thread rate (trials alone) | {m} | 2 | "
                           f"{x:.2f}x{how} | {verdict} |")
    return out if len(out) > 5 else []


def write(doc, path):
    meta, rows = doc["meta"], doc["rows"]
    pk = meta.get("peak_gflops")
    lines = [START, "## Real networks at real sizes (`bench/real_bench.py`)", "",
             f"- Date: {meta['date']}; took {meta['seconds']:.0f} s",
             *benchlib.machine_lines(meta["machine"]),
             f"- Command: `{meta['command']}`" + (f" (`make bench-real`), bitflip at commit {meta['commit']}"
                                                   if meta.get("commit") else ""),
             *([f"- Kept: {meta['kept']}"] if meta.get("kept") else []),
             *(["- This core's measured fp32 peak (`bitflip-bench-peak --peak-only`, "
                + (meta.get("peak_note") or "same run") + "): "
                + ", ".join(f"{v:.1f} GFLOP/s ({k}: {8 if k == 'ymm' else 16}-lane FMA chains)"
                            for k, v in pk.items() if k in ("ymm", "zmm"))] if pk else []),
             *([f"- Fresh memory on this host (same run): {pk['fresh_gbs']:.2f} GB/s written a page at a time "
                f"the first time (each page a fault), {pk['again_gbs']:.2f} GB/s written again: a campaign's setup "
                "(its golden cache and arenas are fresh memory) pays the first rate, PyTorch's timed loop does not"]
               if pk and "fresh_gbs" in pk else []), "",
             "Eval: samples/s over the whole eval set, each peer at its fastest of batch 4, the model's batch and (PyTorch) "
             "the whole set; bitflip and ONNX Runtime in three rounds (one with --quick) alternating the two, each "
             "peer's fastest process kept (the aims table gives each round's ratio). Ratios above 1x mean bitflip is "
             "faster. *% of peak*: samples/s x 2 x the model's multiply-adds per sample (its matrix products, counted on the PyTorch module: `macs_per_sample`) over the "
             "peak above times the threads.", "",
             "| model | threads | bitflip samples/s (batch) | PyTorch samples/s (batch) | ORT samples/s (batch) | bitflip / PyTorch | bitflip / ORT | "
             "% of peak: bitflip, PyTorch, ORT | others' load |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        bf, tt, ort = rate(r["bitflip_eval"]), (r["torch"].get("json") or {}).get("samples_per_s"), rate(r["ort_eval"])
        bb = lambda k: ((r[k].get("json") or {}).get("batch", "?"))
        lines.append(f"| {r['model']} | {r['threads']} | {fmt(bf)} ({bb('bitflip_eval')}) | {fmt(tt)} ({bb('torch')}) | "
                     f"{fmt(ort)} ({bb('ort_eval')}) | {ratio(bf, tt)} | {ratio(bf, ort)} | "
                     f"{', '.join(pct_peak(x, r, pk) for x in (bf, tt, ort))} | "
                     f"{busy(r, ('bitflip_eval', 'torch', 'ort_eval'))} |")
    lines += ["", "Campaigns: uniform single-bit weight faults. *bitflip whole* is the whole process (loading, golden "
              "pass, checks, cache and trials: setup counted), the median of five runs (one with --quick), the thread counts' runs alternated (1, 2, 1, 2, ...); "
              "*trials* and *setup* come from that run's `--stats` line. The 2-thread aim below is the median of the "
              "adjacent pairs' ratios, each pair measured within a minute (this host's speed moves 10-20% over a "
              "bench's run). "
              "PyTorch's flip-and-rerun loop is timed over its trials only (its model already loaded). "
              "*setup / eval pass* is bitflip's setup over one golden eval pass at the same thread count. *others' load*: "
              "the most cores other processes used during the row's runs; a LOADED row measures the machine, not the "
              "code.", "",
              "The campaign runs at the model's batch unless the table of models gives a campaign batch.", "",
             "| model | threads | trials | bitflip whole s | bitflip trials/s (setup counted) | bitflip trials/s (trials alone) | "
              "bitflip setup s | PyTorch trials/s | bitflip / PyTorch (trials) | bitflip / PyTorch (setup counted) | "
              "setup / eval pass | others' load |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["bitflip_campaign"]
        st = c.get("stats") or {}
        whole = c.get("wall") if c.get("ok") else None
        with_setup, alone, ttr = campaign_rates(r)
        bfe = r["bitflip_eval"].get("json") or {}
        eval_s = bfe.get("seconds")
        lines.append(f"| {r['model']} | {r['threads']} | {st.get('trials') or '–'} | {fmt(whole)} | {fmt(with_setup, 2)} | "
                     f"{fmt(alone, 2)} | {fmt(st.get('setup_seconds'))} | {fmt(ttr, 2)} | {ratio(alone, ttr)} | "
                     f"{ratio(with_setup, ttr)} | {ratio(st.get('setup_seconds'), eval_s) if eval_s else '–'} | "
                     f"{busy(r, ('bitflip_campaign', 'torch'))} |")
    lines += ["", "What the differential engine re-ran (from `--stats`): the steps it ran in full or on rows, weighted "
              "by their time on the golden pass, as a share of running every trial in full; and the step that took "
              "most of it. *golden pass* is the campaign's one pass over the eval set that also fills the cache.", "",
              "| model | threads | re-ran | most in | golden pass s | eval pass s |", "|---|---|---|---|---|---|"]
    for r in rows:
        st = (r["bitflip_campaign"].get("stats") or {})
        bfe = r["bitflip_eval"].get("json") or {}
        top = f"{st['top_op']} `{st['top_node']}` ({st['top_share']:.0f}%)" if "top_op" in st else "–"
        lines.append(f"| {r['model']} | {r['threads']} | {fmt(st.get('work_percent'), 2)}% | {top} | "
                     f"{fmt(st.get('golden_seconds'), 2)} | {fmt(bfe.get('seconds'), 2)} |")
    lines += aims(rows)
    lines += ["", "| model | what |", "|---|---|"]
    seen = set()
    for r in rows:
        if r["model"] not in seen:
            seen.add(r["model"])
            cb = PLAN.get(r["model"], {}).get("campaign_batch")
            macs = r.get("macs_per_sample")
            lines.append(f"| {r['model']} | {r['what']}{f'; campaigns at batch {cb}' if cb else ''}"
                         f"{f'; {macs / 1e9:.3f} G multiply-adds a sample' if macs else ''} |")
    failed = [f"{r['model']} x{r['threads']} {k}: {r[k].get('error')}" for r in rows
              for k in ("bitflip_eval", "ort_eval", "torch", "bitflip_campaign") if not r[k].get("ok")]
    if failed:
        lines += ["", "Runs that failed:", ""] + [f"- {f}" for f in failed]
    lines.append(END)
    text = "\n".join(lines) + "\n"
    print(text)
    if path:
        benchlib.write_section(path, START, END, text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
