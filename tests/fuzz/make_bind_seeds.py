#!/usr/bin/python3
"""Writes fuzz_bind's seeds into tests/fuzz/corpus/fuzz_bind: the fixtures
that run one image per call and tests/fixtures/user_det's plain exports, and
the hostile graphs of tests/unit/test_per_call.c (a selection in an If's
else-branch only, in a Loop's body, 62 Ifs deep; a symbolic, unnamed, 0 and 1
batch dim), each behind fuzz_bind.c's two bytes: byte 0 the samples (1 + b % 3)
and, with bit 2, the one-sample-per-call layout; byte 1 the symbolic dims'
size (1 + b % 4).

usage: make_bind_seeds.py [FIXTURES_DIR] [OUT_DIR]"""
import os
import sys

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "fixtures")
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "corpus", "fuzz_bind")

FIXTURES = ["onesample/onesample_dyn.onnx", "onesample/onesample_cls.onnx", "user_det/yolo_user_op17_dyn.onnx",
            "user_det/lraspp_user_op17_noname.onnx"]


def x_and_cond(nodes, dim0):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [dim0, 4])
    nodes += [helper.make_node("ReduceMax", ["x"], ["mx"], keepdims=0),
              helper.make_node("Greater", ["mx", "zero"], ["c"])]
    return x, [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])]


def out(name):
    return helper.make_tensor_value_info(name, TensorProto.INT64, None)


def branch(op, name, y):
    return helper.make_graph([helper.make_node(op, ["x"], [y])], name, [], [out(y)])


def model(nodes, x, inits, y="y"):
    g = helper.make_graph(nodes, "per_call", [x], [out(y)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def else_only(dim0):
    nodes = []
    x, inits = x_and_cond(nodes, dim0)
    nodes.append(helper.make_node("If", ["c"], ["y"], then_branch=branch("Shape", "then", "ty"),
                                  else_branch=branch("NonZero", "else", "ey")))
    return model(nodes, x, inits)


def loop_body():
    nodes = []
    x, inits = x_and_cond(nodes, "batch")
    body = helper.make_graph(
        [helper.make_node("Identity", ["cin"], ["cout"]), helper.make_node("Identity", ["vin"], ["vout"]),
         helper.make_node("NonZero", ["vin"], ["sel"])], "body",
        [helper.make_tensor_value_info("it", TensorProto.INT64, []),
         helper.make_tensor_value_info("cin", TensorProto.BOOL, []),
         helper.make_tensor_value_info("vin", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cout", TensorProto.BOOL, None),
         helper.make_tensor_value_info("vout", TensorProto.FLOAT, None), out("sel")])
    inits.append(helper.make_tensor("M", TensorProto.INT64, [], [1]))
    nodes.append(helper.make_node("Loop", ["M", "", "x"], ["v_final", "y"], body=body))
    return model(nodes, x, inits)


def nested(levels):
    inner = helper.make_graph([helper.make_node("NonZero", ["x"], ["z"])], "innermost", [], [out("z")])
    for k in range(levels - 1, -1, -1):
        y = f"y{k}" if k else "y"
        node = helper.make_node("If", ["c"], [y], name=f"if_{k}", then_branch=inner,
                                else_branch=branch("Shape", "else", f"e{k}"))
        if k:
            inner = helper.make_graph([node], "then", [], [out(y)])
    nodes = []
    x, inits = x_and_cond(nodes, "batch")
    nodes.append(node)
    return model(nodes, x, inits)


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {}
    for f in FIXTURES:
        raw = open(os.path.join(FIX, f), "rb").read()
        stem = os.path.basename(f)[:-5]
        seeds[f"seed_{stem}_n2"] = bytes([1, 1]) + raw
        seeds[f"seed_{stem}_n3_one_sample"] = bytes([6, 2]) + raw
    for dim0, tag in (("batch", "named"), (None, "unnamed"), (1, "one"), (0, "zero")):
        seeds[f"seed_else_only_{tag}"] = bytes([1, 1]) + else_only(dim0)
    seeds["seed_loop_body"] = bytes([1, 1]) + loop_body()
    seeds["seed_nested_62"] = bytes([2, 0]) + nested(62)
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"make_bind_seeds: {len(seeds)} seeds in {OUT}")


if __name__ == "__main__":
    main()
