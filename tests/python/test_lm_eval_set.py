"""bitflip.save_lm_eval_set (token ids -> input_ids and shifted labels, checked
by hand), its refusals of malformed input, and bitflip.plot.perplexity_vs_ber
on a result document written here."""
import numpy as np
import pytest

import bitflip
from bitflip.errors import BitflipError
from bitflip.result import Result


def test_rows_and_shifted_labels(tmp_path):
    toks = list(range(100, 111))                 # 11 tokens, seq_len 3: rows start at 0, 3, 6 (9 would need 13)
    p = bitflip.save_lm_eval_set(tmp_path / "lm.safetensors", toks, 3)
    t = bitflip.read_safetensors(p)
    assert sorted(t) == ["input_ids", "labels"]
    assert t["input_ids"].dtype == np.int64 and t["labels"].dtype == np.int64
    assert t["input_ids"].tolist() == [[100, 101, 102], [103, 104, 105], [106, 107, 108]]
    assert t["labels"].tolist() == [[101, 102, 103], [104, 105, 106], [107, 108, 109]]


def test_torch_like_and_numpy_inputs(tmp_path):
    a = np.arange(9, dtype=np.int32)
    t = bitflip.read_safetensors(bitflip.save_lm_eval_set(tmp_path / "a.safetensors", a, 4, vocab_size=9,
                                                          max_samples=1))
    assert t["input_ids"].tolist() == [[0, 1, 2, 3]] and t["labels"].tolist() == [[1, 2, 3, 4]]


@pytest.mark.parametrize("tokens, seq_len, kw, words", [
    ([[1, 2], [3, 4]], 1, {}, "1-D sequence"),
    ([1.0, 2.0, 3.0], 1, {}, "astype(int)"),
    ([0.5, 2.0, 3.0], 1, {}, "token ids are integers"),
    ([True, False, True], 1, {}, "token ids are integers"),
    ("hello world", 2, {}, "tokenize it first"),
    ([1, -3, 2], 1, {}, "token_ids[1] is -3"),
    ([1, 2, 70], 1, {"vocab_size": 64}, "token_ids[2] is 70, not below vocab_size 64"),
    ([1, 2, 3], 3, {}, "3 tokens do not fill one row"),
    ([], 1, {}, "0 tokens do not fill one row"),
    ([1, 2, 3], 0, {}, "seq_len is 0"),
    ([1, 2, 3], 1.5, {}, "seq_len is 1.5"),
    ([1, 2, 3], True, {}, "seq_len is True"),
])
def test_refusals_name_the_culprit(tmp_path, tokens, seq_len, kw, words):
    with pytest.raises(BitflipError, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        bitflip.save_lm_eval_set(tmp_path / "x.safetensors", tokens, seq_len, **kw)
    assert not (tmp_path / "x.safetensors").exists()


def sweep_doc(ppl):
    rates = [1e-7, 1e-6, 1e-5]
    return {"campaign": {"fault_model": "ber", "rates": rates}, "golden": {"perplexity": ppl[0], "token_accuracy": 0.9},
            "by_rate": [{"rate": r, "metrics": {"perplexity": {"mean": m, "ci": [m * 0.9, m * 1.1]}}}
                        for r, m in zip(rates, ppl[1:])],
            "summary": {}}


def test_perplexity_plot(tmp_path):
    pytest.importorskip("matplotlib.pyplot")
    res = Result(sweep_doc([1.3, 1.31, 2.0, 450.0]))
    assert res.task_metric == "perplexity"
    ax = bitflip.plot.perplexity_vs_ber(res)
    line = ax.get_lines()[0]
    assert list(line.get_xdata()) == [1e-7, 1e-6, 1e-5]
    assert list(line.get_ydata()) == [1.31, 2.0, 450.0]
    assert ax.get_yscale() == "log" and ax.get_xscale() == "log"
    assert ax.get_lines()[1].get_ydata()[0] == 1.3          # the golden line
    assert bitflip.plot.perplexity_vs_ber(res, log=False).get_yscale() == "linear"
    fig = bitflip.plot.summary(res, tmp_path / "s.png")
    assert fig.axes[0].get_title() == "perplexity under bit errors"
    acc = Result({"campaign": {"fault_model": "ber", "rates": [1e-6]}, "golden": {"accuracy": 0.9},
                  "by_rate": [], "summary": {}})
    with pytest.raises(BitflipError, match="needs a language model's result"):
        bitflip.plot.perplexity_vs_ber(acc)


def test_save_eval_set_lm_labels(tmp_path):
    """save_eval_set given labels [N, T] with int input_ids [N, T]: a language
    model's eval set, the labels as given (int64, -100 kept)."""
    ids = np.array([[3, 1, 4], [1, 5, 9]], dtype=np.int32)
    lab = np.array([[1, 4, -100], [5, 9, 2]])
    t = bitflip.read_safetensors(bitflip.save_eval_set(tmp_path / "lm.safetensors", {"input_ids": ids}, lab))
    assert sorted(t) == ["input_ids", "labels"]
    assert t["labels"].dtype == np.int64 and t["labels"].tolist() == lab.tolist()
    assert t["input_ids"].tolist() == ids.tolist()
    # the same from a torch-like tuple input named by input_names, with max_samples
    t = bitflip.read_safetensors(bitflip.save_eval_set(tmp_path / "b.safetensors", ids, lab, input_names=["tokens"],
                                                       max_samples=1))
    assert t["labels"].tolist() == [[1, 4, -100]] and t["tokens"].tolist() == [[3, 1, 4]]
    # one label per sample stays a classifier's; [N, 1] too
    t = bitflip.read_safetensors(bitflip.save_eval_set(tmp_path / "c.safetensors", ids.astype(np.float32),
                                                       np.array([[1], [0]])))
    assert t["labels"].tolist() == [1, 0]


@pytest.mark.parametrize("inputs, labels, words", [
    (np.zeros((2, 3), np.float32), np.zeros((2, 3), np.int64), r"no integer input has that shape.*save_lm_eval_set"),
    ({"input_ids": np.zeros((2, 4), np.int64)}, np.zeros((2, 3), np.int64), r"labels have shape \[2, 3\].*save_lm_eval_set"),
    ({"input_ids": np.zeros((2, 3), np.int64)}, np.zeros((2, 3), np.float32), r"\(float32\).*save_lm_eval_set"),
    ({"input_ids": np.zeros((2, 3), np.int64)}, np.array([[0, -7, 1], [0, 0, 0]]), r"labels\[0, 1\] is -7"),
])
def test_save_eval_set_lm_refusals(tmp_path, inputs, labels, words):
    with pytest.raises(BitflipError, match=words):
        bitflip.save_eval_set(tmp_path / "x.safetensors", inputs, labels)
    assert not (tmp_path / "x.safetensors").exists()
