#!/usr/bin/python3
"""Detectors and segmenters (issue 31): `bitflip eval` and `bitflip run` vs PyTorch and ONNX Runtime, 1 thread.

  /usr/bin/python3 bench/det_bench.py [--bitflip build/bitflip] [--samples 16] [--det-trials 20] [--seg-trials 40]
        [--seg lraspp_mobilenet_v3_large] [--quick] [--write-doc docs/BENCHMARKS.md] [--out bench/out/det.json]
  /usr/bin/python3 bench/det_bench.py --render bench/out/det.json [--write-doc docs/BENCHMARKS.md]

Models (bench/models/vision/, never committed; rebuilt when missing or with --regenerate):
  ssdlite320  torchvision ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None,
              score_thresh=0.3), 320x320, every Conv2d re-drawn He-normal (seeded) and the class
              head's last convolutions at 0.3x that: with torchvision's own weights=None init the
              features vanish (1e-14 at the last level) and every score is exactly 1/91, a 300-way
              tie. Re-drawn, an image gets 10 to 20 detections with distinct scores. Untrained:
              the boxes are not the drawn shapes (mAP about 0).
  segmenter   torchvision lraspp_mobilenet_v3_large(weights=None, weights_backbone=None,
              num_classes=21) at 256x256 (--seg deeplabv3_mobilenet_v3_large for the other).
Both exported by bitflip.export (opset 13; one image [3, H, W] per call for the detector, a
dynamic batch for the segmenter), eval sets of --samples drawn images (det_models.draw:
rectangles and ellipses) written by save_detection_eval_set / save_segmentation_eval_set.

Per model, each peer in its own process, one at a time, 1 thread (OMP/OPENBLAS/MKL_NUM_THREADS=1,
OMP_WAIT_POLICY=PASSIVE):
  eval      bitflip eval --threads 1 --repeat R --json (and once --outputs, compared with
            PyTorch's golden outputs); PyTorch eager (torch.set_num_threads(1), inference_mode,
            best of one image per call and the whole set per call; segmenter: batch 1, 4, all);
            ONNX Runtime (bench/ort_vision.js, onnxruntime-node, same files; its outputs are
            compared with PyTorch's too).
  campaign  bitflip run --local BITFLIP... on T uniform single-bit weight faults (every bit of every
            fp32 initializer), timed as a whole process (setup counted; the median of 3 runs, 1 with
            --quick) and by its --stats line;
            then PyTorch replays the very same faults from --trials-out: per trial XOR the bit
            into the parameter (or BatchNorm buffer) of the same name, run the eval set, compare
            with golden, XOR back. PyTorch is timed over its loop and over the whole process
            (import, build, load, golden pass: setup counted).
--bitflip takes any build, so that the same run can be repeated on another engine.
"""
import argparse
import datetime
import json
import os
import re
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import visionlib as V  # noqa: E402

PY = "/usr/bin/python3"
BENCH = benchlib.BENCH_DIR
ROOT = benchlib.REPO_ROOT
MODELS = os.path.join(BENCH, "models", "vision")
START, END = "<!-- det-bench:start -->", "<!-- det-bench:end -->"
SIZES = {"ssdlite320": 320, "lraspp_mobilenet_v3_large": 256, "deeplabv3_mobilenet_v3_large": 256}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def stem_of(name, samples):
    return os.path.join(MODELS, f"{name}_{samples}")


def make(name, samples, force):
    stem = stem_of(name, samples)
    if not force and all(os.path.exists(stem + e) for e in (".onnx", ".eval.safetensors", ".pt", ".golden.json")):
        return stem
    import torch
    torch.set_num_threads(1)
    os.makedirs(MODELS, exist_ok=True)
    log(f"det_bench: building and exporting {name}")
    m, task = V.build(name, SIZES[name])
    x, tg = V.draw_set(samples, SIZES[name], 11, task)
    V.export(m, task, x, tg, stem)
    torch.save(m.state_dict(), stem + ".pt")
    outs = V.torch_outputs(m, task, x)
    with open(stem + ".golden.json", "w") as f:
        if task == "detection":
            json.dump({"task": task, "outputs": [[v.tolist() for v in o] for o in outs]}, f)
        else:
            json.dump({"task": task, "argmax": [o.argmax(0).tolist() for o in outs],
                       "sample0": outs[0].tolist()}, f)
    return stem


