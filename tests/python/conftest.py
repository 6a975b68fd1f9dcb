"""Shared fixtures of the Python suite: the package from this checkout, the
binaries ctest passes ($BITFLIP_BIN, $BITFLIPD_BIN; else build/), and a real
bitflipd on a loopback port with two tenants' tokens."""
import os
import secrets
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if not os.environ.get("BITFLIP_PY_INSTALLED"):
    sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
FIX = os.path.join(ROOT, "tests", "fixtures")
DIGITS = os.path.join(FIX, "conformance", "demo_digits.onnx")
DIGITS_EVAL = os.path.join(FIX, "conformance", "demo_digits.eval.safetensors")
DLRM = os.path.join(FIX, "conformance", "dlrm_ops_op13.onnx")
DLRM_EVAL = os.path.join(FIX, "conformance", "dlrm_ops_op13.eval.safetensors")

os.environ.setdefault("BITFLIP_BIN", os.path.join(ROOT, "build", "bitflip"))
os.environ.setdefault("BITFLIPD_BIN", os.path.join(ROOT, "build", "bitflipd"))
os.environ.setdefault("MPLBACKEND", "Agg")
# the suite picks its servers explicitly
os.environ.pop("BITFLIP_SERVER", None)
os.environ.pop("BITFLIP_TOKEN", None)


class Daemon:
    def __init__(self, proc, url, tokens, log):
        self.proc, self.url, self.tokens, self.log = proc, url, tokens, log

    def metrics(self):
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            return r.read().decode()

    def requests(self, route, code):
        """bitflip_http_requests_total for one route template and status code."""
        want = f'bitflip_http_requests_total{{route="{route}",code="{code}"}} '
        for line in self.metrics().splitlines():
            if line.startswith(want):
                return int(float(line[len(want):]))
        return 0


@pytest.fixture(scope="session")
def daemon(tmp_path_factory):
    d = tmp_path_factory.mktemp("bitflipd")
    tokens = {"alice": "bft_" + secrets.token_hex(32), "bob": "bft_" + secrets.token_hex(32)}
    (d / "tokens").write_text("".join(f"{t}:{k}\n" for t, k in tokens.items()))
    port_file = d / "port"
    log = open(d / "daemon.log", "wb")
    proc = subprocess.Popen([os.environ["BITFLIPD_BIN"], "--listen", "127.0.0.1:0", "--port-file", str(port_file),
                             "--data-dir", str(d / "data"), "--workers", "2", "--tokens-file", str(d / "tokens")],
                            stdout=log, stderr=subprocess.STDOUT)
    url = None
    try:
        for _ in range(400):
            if proc.poll() is not None:
                pytest.fail(f"bitflipd exited at start: {(d / 'daemon.log').read_text()[-2000:]}")
            if port_file.exists() and port_file.read_text().strip():
                url = f"http://127.0.0.1:{port_file.read_text().strip()}"
                try:
                    urllib.request.urlopen(url + "/v2/health/ready", timeout=2).close()
                    break
                except OSError:
                    pass
            time.sleep(0.05)
        else:
            pytest.fail("bitflipd never became ready")
        yield Daemon(proc, url, tokens, d / "daemon.log")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture
def alice(daemon):
    import bitflip
    return bitflip.Client(daemon.url, daemon.tokens["alice"])


@pytest.fixture
def bob(daemon):
    import bitflip
    return bitflip.Client(daemon.url, daemon.tokens["bob"])


def digits_spec(**kw):
    spec = {"model": DIGITS, "dataset": DIGITS_EVAL, "seed": 3, "trials": 400, "faults": {"model": "bitflip"}}
    spec.update(kw)
    return spec


def ber_spec(**kw):
    spec = {"model": DLRM, "dataset": DLRM_EVAL, "seed": 5,
            "faults": {"model": "ber", "rates": [1e-5, 1e-4, 1e-3], "repeats": 8}}
    spec.update(kw)
    return spec
