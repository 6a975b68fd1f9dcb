"""``bitflip.run``: a campaign on this machine through the ``bitflip`` binary, or
on a daemon when one is given; the same :class:`Result` either way."""
import json
import os
import subprocess
import sys
import tempfile

from .binary import find_binary
from .errors import BitflipError, RunError
from .result import Result, Trials


def _absolute_spec(spec):
    """The spec as a dict whose file paths do not depend on the working directory."""
    if isinstance(spec, dict):
        spec, base = dict(spec), os.getcwd()
    else:
        path = os.fspath(spec)
        try:
            with open(path) as f:
                spec = json.load(f)
        except OSError as e:
            raise BitflipError(f"cannot read the spec {path!r}: {e.strerror}") from None
        except ValueError as e:
            raise BitflipError(f"the spec {path!r} is not JSON: {e}") from None
        base = os.path.dirname(os.path.abspath(path))
    for key in ("model", "dataset"):
        v = spec.get(key)
        if hasattr(v, "__fspath__"):
            v = os.fspath(v)
        if isinstance(v, str) and not os.path.isabs(v):
            # as the CLI does: the working directory first, then the spec's directory
            v = os.path.abspath(v) if os.path.exists(v) else os.path.join(base, v)
        if v is not None:
            spec[key] = v
    return spec


_PROGRESS_FLAG = {}


def _has_progress_flag(exe):
    """Whether this bitflip takes --progress (newer CLIs): asked once per binary."""
    if exe not in _PROGRESS_FLAG:
        p = subprocess.run([exe, "run", "--help"], capture_output=True, text=True)
        _PROGRESS_FLAG[exe] = "--progress" in p.stdout + p.stderr
    return _PROGRESS_FLAG[exe]


def run(spec, *, server=None, token=None, client=None, bin=None, threads=None, gates=(), progress=False,
        keep_trials=True, out_dir=None):
    """Runs a campaign and returns its :class:`Result`.

    ``spec`` is a dict or a JSON file (docs/CAMPAIGNS.md). With ``server`` (a URL)
    or ``client`` (a :class:`Client`) it runs on that bitflipd (model and dataset
    uploaded by hash); otherwise here, with ``bitflip run --local`` (the binary
    from ``bin``, $BITFLIP_BIN, the PATH, or the checkout's build/bitflip) on
    ``threads`` threads (default: every core).

    ``gates`` (``["critical_rate<=0.05"]``) set ``result.verdict`` to ``pass`` or
    ``fail`` on local runs (on a daemon, put them in the spec's ``gates``).
    ``keep_trials`` keeps the per-trial records (``result.trials``).
    ``out_dir`` keeps the result files (result.json, trials.jsonl, gates.xml);
    by default they live in a temporary directory as long as the Result does.
    ``progress=True`` lets the binary's progress report through to stderr.
    """
    if client is not None or server is not None:
        from .client import Client
        c = client if client is not None else Client(server, token)
        return c.run(spec, progress=progress)
    exe = find_binary(bin)
    spec = _absolute_spec(spec)
    tmp = None
    if out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="bitflip-run-")
        out_dir = tmp.name
    os.makedirs(out_dir, exist_ok=True)
    spec_path = os.path.join(out_dir, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f, indent=1)
    out = os.path.join(out_dir, "result.json")
    trials = os.path.join(out_dir, "trials.jsonl")
    cmd = [exe, "run", "--local", spec_path, "--out", out, "--format", "json"]
    if keep_trials:
        cmd += ["--trials-out", trials]
    if threads:
        cmd += ["--threads", str(int(threads))]
    if _has_progress_flag(exe):
        # stderr is a pipe here: without this a CLI that reports progress on pipes would
        # fill it with lines nobody reads
        cmd += ["--progress", "auto" if progress else "none"]
    junit = None
    if gates:
        if isinstance(gates, str):
            gates = [gates]
        junit = os.path.join(out_dir, "gates.xml")
        for g in gates:
            cmd += ["--gate", g]
        cmd += ["--junit", junit]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=None if progress else subprocess.PIPE,
                       stdin=subprocess.DEVNULL)
    err = (p.stderr or b"").decode("utf-8", "replace").strip()
    # exit 1 is a gate that does not hold: the result is there, with verdict fail
    if p.returncode not in (0, 1) or (p.returncode == 1 and not gates) or not os.path.isfile(out):
        raise RunError(f"bitflip run --local failed (exit {p.returncode}): {err or 'see the messages above'}\n"
                       f"  command: {' '.join(cmd)}", p.returncode, err)
    if err and not progress:
        # warnings the run printed (the table goes to stdout, which is discarded)
        print(err, file=sys.stderr)
    with open(out) as f:
        doc = json.load(f)
    verdict = ("pass" if p.returncode == 0 else "fail") if gates else None
    res = Result(doc, trials=Trials(trials) if keep_trials else None, verdict=verdict)
    res.files = {"dir": out_dir, "spec": spec_path, "result": out, "trials": trials if keep_trials else None,
                 "junit": junit}
    res._tmp = tmp          # the temporary directory lives as long as the result
    return res