# ---- the PyTorch peer (this file again, --torch-peer NAME) -----------------------------------

def torch_peer(a):
    t_proc = time.perf_counter()
    for k in benchlib.THREAD_ENV:
        os.environ[k] = "1"
    import numpy as np
    import torch
    torch.set_num_threads(1)
    benchlib.torch_keep_memory()
    stem = stem_of(a.torch_peer, a.samples)
    m, task = V.build(a.torch_peer, SIZES[a.torch_peer])
    m.load_state_dict(torch.load(stem + ".pt"))
    m.eval()
    x = torch.from_numpy(np.array(benchlib.read_safetensors(stem + ".eval.safetensors")
                                  ["images" if task == "detection" else "input"]))
    n = len(x)
    golden = json.load(open(stem + ".golden.json"))

    def run(per_call):
        with torch.inference_mode():
            if task == "detection":
                if per_call == 1:
                    return [m([x[i]])[0] for i in range(n)]
                return m([x[i] for i in range(n)])
            b = per_call or n
            return torch.cat([m(x[i:i + b])["out"] for i in range(0, n, b)])

    t_first = time.perf_counter()
    first = run(1)
    t_first = time.perf_counter() - t_first
    t_timing = time.perf_counter()   # the eval timing starts here
    if task == "detection":
        ok = all(V.compare_det(tuple(o[k].numpy() for k in ("boxes", "labels", "scores")),
                               (np.float32(g[0]).reshape(-1, 4), np.int64(g[1]), np.float32(g[2])))["ok"]
                 for o, g in zip(first, golden["outputs"]))
    else:
        ok = all(float(np.mean(o.argmax(0).numpy() == np.array(g))) > 0.999 for o, g in zip(first, golden["argmax"]))
    if not ok:
        print(json.dumps({"ok": False, "error": "PyTorch's outputs differ from the golden ones made at export"}))
        return 3

    def same_as_golden(out):
        """Per image: bit-identical to this process's golden pass (first)."""
        if task == "detection":
            return [all(torch.equal(o[k], f[k]) for k in f) for o, f in zip(out, first)]
        return [bool(torch.equal(o, f)) for o, f in zip(out, first)]
    choices = [1, 0] if task == "detection" else [1, 4, 0]
    best = None
    for b in choices:
        run(b)
        ts = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            run(b)
            ts.append(time.perf_counter() - t0)
        if best is None or min(ts) < best[1]:
            best = (b, min(ts))
    res = {"samples": n, "batch": best[0] or n, "seconds": best[1], "samples_per_s": n / best[1],
           "blas": benchlib.loaded_blas()}
    if a.trials_file:
        # the campaign's setup: import torch, build the module, load the weights, and one golden
        # pass at the loop's batch (its reference, timed below); not the eval timing above, nor
        # the check's pass at batch 1 (h20-ssd: these were counted, 8-9 passes of 16 images)
        setup = t_timing - t_proc - t_first
        params = dict(m.named_parameters())
        params.update({k: v for k, v in m.named_buffers() if v.dtype == torch.float32})
        ivs = {k: v.data.view(-1).view(torch.int32) for k, v in params.items()}
        trials = [json.loads(l) for l in open(a.trials_file) if l.strip()]
        trials = trials[:a.trials] if a.trials else trials
        prepared, skipped, bad_old = [], 0, 0
        for t in trials:
            fl = []
            for f in t["faults"]:
                name = f["tensor"]
                if name not in ivs:
                    skipped += 1
                    continue
                mask = 0
                for bit in f["bits"]:
                    mask |= 1 << int(bit)
                if mask >= 1 << 31:
                    mask -= 1 << 32
                idx = int(f["index"])
                old = f.get("old")
                if isinstance(old, (int, float)) and float(params[name].view(-1)[idx]) != np.float32(old):
                    bad_old += 1
                fl.append((name, idx, mask))
            prepared.append(fl)
        loop_batch = best[0] if task == "segmentation" else 1
        t_golden = time.perf_counter()
        first = run(loop_batch)     # golden at the loop's batch: a trial is "changed" if not bit-identical
        if task == "detection":
            first = list(first)
        setup += time.perf_counter() - t_golden
        snap = {k: v.clone() for k, v in ivs.items()}
        changed = 0
        t0 = time.perf_counter()
        for fl in prepared:
            for name, idx, mk in fl:
                ivs[name][idx] ^= mk
            out = run(loop_batch)
            if task == "detection":
                out = list(out)
            for name, idx, mk in fl:
                ivs[name][idx] ^= mk
            changed += not all(same_as_golden(out))
        loop = time.perf_counter() - t0
        restored = all(torch.equal(ivs[k], snap[k]) for k in ivs)
        res.update(trials=len(prepared), loop_seconds=loop, trials_per_s=len(prepared) / loop,
                   setup_seconds=setup, trials_per_s_setup=len(prepared) / (loop + setup),
                   trials_changed=changed, faults_not_in_torch=skipped, old_mismatch=bad_old,
                   restored=restored)
    print(json.dumps(res))
    return 0


