"""bitflip.export's record of the kernels PyTorch ran (metadata_props
bitflip.kernels, clients/python/bitflip/kernel_record.py): an nn.LayerNorm
and a LayerNorm written out by hand export to the same nodes at opset 13;
with the record bitflip fuses the first (PyTorch's one kernel) and runs the
second node by node (as PyTorch did), and under an exponent-bit fault in a
bias, where the two differ, each matches its PyTorch module."""
import json
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed (scripts/install-deps.sh installs it)")
onnx = pytest.importorskip("onnx", reason="python3-onnx is not installed")
from onnx import numpy_helper  # noqa: E402

import bitflip  # noqa: E402
from bitflip.safetensors import write_safetensors  # noqa: E402

nn = torch.nn


class HandLN(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w, self.b = nn.Parameter(torch.rand(d) + 0.5), nn.Parameter(torch.rand(d) - 0.5)

    def forward(self, x):
        m = x.mean(-1, keepdim=True)
        d = x - m
        return d / torch.sqrt(d.pow(2).mean(-1, keepdim=True) + 1e-5) * self.w + self.b


class Net(nn.Module):
    """Linear, LayerNorm, Linear, GELU, LayerNorm, Linear: a transformer MLP's shape."""

    def __init__(self, hand):
        super().__init__()
        ln = (lambda: HandLN(16)) if hand else (lambda: nn.LayerNorm(16))
        self.fc1, self.ln1, self.fc2, self.act, self.ln2, self.head = (
            nn.Linear(8, 16), ln(), nn.Linear(16, 16), nn.GELU(), ln(), nn.Linear(16, 3))
        if not hand:
            with torch.no_grad():
                for l in (self.ln1, self.ln2):
                    l.weight.copy_(torch.rand(16) + 0.5)
                    l.bias.copy_(torch.rand(16) - 0.5)

    def forward(self, x):
        return self.head(self.ln2(self.act(self.fc2(self.ln1(self.fc1(x))))))


def bitflip_json(*args):
    r = subprocess.run([os.environ["BITFLIP_BIN"], *args], capture_output=True, text=True, check=True)
    return r.stdout


def flip(v, bit):
    u = np.array([v], np.float32).view(np.uint32)
    u ^= np.uint32(1 << bit)
    return u.view(np.float32)[0]


def faulted_outputs(tmp_path, net, path, bias_name, torch_bias, idx, x):
    """bitflip's and PyTorch's outputs with bit 30 of bias element idx flipped."""
    m = onnx.load(path)
    init = next(i for i in m.graph.initializer if i.name == bias_name)
    arr = numpy_helper.to_array(init).copy()
    arr.reshape(-1)[idx] = flip(arr.reshape(-1)[idx], 30)
    init.CopyFrom(numpy_helper.from_array(arr, bias_name))
    fpath = str(tmp_path / "faulty.onnx")
    onnx.save(m, fpath)
    data, outp = str(tmp_path / "x.safetensors"), str(tmp_path / "out.json")
    write_safetensors(data, {"input": x.numpy()})
    subprocess.run([os.environ["BITFLIP_BIN"], "eval", fpath, data, "--outputs", outp, "--batch", str(len(x))],
                   check=True, capture_output=True)
    with open(outp) as f:
        got = np.array([[np.nan if v in ("NaN", None) else float(v) for v in r] for r in json.load(f)])
    with torch.no_grad():
        p = torch_bias.view(-1)
        saved = p[idx].clone()
        p[idx] = float(flip(saved.numpy(), 30))
        want = net(x).numpy().astype(np.float64)
        p[idx] = saved
    return got, want, m


@pytest.mark.parametrize("hand", [True, False])
def test_record_decides_fusion(tmp_path, hand):
    torch.manual_seed(5)
    net = Net(hand).eval()
    x = torch.randn(6, 8)
    rep = bitflip.export(net, x[:1], tmp_path / "net.onnx", opset=13, verbose=False)
    m = onnx.load(rep.path)
    rec = {p.key: p.value for p in m.metadata_props}["bitflip.kernels"]
    lines = rec.splitlines()
    assert lines[0] == "bitflip.kernels 1"
    kernels = sorted(l.split("\t")[0] for l in lines[1:])
    assert kernels == (["gelu"] if hand else ["gelu", "layer_norm", "layer_norm"])
    info = json.loads(bitflip_json("info", "--json", rep.path))
    fused = {f["pattern"]: f["count"] for f in info["fused"]}
    assert info["fusion"]["rule"] == "record"
    assert fused.get("LayerNorm", 0) == (0 if hand else 2) and fused.get("GELU") == 1
    assert info["fusion"]["unrecorded"] == (2 if hand else 0)
    text = bitflip_json("info", rep.path)
    assert "fusion: by the exporter's record" in text
    # without the record (the same file, metadata dropped): today's rule fuses both
    del m.metadata_props[:]
    onnx.save(m, str(tmp_path / "plain.onnx"))
    plain = json.loads(bitflip_json("info", "--json", str(tmp_path / "plain.onnx")))
    assert plain["fusion"]["rule"] == "pattern"
    assert {f["pattern"]: f["count"] for f in plain["fused"]}.get("LayerNorm") == 2
    # an exponent-bit fault in ln1's bias: a value near 1e38 reaches ln2, where
    # PyTorch's kernel gives NaN and the nodes a finite row
    bias = net.ln1.b if hand else net.ln1.bias
    name = "ln1.b" if hand else "ln1.bias"
    assert name in [i.name for i in onnx.load(rep.path).graph.initializer]
    got, want, _ = faulted_outputs(tmp_path, net, rep.path, name, bias, 3, x)
    assert np.array_equal(np.isnan(got), np.isnan(want)), (got, want)
    assert np.isnan(want).any() != hand     # the two PyTorch models do differ here
    fin = ~np.isnan(want)
    assert np.allclose(got[fin], want[fin], rtol=1e-4, atol=1e-5)


def test_no_record(tmp_path):
    torch.manual_seed(6)
    net = Net(True).eval()
    rep = bitflip.export(net, torch.randn(1, 8), tmp_path / "n.onnx", opset=13, verbose=False, record_kernels=False)
    assert "bitflip.kernels" not in {p.key for p in onnx.load(rep.path).metadata_props}
    info = json.loads(bitflip_json("info", "--json", rep.path))
    assert info["fusion"]["rule"] == "pattern"


class Twice(nn.Module):
    """Each module called twice: the exporter names the second call's nodes
    /act_1/..., /ln_1/..., /hand_1/..., the trace /act, /ln, /hand."""

    def __init__(self):
        super().__init__()
        self.act, self.ln, self.hand, self.fc = nn.GELU(), nn.LayerNorm(8), HandLN(8), nn.Linear(8, 8)

    def forward(self, x):
        x = self.hand(self.ln(self.act(x)))
        return self.hand(self.ln(self.act(self.fc(x))))


def test_modules_called_twice(tmp_path):
    torch.manual_seed(7)
    rep = bitflip.export(Twice().eval(), torch.randn(2, 8), tmp_path / "t.onnx", opset=13, verbose=False)
    names = [n.name for n in onnx.load(rep.path).graph.node]
    assert any(n.startswith("/act_1/") for n in names) and any(n.startswith("/hand_1/") for n in names)
    info = json.loads(bitflip_json("info", "--json", rep.path))
    fused = {f["pattern"]: f["count"] for f in info["fused"]}
    assert fused.get("GELU") == 2 and fused.get("LayerNorm") == 2     # the two hand-written ones stay nodes
    assert info["fusion"] == {"rule": "record", "kernel_calls": 4, "unrecorded": 2}
