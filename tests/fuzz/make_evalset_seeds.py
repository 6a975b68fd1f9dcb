#!/usr/bin/python3
"""Writes fuzz_evalset's seeds into tests/fuzz/corpus/fuzz_evalset: each
fixture's eval set cut to its first samples (a detection set's ground truth
cut with it), behind the byte that picks its model (fuzz_evalset.c), and a
few hostile variants of each layout (ground truth out of order, labels past
the classes, a multiple-choice item without its answer).

usage: make_evalset_seeds.py [FIXTURES_DIR] [OUT_DIR]"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "fixtures")
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "corpus", "fuzz_evalset")
SIZE = {"F32": 4, "I64": 8, "I32": 4, "U8": 1, "F16": 2, "BF16": 2}


def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}


def write(tensors):
    h, data = {}, b""
    for k, (dt, shape, raw) in tensors.items():
        h[k] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    hb = json.dumps(h).encode()
    return struct.pack("<Q", len(hb)) + hb + data


def first(tensors, n, skip=()):
    out = {}
    for k, (dt, shape, raw) in tensors.items():
        if k in skip:
            out[k] = (dt, shape, raw)
            continue
        row = len(raw) // shape[0]
        out[k] = (dt, [n] + shape[1:], raw[:row * n])
    return out


def i64(vals):
    return struct.pack("<%dq" % len(vals), *vals)


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {}
    # 0: detection, one image per call
    det = read(os.path.join(FIX, "onesample", "onesample_det.eval.safetensors"))
    go = struct.unpack("<%dq" % det["gt_offsets"][1][0], det["gt_offsets"][2])
    k = go[2]
    cut = first({"images": det["images"]}, 2)
    cut["gt_boxes"] = ("F32", [k, 4], det["gt_boxes"][2][:k * 16])
    cut["gt_labels"] = ("I64", [k], det["gt_labels"][2][:k * 8])
    cut["gt_offsets"] = ("I64", [3], i64(go[:3]))
    seeds["det_2"] = b"\x00" + write(cut)
    back = dict(cut)
    back["gt_offsets"] = ("I64", [3], i64([0, k, go[1]]))
    seeds["det_offsets_back"] = b"\x00" + write(back)
    neg = dict(cut)
    neg["gt_labels"] = ("I64", [k], i64([-1] * k))
    seeds["det_label_negative"] = b"\x00" + write(neg)
    # 1: segmentation
    seg = read(os.path.join(FIX, "segtask", "tiny_seg.eval.safetensors"))
    s2 = first(seg, 2)
    seeds["seg_2"] = b"\x01" + write(s2)
    lab = bytearray(s2["labels"][2])
    lab[0:8] = i64([255])
    lab[8:16] = i64([1 << 40])
    seeds["seg_label_big"] = b"\x01" + write({**s2, "labels": ("I64", s2["labels"][1], bytes(lab))})
    # 2: language model, multiple choice
    mc = read(os.path.join(FIX, "lmtask", "tiny_lm_mc.eval.safetensors"))
    seeds["lm_mc_3"] = b"\x02" + write(first(mc, 3))
    nomc = first(mc, 3)
    del nomc["mc_answer"]
    seeds["lm_mc_no_answer"] = b"\x02" + write(nomc)
    # 3: language model fed its KV cache
    kv = read(os.path.join(FIX, "lm", "lm_gpt2_kv_op15.eval.safetensors"))
    seeds["lm_kv_2"] = b"\x03" + write(first(kv, 2))
    # 4: classification
    cls = read(os.path.join(FIX, "conformance", "demo_digits.eval.safetensors"))
    seeds["cls_4"] = b"\x04" + write(first(cls, 4))
    for name, data in seeds.items():
        with open(os.path.join(OUT, "seed_" + name + ".bin"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
