"""save_eval_set and write_safetensors: the bytes, parsed here by hand, and
bitflip reading them."""
import json
import os
import struct
import subprocess

import numpy as np
import pytest

import bitflip
from conftest import DIGITS, DIGITS_EVAL


def parse(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    return n, header, raw[8 + n:]


def test_layout_by_hand(tmp_path):
    x = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    ids = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], dtype=np.int64)
    p = bitflip.save_eval_set(tmp_path / "e.safetensors", {"image": x, "ids": ids}, labels=[0, 1, 1, 0])
    n, header, data = parse(p)
    assert n % 8 == 0
    assert header["image"] == {"dtype": "F32", "shape": [4, 2, 3], "data_offsets": [0, 96]}
    assert header["ids"] == {"dtype": "I64", "shape": [4, 2], "data_offsets": [96, 160]}
    assert header["labels"] == {"dtype": "I64", "shape": [4], "data_offsets": [160, 192]}
    assert len(data) == 192
    assert struct.unpack("<24f", data[:96]) == tuple(range(24))
    assert struct.unpack("<4q", data[160:]) == (0, 1, 1, 0)


def test_sorted_header_keeps_the_data_order(tmp_path):
    p = bitflip.write_safetensors(tmp_path / "s.safetensors", {"x": np.array([1.5], "f4"),
                                                               "b": np.array([7], "i8")}, sort_keys=True)
    n, header, data = parse(p)
    raw = open(p, "rb").read()[8:8 + n]
    assert raw == (b'{"b":{"data_offsets":[4,12],"dtype":"I64","shape":[1]},'
                   b'"x":{"data_offsets":[0,4],"dtype":"F32","shape":[1]}}').ljust(n, b" ")
    assert struct.unpack("<f", data[:4]) == (1.5,) and struct.unpack("<q", data[4:]) == (7,)


def test_dtypes_bitflip_reads(tmp_path):
    p = bitflip.save_eval_set(tmp_path / "e.safetensors", np.ones((3, 2), dtype=np.float64),
                              labels=np.array([True, False, True]))
    _, header, data = parse(p)
    assert header["input"]["dtype"] == "F32"          # float64 is stored as float32
    assert header["labels"]["dtype"] == "F32"         # 0/1 targets: a binary task
    assert struct.unpack("<3f", data[24:]) == (1.0, 0.0, 1.0)
    back = bitflip.read_safetensors(p)
    assert back["input"].dtype == np.float32 and back["labels"].tolist() == [1.0, 0.0, 1.0]


def test_bitflip_reads_what_it_writes(tmp_path):
    src = bitflip.read_safetensors(DIGITS_EVAL)
    _, header, _ = parse(DIGITS_EVAL)
    assert {k: v["shape"] for k, v in header.items()} == {k: list(v.shape) for k, v in src.items()}
    # written again from batches (an iterable of (x, y), as a DataLoader yields)
    batches = [(src["input"][i:i + 50], src["labels"][i:i + 50]) for i in range(0, 360, 50)]
    p = bitflip.save_eval_set(tmp_path / "d.safetensors", iter(batches))
    out = {}
    for f in (DIGITS_EVAL, p):
        r = subprocess.run([os.environ["BITFLIP_BIN"], "eval", DIGITS, str(f), "--json"], capture_output=True,
                           text=True, check=True)
        out[f] = json.loads(r.stdout)
    assert out[p]["samples"] == 360
    assert out[p]["accuracy"] == out[DIGITS_EVAL]["accuracy"]
    # max_samples cuts the batches
    p2 = bitflip.save_eval_set(tmp_path / "d2.safetensors", iter(batches), max_samples=120)
    assert bitflip.read_safetensors(p2)["labels"].shape == (120,)


def test_bad_eval_sets_are_named(tmp_path):
    with pytest.raises(bitflip.BitflipError, match="3 labels for 4 samples"):
        bitflip.save_eval_set(tmp_path / "x", np.zeros((4, 2), np.float32), labels=[0, 1, 2])
    with pytest.raises(bitflip.BitflipError, match="same number"):
        bitflip.save_eval_set(tmp_path / "x", {"a": np.zeros((4, 2)), "b": np.zeros((3, 2))})
    with pytest.raises(bitflip.BitflipError, match="called 'labels'"):
        bitflip.save_eval_set(tmp_path / "x", {"labels": np.zeros((4, 2))})
    with pytest.raises(bitflip.BitflipError, match="complex128"):
        bitflip.save_eval_set(tmp_path / "x", np.zeros((4, 2), np.complex128))
    with pytest.raises(bitflip.BitflipError, match="labels given twice"):
        bitflip.save_eval_set(tmp_path / "x", iter([(np.zeros((2, 2)), np.zeros(2))]), labels=[0, 1])
    (tmp_path / "short").write_bytes(b"\x10\x00")
    with pytest.raises(bitflip.BitflipError, match="too short"):
        bitflip.read_safetensors(tmp_path / "short")
    (tmp_path / "lying").write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(bitflip.BitflipError, match="header says"):
        bitflip.read_safetensors(tmp_path / "lying")
    assert not [f for f in os.listdir(tmp_path) if ".tmp" in f]     # no temp files left behind
