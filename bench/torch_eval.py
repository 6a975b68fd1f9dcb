#!/usr/bin/python3
"""PyTorch peer of `bitflip eval`.

  /usr/bin/python3 bench/torch_eval.py MODEL_NAME --threads N --batch B --repeat R [--dir DIR]

Runs a hand-written nn.Module equivalent to MODEL_NAME.onnx (weights loaded from the ONNX
initializers; for dlrm_large the module and state_dict saved by make_models.py), checks its
outputs on the whole eval set against the `golden` field of NAME.ref.json (1e-4 relative or
1e-5 absolute; exits 3 if not), then times full passes over the eval set in batches of B under
torch.inference_mode(): one warm-up pass (the checked one) and more, then best of R.
Prints one JSON object shaped like `bitflip eval --json`:
  {"model", "samples", "task", "accuracy" | "auc"+"logloss", "batch", "threads", "seconds",
   "samples_per_s", ...extra fields}
B = 0 means the whole eval set as one batch.
"""
import argparse
import json
import os
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description="PyTorch peer of bitflip eval")
    ap.add_argument("model", help="model name, e.g. digits_mlp or dlrm_large")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=256, help="0 = whole eval set")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2, help="warm-up passes (the first is checked)")
    ap.add_argument("--dir", help="directory with NAME.onnx/.eval.safetensors/.ref.json")
    ap.add_argument("--interaction", choices=["matmul", "pairs"], default="matmul",
                    help="DLRM only: how the torch module computes the pairwise dots (see nets.DLRM)")
    ap.add_argument("--no-check", action="store_true", help="skip the golden check")
    ap.add_argument("--json", action="store_true", help="accepted for symmetry; output is JSON anyway")
    return ap.parse_args()


def main():
    a = parse_args()
    # Thread env must be in place before numpy/torch (and their OpenMP/OpenBLAS) are loaded.
    # run.py sets these in the subprocess env already; this makes a manual run behave the same.
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[k] = str(a.threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch
    import benchlib
    import nets

    torch.set_num_threads(a.threads)
    benchlib.torch_keep_memory()

    d = a.dir or benchlib.find_model(a.model)
    onnx_path = os.path.join(d, a.model + ".onnx")
    data = benchlib.read_safetensors(os.path.join(d, a.model + ".eval.safetensors"))
    ref_path = os.path.join(d, a.model + ".ref.json")
    ref = json.load(open(ref_path)) if os.path.exists(ref_path) else None

    pt_path = os.path.join(d, a.model + ".pt")
    if os.path.exists(pt_path):
        saved = torch.load(pt_path)
        model = nets.DLRM(**saved["config"])
        model.load_state_dict(saved["state_dict"], strict=True)
        input_names = ["dense", "sparse"]
        source = "saved module " + os.path.basename(pt_path)
    elif a.model in nets.CONFORMANCE:
        ctor, input_names = nets.CONFORMANCE[a.model]
        model = ctor()
        model.load_state_dict(nets.state_dict_from_onnx(onnx_path), strict=True)
        source = "nets." + type(model).__name__ + " + ONNX initializers"
    else:
        sys.exit(f"torch_eval: no torch module for {a.model!r} (known: {sorted(nets.CONFORMANCE)},"
                 " or a NAME.pt from make_models.py)")
    model.eval()
    if a.interaction != "matmul":
        if not isinstance(model, nets.DLRM):
            sys.exit(f"torch_eval: --interaction applies to DLRM models only, not {a.model}")
        model.interaction = a.interaction
        source += f", interaction={a.interaction}"
    if input_names != nets.graph_input_names(onnx_path):
        sys.exit(f"torch_eval: input names {input_names} != ONNX graph inputs "
                 f"{nets.graph_input_names(onnx_path)}")

    labels = data["labels"]
    task = benchlib.task_of(labels)
    inputs = [torch.from_numpy(data[n]) for n in input_names]
    n = inputs[0].shape[0]
    batch = n if a.batch <= 0 else min(a.batch, n)
    starts = list(range(0, n, batch))

    with torch.inference_mode():
        out_shape = model(*[x[:1] for x in inputs]).shape[1:]
        out = torch.empty((n,) + tuple(out_shape), dtype=torch.float32)

        def one_pass():
            for s in starts:
                out[s:s + batch] = model(*[x[s:s + batch] for x in inputs])

        one_pass()
        check = {}
        if ref is not None and not a.no_check:
            golden = benchlib.load_golden(ref)
            ok, err, worst = benchlib.compare_golden(out.numpy(), golden)
            check = {"golden_ok": ok, "golden_max_abs_err": err}
            if not ok:
                print(f"torch_eval: {a.model}: outputs do NOT match {ref_path} golden "
                      f"(max abs err {err:g} at flat index {worst})", file=sys.stderr)
                sys.exit(3)
            gm_name, gm = benchlib.golden_metric(ref)
            if gm_name:
                got = benchlib.metrics(task, labels, out.numpy())[gm_name]
                check["golden_metric"] = gm
                if abs(got - gm) > 1e-4:
                    print(f"torch_eval: {a.model}: {gm_name} {got} != golden {gm}", file=sys.stderr)
                    sys.exit(3)
        for _ in range(max(0, a.warmup - 1)):
            one_pass()
        times = []
        for _ in range(max(1, a.repeat)):
            t0 = time.perf_counter()
            one_pass()
            times.append(time.perf_counter() - t0)

    result = {"model": a.model, "samples": n, "task": task}
    result.update(benchlib.metrics(task, labels, out.numpy()))
    best = min(times)
    result.update({"batch": batch, "threads": a.threads, "seconds": best,
                   "samples_per_s": n / best, "peer": "torch", "variant": a.interaction,
                   "torch_version": torch.__version__,
                   "torch_threads": torch.get_num_threads(), "repeat": len(times),
                   "seconds_median": sorted(times)[len(times) // 2], "source": source,
                   "blas": benchlib.warn_if_reference_blas("torch_eval")})
    result.update(check)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
