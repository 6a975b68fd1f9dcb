#!/usr/bin/python3
"""Writes the hostile files of the issue into DIR, byte by byte (no onnx
package: protobuf wire format, field numbers from onnx.proto):

  deep.onnx    If nodes nested 10,000 deep through then_branch (about 318 KB)
  if3.onnx     the same, 3 deep
  bomb.onnx    Flatten and MatMul on x[batch,2,2], and a ConstantOfShape of
               [32768, 32768] (4 GiB of float32) feeding a ReduceMax
  bomb.eval.safetensors  4 samples for it, with labels
  bomb.json    a weight campaign on it

usage: make_limit_models.py DIR"""
import json
import os
import struct
import sys


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):          # length-delimited
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def fint(num, v):
    return varint(num << 3) + varint(v & 0xFFFFFFFFFFFFFFFF)


def s(num, text):
    return field(num, text.encode())


def model(graph):
    return fint(1, 7) + field(8, fint(2, 13)) + field(7, graph)


def nested_if(depth):
    # built inside out; each level's bytes are prepended to a list, joined once
    graph = b""
    for k in range(depth - 1, -1, -1):
        attr = s(1, "then_branch") + fint(20, 5) + field(6, graph)
        node = s(1, "c") + s(2, "inner" if k else "y") + s(3, "if_%d" % k) + s(4, "If") + field(5, attr)
        graph = field(1, node)
    return model(graph)


def value_info(name, dims):
    shape = b"".join(field(1, s(2, "batch") if d < 0 else fint(1, d)) for d in dims)
    return s(1, name) + field(2, field(1, fint(1, 1) + field(2, shape)))


def tensor(name, dtype, dims, raw):
    return b"".join(fint(1, d) for d in dims) + fint(2, dtype) + s(8, name) + field(9, raw)


def node(op, name, ins, out, attrs=b""):
    return b"".join(s(1, i) for i in ins) + s(2, out) + s(3, name) + s(4, op) + attrs


def bomb():
    w = struct.pack("<8f", 1, 0, 0, 1, 1, 0, 0, 1)
    keep = field(5, s(1, "keepdims") + fint(20, 2) + fint(3, 0))
    g = (field(5, tensor("w", 1, [4, 2], w)) +
         field(5, tensor("shp", 7, [2], struct.pack("<2q", 32768, 32768))) +
         field(1, node("Flatten", "flat", ["x"], "f")) +
         field(1, node("MatMul", "mm", ["f", "w"], "y")) +
         field(1, node("ConstantOfShape", "ConstantOfShape_0", ["shp"], "big")) +
         field(1, node("ReduceMax", "rmax", ["big"], "mx", keep)) +
         field(11, value_info("x", [-1, 2, 2])) +
         field(12, value_info("y", [-1, 2])) +
         field(12, value_info("mx", [])))
    return model(g)


def safetensors(tensors):
    hdr, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + data


def main():
    d = sys.argv[1]
    files = {
        "deep.onnx": nested_if(10000),
        "if3.onnx": nested_if(3),
        "bomb.onnx": bomb(),
        "bomb.eval.safetensors": safetensors({
            "x": ("F32", [4, 2, 2], struct.pack("<16f", *range(16))),
            "labels": ("I64", [4], struct.pack("<4q", 0, 1, 0, 1))}),
    }
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    with open(os.path.join(d, "bomb.json"), "w") as f:
        json.dump({"model": "bomb.onnx", "dataset": "bomb.eval.safetensors", "seed": 1, "trials": 10,
                   "faults": {"target": "weights", "tensors": ["w"], "model": "bitflip", "bits": 1}}, f)


main()