# ---- running the peers ----------------------------------------------------------------------

def parse_json(out):
    for line in reversed((out or "").strip().splitlines()):
        if line.strip().startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    try:
        return json.loads(out)
    except (ValueError, TypeError):
        return None


def run(cmd, timeout, quiet):
    log("det_bench: " + " ".join(shlex.quote(c) for c in cmd))
    r = benchlib.measure_process(cmd, benchlib.thread_env(1), timeout, quiet, tag="det")
    r["json"] = parse_json(r.get("out", "")) if r.get("ok") else None
    return r


# --stats' first line (trials, rate, setup); the engine's parts follow on lines of their own
STATS = re.compile(r"^bitflip run: (\d+) trials in ([0-9.]+) s \(([0-9.]+) trials/s\).*?setup ([0-9.]+) s", re.M)


def check_outputs(task, stem, rows, names):
    """Per image, bitflip's or ORT's outputs against PyTorch's golden ones."""
    import numpy as np
    g = json.load(open(stem + ".golden.json"))
    if task == "detection":
        gold = [(np.array(o[0], np.float32).reshape(-1, 4), np.array(o[1], np.int64), np.array(o[2], np.float32))
                for o in g["outputs"]]
        res = [V.compare_det(r, q) for r, q in zip(rows, gold)]
        return {"images": len(res), "match": sum(c["ok"] for c in res),
                "count_match": sum(c["count"][0] == c["count"][1] for c in res),
                "max_box": max((c.get("max_box", 0) for c in res), default=0),
                "max_score": max((c.get("max_score", 0) for c in res), default=0),
                "first": next((c["why"] for c in res if not c["ok"]), "")}
    agree = [float(np.mean(np.asarray(r).argmax(0) == np.array(q))) for r, q in zip(rows, g["argmax"])]
    d0 = float(np.abs(np.asarray(rows[0], np.float32) - np.array(g["sample0"], np.float32)).max())
    return {"images": len(agree), "argmax_agree_min": min(agree), "max_abs_sample0": d0}


