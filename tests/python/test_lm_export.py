"""bitflip.export of decoder-only language models (tests/fixtures/lm_models.py):
dynamic batch and sequence axes, the names, tied embeddings kept as one
initializer, the KV-cache form, the LM eval set, checked against PyTorch by the
export itself; and the refusals and the mismatch of a model that bakes its
sequence length in."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed (scripts/install-deps.sh installs it)")
import bitflip  # noqa: E402
from bitflip.errors import ExportError  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
from lm_models import GPT2LM, LlamaLM  # noqa: E402


def lm_export(*args, **kw):
    """bitflip.export(task="language_model"), skipped (saying why) on an engine that
    still refuses a symbolic sequence axis: its check runs the file in bitflip."""
    try:
        return bitflip.export(*args, task="language_model", verbose=False, **kw)
    except ExportError as e:
        if "only the batch dimension (dim 0) may be symbolic" in str(e):
            pytest.skip("this bitflip refuses symbolic sequence axes (bf_plan_opts.input_dims lands it): " + str(e))
        raise


def info(path):
    r = subprocess.run([os.environ["BITFLIP_BIN"], "info", "--json", str(path)], capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout)


def test_llama_with_model_labels(tmp_path):
    torch.manual_seed(0)
    m = LlamaLM(vocab=40, d=16, n_layer=1, n_head=4, n_kv_head=2, hidden=24, max_pos=16, rope="interleaved",
                gqa="expand", mask="tril")
    ids = torch.randint(0, 40, (6, 7))
    rep = lm_export(m, ids[:2], tmp_path / "llama.onnx", eval_inputs=ids, labels="model", opset=16)
    assert rep.checked == 6 and rep.max_abs_diff < 1e-4
    i = info(rep.path)
    assert i["inputs"][0]["name"] == "input_ids" and i["inputs"][0]["shape"][:2] == ["batch", "sequence"]
    assert i["outputs"][0]["name"] == "logits" and i["outputs"][0]["shape"][:2] == ["batch", "sequence"]
    t = bitflip.read_safetensors(rep.eval_path)
    assert t["input_ids"].tolist() == ids.tolist()
    assert t["labels"].tolist() == m(ids).argmax(-1).tolist()      # the model's own next-token guesses
    # bitflip's golden perplexity and token accuracy are PyTorch's
    logits = m(ids).detach()
    ppl = torch.exp(torch.nn.functional.cross_entropy(logits.reshape(-1, 40).double(), m(ids).argmax(-1).reshape(-1)))
    r = subprocess.run([os.environ["BITFLIP_BIN"], "eval", rep.path, rep.eval_path, "--json"], capture_output=True,
                       text=True, check=True)
    g = json.loads(r.stdout)
    assert g["token_accuracy"] == 1.0 and g["perplexity"] == pytest.approx(ppl.item(), rel=1e-5)


def test_gpt2_tied_embedding_stays_one_tensor(tmp_path):
    torch.manual_seed(1)
    m = GPT2LM(vocab=32, d=16, n_layer=1, n_head=2, max_pos=16)
    ids = torch.randint(0, 32, (4, 6))
    labels = torch.cat([ids[:, 1:], torch.full((4, 1), -100)], 1)
    rep = lm_export(m, ids[:1], tmp_path / "gpt2.onnx", eval_inputs=ids, labels=labels, opset=14)
    names = [p["name"] for p in info(rep.path)["params"]]
    assert "wte.weight" in names
    # one [32, 16] table: the logits read the embedding itself, not a folded copy of it
    shapes = [p["shape"] for p in info(rep.path)["params"]]
    assert sum(1 for s in shapes if sorted(s) == [16, 32]) == 1
    assert bitflip.read_safetensors(rep.eval_path)["labels"][:, -1].tolist() == [-100] * 4


def test_kv_cache_form(tmp_path):
    torch.manual_seed(2)
    m = GPT2LM(vocab=32, d=16, n_layer=2, n_head=2, max_pos=32, kv_cache=True)
    ids = torch.randint(0, 32, (3, 5))
    past = tuple(torch.randn(3, 2, 4, 8) for _ in range(4))
    rep = lm_export(m, (ids, *past), tmp_path / "kv.onnx", eval_inputs=(ids, *past), opset=17, kv_cache=True)
    assert rep.input_names == ["input_ids", "past_key_values.0.key", "past_key_values.0.value",
                               "past_key_values.1.key", "past_key_values.1.value"]
    assert rep.output_names == ["logits", "present.0.key", "present.0.value", "present.1.key", "present.1.value"]
    i = info(rep.path)
    assert i["inputs"][1]["shape"][0] == "batch" and i["inputs"][1]["shape"][2] == "past_sequence"
    assert rep.checked == 3


@pytest.mark.parametrize("example, kw, words", [
    (lambda: torch.randn(2, 5), {}, "first example input is the token ids, int64"),
    (lambda: torch.zeros(2, 5, dtype=torch.long), {"kv_cache": True}, "needs the past keys and values"),
    (lambda: (torch.zeros(2, 5, dtype=torch.long), torch.zeros(2, 5)), {}, "kv_cache=True"),
    (lambda: (torch.zeros(2, 5, dtype=torch.long), torch.zeros(2, 2, 1, 8), torch.zeros(2, 2, 1, 8)),
     {"kv_cache": True}, "at least 2 past positions"),
])
def test_refusals(tmp_path, example, kw, words):
    m = LlamaLM(vocab=16, d=16, n_layer=1, n_head=2, n_kv_head=2, hidden=16, max_pos=16)
    with pytest.raises(ExportError, match=words):
        bitflip.export(m, example(), tmp_path / "x.onnx", task="language_model", verbose=False, **kw)


def test_bad_labels(tmp_path):
    m = LlamaLM(vocab=16, d=16, n_layer=1, n_head=2, n_kv_head=2, hidden=16, max_pos=16)
    ids = torch.randint(0, 16, (3, 4))
    with pytest.raises(bitflip.BitflipError, match=r"labels have shape \[3\], input_ids \[3, 4\]"):
        bitflip.export(m, ids, tmp_path / "x.onnx", eval_inputs=ids, labels=torch.zeros(3, dtype=torch.long),
                       task="language_model", verbose=False, check=False)
    with pytest.raises(bitflip.BitflipError, match=r"labels\[0, 1\] is -5"):
        bitflip.export(m, ids, tmp_path / "x.onnx", eval_inputs=ids, labels=torch.tensor([[0, -5, 0, 0]] * 3),
                       task="language_model", verbose=False, check=False)


class BakedLength(torch.nn.Module):
    """A causal mask made with numpy from the traced length: a constant in the export."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(16, 8)
        self.out = torch.nn.Linear(8, 16)

    def forward(self, ids):
        t = int(ids.shape[1])
        mask = torch.from_numpy(np.tril(np.ones((t, t), np.float32)) / np.arange(1, t + 1, dtype=np.float32)[:, None])
        return self.out(torch.matmul(mask, self.emb(ids)))


def test_a_baked_sequence_length_is_caught(tmp_path):
    torch.manual_seed(3)
    ids = torch.randint(0, 16, (2, 6))
    with pytest.raises(ExportError) as e:
        bitflip.export(BakedLength(), ids, tmp_path / "baked.onnx", task="language_model", verbose=False)
    if "only the batch dimension (dim 0) may be symbolic" in str(e.value):
        pytest.skip("this bitflip refuses symbolic sequence axes: the check cannot run")
    # the example's length passes; one token shorter, the baked [6, 6] mask cannot apply
    assert "sample" in str(e.value) or "cannot run" in str(e.value)
