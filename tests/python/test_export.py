"""bitflip.export on three kinds of torch model (an MLP, a CNN with BatchNorm, a
transformer block), checked against PyTorch and against bitflip's own reading;
and a model the exporter cannot capture, which must raise the mismatch."""
import json
import os
import subprocess

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed (scripts/install-deps.sh installs it)")
import bitflip  # noqa: E402
from bitflip.errors import ExportError, ExportMismatch  # noqa: E402

nn = torch.nn


def info(path, *extra):
    r = subprocess.run([os.environ["BITFLIP_BIN"], "info", "--json", *extra, str(path)], capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout)


def golden(model_path, data_path):
    r = subprocess.run([os.environ["BITFLIP_BIN"], "eval", str(model_path), str(data_path), "--json"],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean((2, 3)))


def test_mlp(tmp_path, capsys):
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    x, y = torch.randn(100, 16), torch.randint(0, 4, (100,))
    rep = bitflip.export(mlp, x[:1], tmp_path / "mlp.onnx", eval_inputs=x, labels=y, output_names=["logits"])
    assert "4 keep their PyTorch names" in capsys.readouterr().out
    assert rep.eval_path == str(tmp_path / "mlp.eval.safetensors")
    assert [p["name"] for p in rep.kept] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert rep.checked == 8 and rep.max_abs_diff < 1e-5
    i = info(rep.path)
    assert i["inputs"][0]["name"] == "input" and i["inputs"][0]["shape"][0] == "batch"
    assert i["outputs"][0]["name"] == "logits" and i["outputs"][0]["shape"][0] == "batch"
    # bitflip's golden accuracy on the eval set is PyTorch's
    acc = (mlp(x).argmax(1) == y).sum().item() / 100
    g = golden(rep.path, rep.eval_path)
    assert g["samples"] == 100 and g["accuracy"] == pytest.approx(acc, abs=1e-12)


def test_cnn_keeps_batchnorm_unless_asked(tmp_path):
    torch.manual_seed(1)
    m = CNN()
    m.train()
    m(torch.randn(64, 3, 8, 8) * 2 + 1)        # running statistics that are not 0 and 1
    m.eval()
    x = torch.randn(40, 3, 8, 8)
    rep = bitflip.export(m, x[:2], tmp_path / "cnn.onnx", eval_inputs=x, labels="model", verbose=False)
    i = info(rep.path)
    assert "BatchNormalization" in i["ops"]
    names = {p["name"] for p in i["params"]}
    assert {"conv.weight", "bn.weight", "bn.running_mean", "bn.running_var"} <= names
    assert not rep.renamed and not rep.anonymous
    # labels="model" are the model's own predictions: accuracy 1
    assert golden(rep.path, rep.eval_path)["accuracy"] == 1.0
    y = bitflip.read_safetensors(rep.eval_path)["labels"]
    assert y.tolist() == m(x).argmax(1).tolist()
    folded = bitflip.export(m, x[:2], tmp_path / "cnn_fold.onnx", keep_batchnorm=False, verbose=False)
    assert "BatchNormalization" not in info(folded.path)["ops"]
    assert {p["torch_name"]: p["torch_note"] for p in folded.renamed} == {
        "conv.weight": "a BatchNorm folded in", "conv.bias": "a BatchNorm folded in"}


@pytest.mark.parametrize("opset", [13, 17])
def test_transformer_block(tmp_path, opset):
    torch.manual_seed(2)
    enc = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)
    x = torch.randn(12, 5, 16)
    rep = bitflip.export(enc, x[:1], tmp_path / "enc.onnx", eval_inputs=x, opset=opset, verbose=False)
    assert rep.checked == 8
    notes = {p["torch_name"]: p["torch_note"] for p in rep.renamed}
    assert notes["self_attn.in_proj_weight"] == "transposed" and notes["linear1.weight"] == "transposed"
    # as exported, before bitflip fuses the opset-13 pattern into one LayerNorm
    assert ("LayerNormalization" in info(rep.path, "--no-fuse")["ops"]) == (opset == 17)


def test_dataloader_eval_set(tmp_path):
    torch.manual_seed(3)
    mlp = nn.Sequential(nn.Linear(6, 2))
    x, y = torch.randn(30, 6), torch.randint(0, 2, (30,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=7)
    rep = bitflip.export(mlp, x[:1], tmp_path / "m.onnx", eval_inputs=loader, verbose=False)
    st = bitflip.read_safetensors(rep.eval_path)
    assert st["input"].shape == (30, 6) and st["labels"].tolist() == y.tolist()
    p = bitflip.save_eval_set(tmp_path / "e.safetensors", loader, input_names=["input"])
    assert bitflip.read_safetensors(p)["labels"].tolist() == y.tolist()


class Branchy(nn.Module):
    """Python control flow on the data: the exporter records the branch the example took."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        if x.sum() > 0:
            return self.fc(x)
        return -self.fc(x)


def test_a_model_the_export_does_not_capture(tmp_path):
    torch.manual_seed(4)
    m = Branchy()
    x = torch.randn(10, 4)
    x[0] = x[0].abs() + 0.1               # the example takes the positive branch
    neg = [i for i in range(10) if x[i].sum() <= 0]
    assert neg                            # and some check samples the other one
    with pytest.warns(torch.jit.TracerWarning):
        with pytest.raises(ExportMismatch) as e:
            bitflip.export(m, x[:1], tmp_path / "b.onnx", eval_inputs=x, output_names=["scores"], verbose=False)
    err = e.value
    assert err.output == "scores"
    assert "output 'scores'" in str(err) and f"sample {err.sample}" in str(err)
    assert err.bitflip == pytest.approx(-err.torch, rel=1e-5)


def test_bad_arguments(tmp_path):
    m = nn.Linear(2, 2)
    with pytest.raises(ExportError, match="opset 11"):
        bitflip.export(m, torch.randn(1, 2), tmp_path / "m.onnx", opset=11)
    with pytest.raises(ExportError, match="not a torch.nn.Module"):
        bitflip.export(lambda x: x, torch.randn(1, 2), tmp_path / "m.onnx")
    with pytest.raises(ExportError, match="without eval_inputs"):
        bitflip.export(m, torch.randn(1, 2), tmp_path / "m.onnx", labels=[0])
