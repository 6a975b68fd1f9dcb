"""Helpers shared by the benchmark scripts: the machine (its description, how busy it
is), safetensors I/O (the Python package's), metrics, paths.

Only numpy, the standard library and clients/python, and numpy only for the arrays:
run.py imports this without importing torch, and the scripts that need no arrays
(daemon_bench.py, mitigation_bench.py) import it where numpy is not installed.
"""
import datetime
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time

try:
    import numpy as np
except ImportError:   # the machine helpers below need no arrays
    np = None

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
MODELS_DIR = os.path.join(BENCH_DIR, "models")

# eval sets are read and written with the project's Python package (clients/python: only the
# standard library until an array is touched), not installed here; the scripts call them as
# benchlib.read_safetensors and benchlib.write_safetensors
sys.path.insert(0, os.path.join(REPO_ROOT, "clients", "python"))
from bitflip.safetensors import read_safetensors, write_safetensors  # noqa: E402,F401

# ---------------------------------------------------------------- the machine

CLK_TCK = os.sysconf("SC_CLK_TCK")
BUSY_LIMIT = 0.15   # cores used by other processes that make a run count as disturbed


def cpu_stat():
    """Machine-wide CPU seconds so far (all cores) from /proc/stat: processes (user + nice +
    system), irq + softirq (on loopback benchmarks mostly their own traffic), steal (taken by
    the hypervisor for other guests)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]] + [0] * 8
    return {"proc": (v[0] + v[1] + v[2]) / CLK_TCK, "irq": (v[5] + v[6]) / CLK_TCK, "steal": v[7] / CLK_TCK}


def cpu_busy_seconds():
    """CPU seconds the whole machine spent busy or stolen so far (all cores); None if
    /proc/stat cannot be read."""
    try:
        c = cpu_stat()
    except OSError:
        return None
    return c["proc"] + c["irq"] + c["steal"]


def wait_quiet(max_wait, tag="bench"):
    """Wait (up to max_wait s) until other processes use < BUSY_LIMIT cores; return the load
    last seen, in cores."""
    t_end = time.time() + max_wait
    while True:
        b0, t0 = cpu_busy_seconds(), time.time()
        time.sleep(0.5)
        b1, t1 = cpu_busy_seconds(), time.time()
        load = 0.0 if b0 is None or b1 is None else (b1 - b0) / (t1 - t0)
        if load < BUSY_LIMIT or time.time() >= t_end:
            return load
        print(f"[{tag}]   machine busy ({load:.2f} cores used by other processes), waiting ...",
              file=sys.stderr, flush=True)
        time.sleep(2)


def machine_info():
    """CPU model, cores, memory, hypervisor, OS and the load average now."""
    info = {"cpu": platform.processor() or platform.machine(), "nproc": os.cpu_count()}
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                info["cpu"] = line.split(":", 1)[1].strip()
            if line.startswith("Hypervisor vendor:"):
                info["hypervisor"] = line.split(":", 1)[1].strip()
    except OSError:
        pass
    try:
        info["mem_gib"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    except (ValueError, OSError):
        pass
    info["os"] = platform.platform()
    info["loadavg_start"] = os.getloadavg()
    return info


def machine_lines(mi):
    """The "- Machine:" and "- Load average" lines of a results section."""
    return [f"- Machine: {mi.get('cpu')}, nproc = {mi.get('nproc')}"
            + (f", {mi['mem_gib']:.0f} GiB RAM" if mi.get("mem_gib") else "")
            + (f", {mi['hypervisor']} guest" if mi.get("hypervisor") else "") + f"; {mi.get('os')}",
            "- Load average (1 min) at start / end: "
            + " / ".join(f"{mi[k][0]:.2f}" for k in ("loadavg_start", "loadavg_end") if mi.get(k))]


def measure_process(cmd, env, timeout, quiet_wait=0, tag="bench"):
    """Run cmd from the repo root, killed after `timeout` s; return dict(ok, rc, cmd, out, err,
    rss_mib, wall, cpu_s, others_cores, error on failure). Peak RSS comes from os.wait4;
    others_cores = CPU used meanwhile by other processes, in cores (from /proc/stat minus the
    child's own CPU time)."""
    if quiet_wait > 0:
        wait_quiet(quiet_wait, tag)
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        busy0 = cpu_busy_seconds()
        t0 = time.time()
        try:
            p = subprocess.Popen(cmd, stdout=fo, stderr=fe, env=env, cwd=REPO_ROOT)
        except OSError as e:
            return {"ok": False, "error": f"cannot start: {e}", "cmd": cmd}
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        rc = os.waitstatus_to_exitcode(status)
        wall = time.time() - t0
        busy1 = cpu_busy_seconds()
        fo.seek(0)
        fe.seek(0)
        out = fo.read().decode("utf-8", "replace")
        err = fe.read().decode("utf-8", "replace")
    cpu = ru.ru_utime + ru.ru_stime
    others = None
    if busy0 is not None and busy1 is not None and wall > 0:
        others = max(0.0, (busy1 - busy0 - cpu) / wall)
    r = {"ok": rc == 0, "rc": rc, "cmd": cmd, "out": out, "err": err, "rss_mib": ru.ru_maxrss / 1024.0,
         "wall": wall, "cpu_s": cpu, "others_cores": others}
    if rc != 0:
        tail = " | ".join(l for l in err.strip().splitlines()[-3:] if l.strip())
        r["error"] = f"exit {rc}" + (" (killed: timeout)" if rc == -9 else "") + (f": {tail}" if tail else "")
    return r


def median_run(runs):
    """The successful run whose wall time is the median of the successful ones (the lower of
    the two middle ones for an even count), with every run's wall in "walls"; the first run
    when none succeeded. A bitflip campaign takes seconds, so one run can meet a disturbance
    on the host whole: one of resnet18's 2-thread campaigns in bench-real ran at 60% of the
    rate the next runs gave (docs/benchmarks/aims.md, the 469bfbc0 entry)."""
    ok = sorted((r for r in runs if r.get("ok")), key=lambda r: r["wall"])
    if not ok:
        return runs[0]
    m = dict(ok[(len(ok) - 1) // 2])
    m["walls"] = [r.get("wall") for r in runs]
    return m


def write_section(path, start, end, text):
    """Replaces the part of the file at `path` from the line `start` to the line `end`
    (markers included; `text` carries its own) with `text`, or appends it if the markers are
    absent: each benchmark owns its section of a shared results file."""
    old = open(path).read() if os.path.exists(path) else ""
    i, j = old.find(start), old.find(end)
    if i >= 0 and j > i:
        rest = old[j + len(end):]
        # text ends with its own newline after `end`: the old one after the marker
        # goes, or each rewrite would add a blank line under the section
        if text.endswith("\n") and rest.startswith("\n"):
            rest = rest[1:]
        new = old[:i] + text + rest
    else:
        new = old + ("" if old.endswith("\n") or not old else "\n") + ("\n" if old else "") + text + "\n"
    with open(path, "w") as f:
        f.write(new)


def file_id(path):
    """Short sha256 and mtime of a file, to notice a binary rebuilt during a run."""
    try:
        with open(path, "rb") as f:
            h = hashlib.sha256(f.read()).hexdigest()[:12]
        mt = datetime.datetime.fromtimestamp(os.path.getmtime(path)).astimezone()
        return f"sha256 {h}, built {mt.isoformat(timespec='seconds')}"
    except OSError:
        return None


def roc_auc(labels, scores):
    """Area under the ROC curve (Mann-Whitney U with average ranks for ties)."""
    y = np.asarray(labels, dtype=np.float64).reshape(-1) > 0.5
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ss = s[order]
    ranks = np.empty(s.size, dtype=np.float64)
    i = 0
    n = s.size
    # average ranks over runs of equal scores
    while i < n:
        j = i + 1
        while j < n and ss[j] == ss[i]:
            j += 1
        ranks[order[i:j]] = 0.5 * (i + j - 1) + 1.0
        i = j
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


LOGLOSS_EPS = 1e-7


def logloss(labels, probs):
    y = np.asarray(labels, dtype=np.float64).reshape(-1)
    p = np.clip(np.asarray(probs, dtype=np.float64).reshape(-1), LOGLOSS_EPS, 1.0 - LOGLOSS_EPS)
    return float(-np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p)))


def accuracy(labels, logits):
    logits = np.asarray(logits)
    pred = np.argmax(logits.reshape(logits.shape[0], -1), axis=1)
    return float(np.mean(pred == np.asarray(labels).reshape(-1)))


def task_of(labels):
    return "classification" if np.issubdtype(np.asarray(labels).dtype, np.integer) else "binary"


def metrics(task, labels, outputs):
    if task == "classification":
        return {"accuracy": accuracy(labels, outputs)}
    return {"auc": roc_auc(labels, outputs), "logloss": logloss(labels, outputs)}


def _num(x):
    if isinstance(x, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[x]
    return x


def load_golden(ref):
    """ref.json's `golden` as a float64 array (strings NaN/Infinity decoded)."""
    g = ref["golden"]
    return np.array([[_num(v) for v in row] if isinstance(row, list) else _num(row) for row in g],
                    dtype=np.float64)


def compare_golden(outputs, golden, rtol=1e-4, atol=1e-5):
    """Return (ok, max_abs_err, worst_index). A value matches when within rtol relative OR
    atol absolute; NaN/Inf must be in the same places."""
    o = np.asarray(outputs, dtype=np.float64).reshape(golden.shape[0], -1)
    g = golden.reshape(golden.shape[0], -1)
    if o.shape != g.shape:
        return False, float("inf"), None
    fin_o, fin_g = np.isfinite(o), np.isfinite(g)
    if not np.array_equal(fin_o, fin_g):
        return False, float("inf"), None
    same_nonfinite = np.all((o[~fin_g] == g[~fin_g]) | (np.isnan(o[~fin_g]) & np.isnan(g[~fin_g])))
    d = np.abs(np.where(fin_g, o, 0.0) - np.where(fin_g, g, 0.0))
    okmask = (d <= atol) | (d <= rtol * np.abs(np.where(fin_g, g, 0.0)))
    worst = int(np.argmax(d)) if d.size else None
    return bool(okmask.all() and same_nonfinite), float(d.max()) if d.size else 0.0, worst


def golden_metric(ref):
    if "golden_accuracy" in ref:
        return "accuracy", ref["golden_accuracy"]
    if "golden_auc" in ref:
        return "auc", ref["golden_auc"]
    return None, None


def default_conformance_dir():
    """../shared/conformance relative to the repo root, else tests/fixtures/conformance."""
    for d in (os.path.join(os.path.dirname(REPO_ROOT), "shared", "conformance"),
              os.path.join(REPO_ROOT, "tests", "fixtures", "conformance")):
        if os.path.isfile(os.path.join(d, "digits_mlp.onnx")):
            return d
    return os.path.join(os.path.dirname(REPO_ROOT), "shared", "conformance")


def find_model(name, dirs=None):
    """Directory holding NAME.onnx and NAME.eval.safetensors, searching `dirs` (default: the
    conformance dir, then bench/models). Raises FileNotFoundError."""
    for d in dirs or [default_conformance_dir(), MODELS_DIR]:
        if d and os.path.isfile(os.path.join(d, name + ".onnx")) and \
                os.path.isfile(os.path.join(d, name + ".eval.safetensors")):
            return d
    raise FileNotFoundError(f"model {name!r}: no {name}.onnx + {name}.eval.safetensors in "
                            f"{dirs or [default_conformance_dir(), MODELS_DIR]}")


THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def loaded_blas():
    """The BLAS library this process has mapped (call after importing torch), or None.

    Debian's python3-torch calls the system libblas.so.3: OpenBLAS when libopenblas0 is
    installed, else the reference implementation, several times slower. A PyTorch baseline
    on the reference BLAS flatters every ratio, so the PyTorch peers warn and report it."""
    try:
        with open("/proc/self/maps") as fh:
            libs = {line.split()[-1] for line in fh if "blas" in line.rsplit("/", 1)[-1].lower()}
    except OSError:
        return None
    libs = sorted(os.path.realpath(p) for p in libs if p.startswith("/"))
    return libs[0] if libs else None


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
# glibc refuses an mmap threshold over HEAP_MAX_SIZE / 2 (32 MiB on 64-bit)
_KEEP_BELOW = 32 << 20


def torch_keep_memory():
    """PyTorch's best allocator setting for a timed loop: freed blocks under 32 MiB stay in
    glibc's heap for the next batch instead of going back to the kernel.

    Why: PyTorch frees every activation after its op, and glibc returns any block over its
    (dynamic) mmap threshold and the heap's free top to the kernel, so each batch takes its
    activations from fresh pages, a page fault each. How much that costs is the host's: on
    the AMD VM of docs/BENCHMARKS.md a fresh page costs 5-50x a reused one, and mobilenet_v2's
    PyTorch peer measured 12.5 to 79.7 samples/s in quiet runs of the same files (154,848
    minor faults in 3 passes of 16 images; none with this setting, 5x faster). PyTorch's own
    CPU tuning guide says the same (a caching allocator: jemalloc, tcmalloc); this is glibc's
    equivalent, for the peer process only (call after importing torch, before timing).
    Returns what it set, for the results; None where mallopt is not glibc's."""
    import ctypes
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        ok = libc.mallopt(_M_MMAP_THRESHOLD, _KEEP_BELOW) == 1 and \
            libc.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(2**31 - 1)) == 1
    except (OSError, AttributeError):
        return None
    return "glibc malloc keeps freed blocks under 32 MiB (mmap threshold 32 MiB, no trim)" if ok else None


def warn_if_reference_blas(tag):
    blas = loaded_blas()
    if blas and "openblas" not in blas.lower() and "mkl" not in blas.lower():
        print(f"[{tag}] WARNING: PyTorch is using {blas}, not OpenBLAS: its timings are a weak baseline. "
              f"Install libopenblas0-pthread (scripts/install-deps.sh --bench does).", file=sys.stderr)
    return blas


def thread_env(threads, base=None):
    """Environment for a peer subprocess pinned to `threads` threads."""
    env = dict(os.environ if base is None else base)
    for k in THREAD_ENV:
        env[k] = str(threads)
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def save_results(path, meta, rows):
    """Writes a benchmark's raw results ({"meta", "rows"}) as JSON; returns the path
    relative to the repository, for the log."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1, default=str)
    return os.path.relpath(os.path.abspath(path), REPO_ROOT)