def one_model(a, name, trials, quick):
    stem = make(name, a.samples, a.regenerate)
    task = "detection" if name.startswith("ssd") else "segmentation"
    names = ["boxes", "labels", "scores"] if task == "detection" else ["out"]
    rep = 1 if quick else 3
    row = {"model": name, "task": task, "samples": a.samples, "size": SIZES[name]}
    # eval
    r = run([a.bitflip, "eval", stem + ".onnx", stem + ".eval.safetensors", "--threads", "1", "--repeat", str(rep),
             "--json"] + (["--batch", str(a.samples)] if task == "segmentation" else []), 3600, a.quiet_wait)
    row["bitflip_eval"] = r
    outp = os.path.join(BENCH, "out", f"det_{name}_bitflip_outputs.json")
    r2 = run([a.bitflip, "eval", stem + ".onnx", stem + ".eval.safetensors", "--threads", "1",
              "--outputs", outp], 3600, 0)
    if r2.get("ok"):
        rows = V.from_bitflip(json.load(open(outp)), task, names)
        if task == "segmentation":
            import numpy as np
            c = int(rows[0].size // (SIZES[name] ** 2))
            rows = [np.asarray(q).reshape(c, SIZES[name], SIZES[name]) for q in rows]
        row["bitflip_check"] = check_outputs(task, stem, rows, names)
        os.remove(outp)
    dump = os.path.join(BENCH, "out", f"det_{name}_ort.json")
    r = run(["node", os.path.join(BENCH, "ort_vision.js"), stem + ".onnx", stem + ".eval.safetensors", "--threads",
             "1", "--repeat", str(rep), "--dump", dump] + (["--batch", "4"] if task == "segmentation" else []),
            3600, a.quiet_wait)
    row["ort_eval"] = r
    if r.get("ok"):
        row["ort_check"] = check_outputs(task, stem, V.from_ort(json.load(open(dump)), task, names), names)
        os.remove(dump)
    # campaign
    spec = {"model": stem + ".onnx", "dataset": stem + ".eval.safetensors", "seed": 7, "trials": trials,
            "faults": {"target": "weights", "tensors": ["*"], "model": "bitflip", "bits": 1,
                       "representation": "fp32"}, "sampling": "uniform"}
    if task == "segmentation":
        spec["batch"] = a.samples
    sp = os.path.join(BENCH, "out", f"det_{name}_spec.json")
    with open(sp, "w") as f:
        json.dump(spec, f)
    tfile = os.path.join(BENCH, "out", f"det_{name}_trials.jsonl")
    runs, records = [], set()
    for _ in range(rep):   # the median of rep whole runs (benchlib.median_run); their records must agree
        c = run([a.bitflip, "run", "--local", sp, "--threads", "1", "--stats", "--format", "json", "--trials-out",
                 tfile, "--out", os.path.join(BENCH, "out", f"det_{name}_result.json")], 7200, a.quiet_wait)
        if c.get("ok"):
            m = STATS.search(c.get("err", ""))
            if m:
                c["stats"] = {"trials": int(m.group(1)), "trial_seconds": float(m.group(2)),
                              "trials_per_s": float(m.group(3)), "setup_seconds": float(m.group(4))}
            # every --stats line (one per engine part: differential, channel-local, checkpoints, ...)
            c["stats_lines"] = [l for l in c.get("err", "").splitlines() if l.startswith("bitflip run: ")]
        if c.get("ok"):
            with open(tfile, "rb") as f:
                records.add(f.read())
        runs.append(c)
    c = benchlib.median_run(runs)
    c["records_agree"] = len(records) <= 1
    for r in runs:
        r.pop("out", None)
        r.pop("err", None)
    row["bitflip_campaign"] = c
    row["torch"] = run([PY, os.path.abspath(__file__), "--torch-peer", name, "--samples", str(a.samples),
                        "--repeat", str(rep), "--trials-file", tfile if c.get("ok") else ""], 7200, a.quiet_wait)
    for k in ("bitflip_eval", "ort_eval", "torch", "bitflip_campaign"):
        row[k].pop("out", None)
        if row[k].get("ok"):
            row[k].pop("err", None)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bitflip", default=os.path.join(ROOT, "build", "bitflip"))
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--det-trials", type=int, default=20)
    ap.add_argument("--seg-trials", type=int, default=40)
    ap.add_argument("--seg", default="lraspp_mobilenet_v3_large",
                    choices=["lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large"])
    ap.add_argument("--models", default="det,seg", help="det, seg or both")
    ap.add_argument("--quick", action="store_true", help="4 images, 4 trials, one timed pass")
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument("--quiet-wait", type=float, default=10)
    ap.add_argument("--out", default=os.path.join(BENCH, "out", "det.json"))
    ap.add_argument("--write-doc")
    ap.add_argument("--render")
    ap.add_argument("--torch-peer", help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=3, help=argparse.SUPPRESS)
    ap.add_argument("--trials-file", help=argparse.SUPPRESS)
    ap.add_argument("--trials", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_peer:
        return torch_peer(a)
    if a.render:
        return write(json.load(open(a.render)), a.write_doc)
    if a.quick:
        a.samples, a.det_trials, a.seg_trials = 4, 4, 4
    # bitflip.export (visionlib.export) runs the binary measured, not the checkout's build/bitflip
    os.environ.setdefault("BITFLIP_BIN", os.path.abspath(a.bitflip))
    a.bitflip = os.path.abspath(a.bitflip)
    os.makedirs(os.path.join(BENCH, "out"), exist_ok=True)
    mi = benchlib.machine_info()
    t0 = time.time()
    rows = []
    which = a.models.split(",")
    if "det" in which:
        rows.append(one_model(a, "ssdlite320", a.det_trials, a.quick))
    if "seg" in which:
        rows.append(one_model(a, a.seg, a.seg_trials, a.quick))
    mi["loadavg_end"] = os.getloadavg()
    commit = os.popen(f"git -C {shlex.quote(ROOT)} rev-parse --short HEAD").read().strip()
    dirty = bool(os.popen(f"git -C {shlex.quote(ROOT)} status --porcelain -uno").read().strip())
    doc = {"meta": {"date": datetime.datetime.fromtimestamp(t0, datetime.timezone.utc).isoformat(timespec="seconds"),
                    "machine": mi, "seconds": time.time() - t0, "commit": commit + ("+" if dirty else ""),
                    "bitflip": a.bitflip,
                    "command": "/usr/bin/python3 bench/det_bench.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])},
           "rows": rows}
    benchlib.save_results(a.out, doc["meta"], rows)
    return write(doc, a.write_doc)


def fmt(x, nd=1):
    return f"{x:,.{nd}f}" if isinstance(x, (int, float)) else "–"


def ratio(x, y):
    return f"{x / y:.2f}x" if x and y else "–"


def js(r, k):
    return ((r or {}).get("json") or {}).get(k) if (r or {}).get("ok") else None


def quiet_line(mi):
    """Whether the run had the machine to itself: a 1-minute load average above the
    cores' half at either end says other work shared them."""
    loads = [mi[k][0] for k in ("loadavg_start", "loadavg_end") if mi.get(k)]
    if loads and max(loads) > 0.5 * (mi.get("nproc") or 1) + 1:
        return ("- Measured on a loaded machine (other work shared the cores: the load average above): "
                "the numbers are indicative; the ratios are within one run.")
    return "- Measured on a quiet machine (the load average above); the ratios are within one run."


def write(doc, path):
    meta, rows = doc["meta"], doc["rows"]
    lines = [START, "## Detectors and segmenters (`bench/det_bench.py`)", "",
             f"- Date: {meta['date']}; took {meta['seconds']:.0f} s; bitflip at commit {meta['commit']}",
             *benchlib.machine_lines(meta["machine"]),
             f"- Command: `{meta['command']}` (`make bench-det`)",
             quiet_line(meta["machine"]), "",
             "Golden eval, 1 thread, samples/s over the whole eval set (PyTorch at its fastest of one image "
             "per call and the whole set per call; the segmenter at batch 1, 4 or all). *outputs* compares each "
             "engine's per-image outputs with PyTorch's (detections: count, labels, boxes within 1e-3 relative, "
             "scores within 1e-4; segmenter: arg-max agreement per pixel, worst image).", "",
             "| model | images | bitflip samples/s | PyTorch samples/s (per call) | ORT samples/s | bitflip / PyTorch | "
             "bitflip / ORT | bitflip outputs | ORT outputs |", "|---|---|---|---|---|---|---|---|---|"]

    def chk(c):
        if not c:
            return "–"
        if "match" in c:
            return (f"{c['match']}/{c['images']} images match (max box diff {c['max_box']:.2g}, score "
                    f"{c['max_score']:.2g})" + (f"; first: {c['first']}" if c["first"] else ""))
        return f"arg-max {100 * c['argmax_agree_min']:.3f}% (image 0 max abs {c['max_abs_sample0']:.2g})"

    for r in rows:
        bf, tt, ort = js(r["bitflip_eval"], "samples_per_s"), js(r["torch"], "samples_per_s"), js(r["ort_eval"],
                                                                                                  "samples_per_s")
        tb = js(r["torch"], "batch")
        per = "1 image" if tb == 1 else f"{tb} images" if tb else "?"
        lines.append(f"| {r['model']} {r['size']}x{r['size']} | {r['samples']} | {fmt(bf, 2)} | {fmt(tt, 2)} ({per}) | "
                     f"{fmt(ort, 2)} | {ratio(bf, tt)} | {ratio(bf, ort)} | {chk(r.get('bitflip_check'))} | "
                     f"{chk(r.get('ort_check'))} |")
    lines += ["", "Campaigns: uniform single-bit weight faults (every bit of every fp32 initializer: weights, biases, "
              "BatchNorm statistics), seed 7, 1 thread. *bitflip whole* is the whole `bitflip run --local` process "
              "(load, golden pass, checks, trials: setup counted), the median of three runs (one with --quick; every "
              "run's wall is listed with the `--stats` lines below), and *trials/s* and *setup* come from that run's "
              "`--stats`. "
              "PyTorch replays the same faults (same tensor, element and bit, from `--trials-out`) in its "
              "flip-and-rerun loop: *loop* is its trial loop alone, *setup counted* adds its process's import, "
              "build, weight loading and golden pass. The ratios put bitflip with its setup against PyTorch's loop "
              "alone (PyTorch's most favourable reading) and against PyTorch with its setup.", "",
              "| model | trials | bitflip whole s | bitflip trials/s (setup counted) | bitflip trials/s (trials only) "
              "| bitflip setup s | PyTorch loop trials/s | PyTorch trials/s (setup counted) | bitflip (setup) / "
              "PyTorch loop | bitflip / PyTorch, both setup counted | trials changing outputs (PyTorch) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c, tj = r["bitflip_campaign"], (r["torch"].get("json") or {})
        st = c.get("stats") or {}
        whole = c.get("wall") if c.get("ok") else None
        n = st.get("trials")
        bfs = n / whole if n and whole else None
        tl, ts = tj.get("trials_per_s"), tj.get("trials_per_s_setup")
        lines.append(f"| {r['model']} | {n or '–'} | {fmt(whole)} | {fmt(bfs, 3)} | {fmt(st.get('trials_per_s'), 3)} | "
                     f"{fmt(st.get('setup_seconds'), 2)} | {fmt(tl, 3)} | {fmt(ts, 3)} | {ratio(bfs, tl)} | "
                     f"{ratio(bfs, ts)} | {tj.get('trials_changed', '–')} of {tj.get('trials', '–')} |")
    lines += ["", "bitflip's `--stats` lines, per model:", ""]
    for r in rows:
        walls = [w for w in r["bitflip_campaign"].get("walls") or [] if w]
        if len(walls) > 1:
            lines.append(f"- {r['model']}: whole runs {', '.join(f'{w:.2f}' for w in walls)} s (the median's "
                         f"lines follow)")
        for l in r["bitflip_campaign"].get("stats_lines") or []:
            if not re.search(r"\d+/\d+ trials \(", l):       # progress lines
                lines.append(f"- {r['model']}: `{l.strip()}`")
    failed = [f"{r['model']} {k}: {r[k].get('error')}" for r in rows
              for k in ("bitflip_eval", "ort_eval", "torch", "bitflip_campaign") if not r[k].get("ok")]
    notes = []
    for r in rows:
        tj = r["torch"].get("json") or {}
        if tj.get("faults_not_in_torch"):
            notes.append(f"{r['model']}: {tj['faults_not_in_torch']} faults in initializers with no PyTorch "
                         "tensor of that name (constants the exporter folded) were left out of PyTorch's trials")
        if tj and tj.get("restored") is False:
            failed.append(f"{r['model']}: PyTorch's weights were not restored bit for bit")
        if r["bitflip_campaign"].get("records_agree") is False:
            failed.append(f"{r['model']}: bitflip's repeated campaign runs wrote different trial records")
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
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
