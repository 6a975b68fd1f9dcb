"""The mitigation benchmark (bench/mitigation_bench.py): its constants and cases, the models
and configurations, the specs."""
import json
import math
import os
import struct
import subprocess
import sys
import benchlib  # the machine helpers; numpy not needed


BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "conformance")
START, END = "<!-- mitigation-bench:start -->", "<!-- mitigation-bench:end -->"
SEED = 7
RATES = [1e-7, 1e-6, 1e-5, 1e-4, 1e-3]
REPEATS = (200, 10)        # BER repeats per rate: full / --quick
PER_BIT = (100, 20)        # per_bit trials per bit position (x 32): full / --quick
COV_TRIALS = (500, 50)     # trials per fault model in the coverage campaigns: full / --quick
# The coverage campaigns: one per fault model, on every weight. `ber` uses one rate, the
# power of ten nearest 1 / (bits of the parameters): about one bit error per trial, where the
# sweeps show faults starting to cost the metric while ABFT's DUE does not yet dominate
# (digits_cnn: 1e-5, dlrm_small: 1e-6).
FAULT_MODELS = ["bitflip", "stuck_at_0", "stuck_at_1", "random_value", "ber"]
SINGLE = FAULT_MODELS[:4]  # one corrupted weight per trial
# A per-rate recovery whose loss (golden - faulty mean) is below this is marked: the ratio
# of two differences that small is noise (and can be anything).
SMALL_LOSS = 1e-3
STATS_RE_PREFIX = "bitflip run: "

# The paper this reproduces (docs/MITIGATIONS.md): activation clipping recovers "up to 30%" of
# the AUC lost to memory errors in DLRM weights.
PAPER = ("Terrorch/PyTEI's paper, *Evaluating and Enhancing Robustness of Deep Recommendation "
         "Systems Against Hardware Errors*")

CASES = {
    "drs_dlrm_small": dict(kind="ber", models=[("dlrm_small", "conformance")],
                           title="The DRS experiment: BER on the weights of `dlrm_small`, AUC"),
    "drs_dlrm_op13": dict(kind="ber", models=[("dlrm_ops_op13", "fixtures")],
                          title="The DRS experiment on the project's fixture `dlrm_ops_op13`, AUC"),
    "cnn_digits": dict(kind="ber", models=[("digits_cnn", "conformance"), ("cnn_ops_op17", "fixtures")],
                       title="The same sweep on the digits CNN, accuracy"),
    "bits_digits_cnn": dict(kind="per_bit", models=[("digits_cnn", "conformance"), ("cnn_ops_op17", "fixtures")],
                            title="Single-bit weight faults by bit position: digits CNN"),
    "bits_dlrm_small": dict(kind="per_bit", models=[("dlrm_small", "conformance"), ("dlrm_ops_op13", "fixtures")],
                            title="Single-bit weight faults by bit position: DLRM"),
    "cov_digits_cnn": dict(kind="fault_models", models=[("digits_cnn", "conformance"), ("cnn_ops_op17", "fixtures")],
                           title="Coverage per fault model: digits CNN"),
    "cov_dlrm_small": dict(kind="fault_models", models=[("dlrm_small", "conformance"), ("dlrm_ops_op13", "fixtures")],
                           title="Coverage per fault model: DLRM"),
}
CONFIG_NOTES = {
    "none": "no protection (the baseline)",
    "clip": "activation clipping, bounds profiled on the golden pass (min/max), clamp; at the "
            "engine's default places: every Gemm, MatMul and Conv output that is not a graph output",
    "clip-pytei": "PyTEI's clipping: fixed [−100, 100], NaN → 0, on every Linear (Gemm) and Conv "
                  "output but the last Linear's",
    "sbp": "selective bit protection (ECC) of the sign and exponent bits, 31–23, of every weight",
    "abft-detect": "ABFT checksums on every Gemm, MatMul by a weight and Conv; a mismatch makes the trial DUE",
    "abft-correct": "the same checksums; a single wrong channel per row is corrected, else the op "
                    "is recomputed, else DUE",
}


