#!/usr/bin/env python3
"""Hostile ONNX files for the daemon's isolation tests, as raw protobuf bytes
(standard library only: no onnx package needed).

  make_hostile.py nested OUT.onnx [DEPTH]   an If nested DEPTH deep (10000: ~320 KB)
  make_hostile.py bomb OUT.onnx OUT.safetensors
      a ~300-byte model whose ConstantOfShape makes a [32768, 32768] float
      tensor (4 GiB) for a ReduceMax, and an eval set for it
"""
import json
import struct
import sys


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def ld(field, payload):  # a length-delimited field
    return key(field, 2) + varint(len(payload)) + payload


def s(field, text):
    return ld(field, text.encode())


def vi(field, n):
    return key(field, 0) + varint(n)


# TensorProto: dims 1, data_type 2, name 8, raw_data 9.  FLOAT = 1, INT64 = 7
def tensor(name, dtype, dims, raw):
    return b"".join(vi(1, d) for d in dims) + vi(2, dtype) + s(8, name) + ld(9, raw)


# ValueInfoProto: name 1, type 2 { tensor_type 1 { elem_type 1, shape 2 { dim 1 { value 1 | param 2 } } } }
def value_info(name, dtype, dims):
    shape = b"".join(ld(1, s(2, d) if isinstance(d, str) else vi(1, d)) for d in dims)
    return s(1, name) + ld(2, ld(1, vi(1, dtype) + ld(2, shape)))


# NodeProto: input 1, output 2, name 3, op_type 4, attribute 5
def node(op, inputs, outputs, name, attrs=b""):
    return b"".join(s(1, i) for i in inputs) + b"".join(s(2, o) for o in outputs) + s(3, name) + s(4, op) + attrs


# ModelProto: ir_version 1, producer_name 2, graph 7, opset_import 8 { domain 1, version 2 }
def model(graph, opset=13):
    return vi(1, 8) + s(2, "bitflip-tests") + ld(7, graph) + ld(8, s(1, "") + vi(2, opset))


def nested(depth):
    """If -> then_branch -> If -> ... depth deep. Built from the inside out as
    a list of headers, so the bytes are written once (no quadratic copies)."""
    inner = node("Identity", ["c"], ["y"], "leaf")
    # each level: node{ input, output, name, op_type, attribute{ name, type=GRAPH(5), g{ node{ <inner> } } } }
    node_head = s(1, "c") + s(2, "y") + s(3, "if") + s(4, "If")
    attr_head = s(1, "then_branch") + vi(20, 5)
    sizes, heads = len(inner), []
    for _ in range(depth):
        graph_len = len(key(1, 2)) + len(varint(sizes)) + sizes         # graph{ node 1 }
        attr_len = len(attr_head) + len(key(6, 2)) + len(varint(graph_len)) + graph_len
        node_len = len(node_head) + len(key(5, 2)) + len(varint(attr_len)) + attr_len
        heads.append(node_head + key(5, 2) + varint(attr_len) + attr_head + key(6, 2) + varint(graph_len)
                     + key(1, 2) + varint(sizes))
        sizes = node_len
    body = b"".join(reversed(heads)) + inner
    graph = ld(1, body) + s(2, "nested") + ld(11, value_info("c", 9, [])) + ld(12, value_info("y", 9, []))
    return model(graph)


def bomb():
    f32 = lambda *v: struct.pack("<%df" % len(v), *v)
    inits = (ld(5, tensor("w", 1, [4, 1], f32(0.5, -0.25, 1.0, 2.0)))
             + ld(5, tensor("big_shape", 7, [2], struct.pack("<2q", 32768, 32768))))
    nodes = (ld(1, node("Flatten", ["x"], ["flat"], "flatten"))
             + ld(1, node("MatMul", ["flat", "w"], ["z"], "dense"))
             + ld(1, node("ConstantOfShape", ["big_shape"], ["big"], "bomb"))
             + ld(1, node("ReduceMax", ["big"], ["m"], "max"))
             + ld(1, node("MatMul", ["z", "m"], ["logits"], "scale")))
    graph = (nodes + s(2, "bomb") + inits + ld(11, value_info("x", 1, ["batch", 4]))
             + ld(12, value_info("logits", 1, ["batch", 1])))
    return model(graph)


def eval_set(samples=8):
    x = struct.pack("<%df" % (samples * 4), *[float(i % 5) for i in range(samples * 4)])
    labels = struct.pack("<%dq" % samples, *[0] * samples)
    head = {"x": {"dtype": "F32", "shape": [samples, 4], "data_offsets": [0, len(x)]},
            "labels": {"dtype": "I64", "shape": [samples], "data_offsets": [len(x), len(x) + len(labels)]}}
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + x + labels


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "nested":
        open(sys.argv[2], "wb").write(nested(int(sys.argv[3]) if len(sys.argv) > 3 else 10000))
    elif what == "bomb":
        open(sys.argv[2], "wb").write(bomb())
        open(sys.argv[3], "wb").write(eval_set())
    else:
        sys.exit(__doc__)
