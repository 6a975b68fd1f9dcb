#!/usr/bin/python3
"""Writes fuzz_external's seeds into tests/fuzz/corpus/fuzz_external: each
a model and its external data file in fuzz_external.c's layout (the model's
length, 4 bytes little-endian, the model, then the file's bytes, which the
target writes as w.bin and sub/w.bin beside the model).

Seeds: a Conv whose weights onnx.save_model wrote as external data itself
(convert_model_to_external_data: its offsets and alignment); a Gemm whose
weight lies at offset 8 after junk (tests/unit/test_model_external.c's
model), the same through a nested location, with no length (the rest of
the file), and its weight and bias both in the file; and the unit test's
hostile entries (absolute and '..' locations, a directory, a missing file,
a range past the end, a length that is not the dims', offsets that are not
numbers).

usage: make_external_seeds.py [OUT_DIR]"""
import os
import struct
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, external_data_helper, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus", "fuzz_external")

W = np.array([[1, 2, 3], [-1, 0.5, 0.25]], dtype=np.float32)
BIAS = np.array([0.5, -4], dtype=np.float32)
JUNK = np.array([1e30, -1e30], dtype=np.float32).tobytes()


def pack(model_bytes, ext):
    return struct.pack("<I", len(model_bytes)) + model_bytes + ext


def external(t, loc, off, length):
    """t's data moved out: its entries as given (None: left out)"""
    t.ClearField("raw_data")
    t.ClearField("float_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", loc), ("offset", off), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, v


def gemm(loc, off="8", length="24", bias_ext=False):
    """x[batch,3] -> Gemm(W, bias, transB) -> y; W external (and the bias
    after it in the same file when bias_ext); the file: junk, W, and the
    bias unless W is read to its end (no length)"""
    w = numpy_helper.from_array(W, "fc.weight")
    b = numpy_helper.from_array(BIAS, "fc.bias")
    external(w, loc, off, length)
    if bias_ext:
        external(b, loc, "32", "8")
    g = helper.make_graph([helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["y"], transB=1)], "ext",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    return pack(m.SerializeToString(), JUNK + W.tobytes() + (BIAS.tobytes() if length is not None else b""))


def conv_saved():
    """a Conv + Relu whose initializers onnx itself writes as external data"""
    rng = np.random.default_rng(7)
    wt = numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "conv.weight")
    bs = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "conv.bias")
    g = helper.make_graph([helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], pads=[1, 1, 1, 1]),
                           helper.make_node("Relu", ["c"], ["y"])], "conv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 5])], [wt, bs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with tempfile.TemporaryDirectory() as d:
        external_data_helper.convert_model_to_external_data(m, all_tensors_to_one_file=True, location="w.bin",
                                                            size_threshold=0)
        onnx.save_model(m, os.path.join(d, "m.onnx"))
        with open(os.path.join(d, "m.onnx"), "rb") as f:
            mb = f.read()
        with open(os.path.join(d, "w.bin"), "rb") as f:
            ext = f.read()
    return pack(mb, ext)


SEEDS = {
    "seed_conv_onnx_saved": conv_saved(),
    "seed_gemm_offset": gemm("w.bin"),
    "seed_gemm_nested": gemm("sub/w.bin"),
    "seed_gemm_no_length": gemm("w.bin", off="8", length=None),
    "seed_gemm_two_tensors": gemm("w.bin", bias_ext=True),
    "seed_hostile_absolute": gemm("/etc/passwd", off="0", length=None),
    "seed_hostile_dotdot": gemm("../w.bin"),
    "seed_hostile_nested_dotdot": gemm("sub/../../w.bin"),
    "seed_hostile_directory": gemm("d"),
    "seed_hostile_missing": gemm("nothere.bin"),
    "seed_hostile_past_end": gemm("w.bin", off="16", length="24"),
    "seed_hostile_offset_past_end": gemm("w.bin", off="400", length=None),
    "seed_hostile_short": gemm("w.bin", off="8", length="20"),
    "seed_hostile_offset_text": gemm("w.bin", off="8x"),
    "seed_hostile_offset_negative": gemm("w.bin", off="-8"),
    "seed_hostile_huge_length": gemm("w.bin", off="0", length="18446744073709551615"),
    "seed_hostile_no_location": gemm(None),
}

os.makedirs(OUT, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print(f"{len(SEEDS)} seeds in {OUT}")