def log(msg):
    print(f"[mitigations] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- helpers

BUSY_LIMIT = benchlib.BUSY_LIMIT   # cores used by other processes that make a run count as disturbed
cpu_busy_seconds = benchlib.cpu_busy_seconds
machine_info = benchlib.machine_info
file_id = benchlib.file_id


def wait_quiet(max_wait):
    return benchlib.wait_quiet(max_wait, tag="mitigations")


def default_conformance_dir():
    """../shared/conformance relative to the repo root, else tests/fixtures/conformance."""
    for d in (os.path.join(os.path.dirname(ROOT), "shared", "conformance"), FIXTURES):
        if os.path.isfile(os.path.join(d, "digits_mlp.onnx")):
            return d
    return os.path.join(os.path.dirname(ROOT), "shared", "conformance")


def find_model(name, dirs):
    """Directory of `dirs` holding NAME.onnx and NAME.eval.safetensors; FileNotFoundError."""
    for d in dirs:
        if d and os.path.isfile(os.path.join(d, name + ".onnx")) and \
                os.path.isfile(os.path.join(d, name + ".eval.safetensors")):
            return d
    raise FileNotFoundError(f"model {name!r}: no {name}.onnx + {name}.eval.safetensors in {dirs}")


def labels_are_integers(path):
    """Whether the eval set's `labels` tensor holds integers (classification) or floats (binary),
    from the safetensors header."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return header["labels"]["dtype"] in ("I64", "I32", "I16", "I8", "U8")


def measure_process(cmd, timeout, quiet_wait=0):
    return benchlib.measure_process(cmd, None, timeout, quiet_wait, tag="mitigations")


def resolve_model(a, c):
    """(name, directory, source) of the first of the case's candidate models found."""
    tried = []
    for name, where in c["models"]:
        d = a.cdir if where == "conformance" else FIXTURES
        tried.append(os.path.join(d, name + ".onnx"))
        try:
            return name, find_model(name, [d]), where
        except FileNotFoundError:
            continue
    raise FileNotFoundError("none of " + ", ".join(os.path.relpath(t, ROOT) for t in tried))


def model_info(a, onnx):
    p = subprocess.run([a.bitflip, "info", "--json", onnx], capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"bitflip info {onnx}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def pytei_places(info):
    """PyTEI clips every Linear output but the last: the outputs of every Gemm and Conv node
    except the last Gemm in graph order (PyTorch's exporter names a node's output
    NODE_output_0; bitflip refuses an `at` name that matches no output)."""
    layers = [l for l in info["layers"] if l["op"] in ("Gemm", "Conv")]
    gemms = [i for i, l in enumerate(layers) if l["op"] == "Gemm"]
    if gemms:
        del layers[gemms[-1]]
    return [l["name"] + "_output_0" for l in layers]


def configurations(info):
    return [
        "none",
        {"name": "clip", "clip": {"bounds": "profile"}},
        {"name": "clip-pytei", "clip": {"bounds": [-100, 100], "nan_to_zero": True, "at": pytei_places(info)}},
        "sbp",
        {"name": "abft-detect", "abft": {"mode": "detect"}},
        {"name": "abft-correct", "abft": {"mode": "correct"}},
    ]


def ber_rate_for(param_bits):
    """The power of ten nearest 1 / param_bits: about one bit error per trial."""
    return float(f"1e{round(-math.log10(param_bits))}")


def make_spec(a, c, name, d, info, fault_model=None):
    rel = lambda p: os.path.relpath(p, ROOT)  # noqa: E731  (paths from the repo root)
    task_metric = "accuracy" if labels_are_integers(os.path.join(d, name + ".eval.safetensors")) else "auc"
    spec = {"model": rel(os.path.join(d, name + ".onnx")),
            "dataset": rel(os.path.join(d, name + ".eval.safetensors")),
            "seed": SEED}
    if c["kind"] == "fault_models":
        if fault_model == "ber":
            spec["faults"] = {"target": "weights", "tensors": ["*"], "model": "ber",
                              "rate": ber_rate_for(info["param_bits"]), "repeats": a.cov_trials,
                              "representation": "fp32"}
        else:
            spec["trials"] = a.cov_trials
            spec["faults"] = {"target": "weights", "tensors": ["*"], "model": fault_model}
            if fault_model != "random_value":
                spec["faults"]["bits"] = 1
            spec["faults"]["representation"] = "fp32"
        spec["sampling"] = "uniform"
    elif c["kind"] == "ber":
        spec["faults"] = {"target": "weights", "tensors": ["*"], "model": "ber", "rates": RATES,
                          "repeats": a.repeats, "representation": "fp32"}
    else:
        spec["trials"] = 32 * a.per_bit
        spec["faults"] = {"target": "weights", "tensors": ["*"], "model": "bitflip", "bits": 1,
                          "representation": "fp32"}
        spec["sampling"] = "per_bit"
    spec["metrics"] = [task_metric]
    spec["mitigations"] = configurations(info)
    return spec


def spec_text(spec):
    """The spec as JSON: a field per line, a mitigation per line (short enough to read)."""
    lines = []
    for k, v in spec.items():
        if k == "mitigations":
            lines.append('  "mitigations": [\n' + ",\n".join("    " + json.dumps(m) for m in v) + "\n  ]")
        else:
            lines.append(f"  {json.dumps(k)}: {json.dumps(v)}")
    return "{\n" + ",\n".join(lines) + "\n}"
