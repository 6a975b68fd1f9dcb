#!/usr/bin/env python3
"""NaN/Inf fidelity under extreme faults, end to end (docs/NUMERICS.md).

Builds a small BERT-style encoder (Embedding + nn.TransformerEncoder, GELU,
mean pooling, Linear), exports it at the given opset, then for every element
of every LayerNorm weight (or bias) sets it to VALUE (default 1.8e38, an
exponent-bit flip of a weight in [0.5, 1)) both in the torch module and in
the ONNX initializer, runs PyTorch and `bitflip eval`, and prints each fault
whose outputs differ in their NaN/Inf pattern (N = NaN, I = Inf, . = finite,
one letter per output value), and the count.

The LayerNorm parameters are perturbed before export: torch.onnx.export
deduplicates identical initializers, and fresh LayerNorms (all ones) would
share one ONNX tensor, so one flip in the file would hit every LayerNorm.

usage: /usr/bin/python3 scripts/numerics_bert.py BITFLIP [--opset 17] [--value 1.8e38] [--which weight|bias]
"""
import argparse
import json
import os
import struct
import subprocess
import tempfile

import numpy as np
import onnx
import torch
from onnx import numpy_helper

V, D, H, FF, L, S, B = 100, 32, 4, 64, 2, 12, 8


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(V, D)
        layer = torch.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation="gelu", batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, L)
        self.fc = torch.nn.Linear(D, 2)

    def forward(self, ids):
        return self.fc(self.enc(self.emb(ids)).mean(1))


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for n, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[n] = {"dtype": "I64", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def pattern(a):
    return "".join("N" if np.isnan(v) else "I" if np.isinf(v) else "." for v in np.ravel(a))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bitflip")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--value", type=float, default=1.8e38)
    ap.add_argument("--which", default="weight", choices=["weight", "bias"])
    args = ap.parse_args()
    torch.manual_seed(0)
    m = Encoder().eval()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "norm" in n:
                p.add_(torch.rand_like(p) * 0.2 - 0.1)
    ids = torch.randint(0, V, (B, S))
    tmp = tempfile.mkdtemp()
    model_path, data_path = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "d.safetensors")
    torch.onnx.export(m, (ids,), model_path, opset_version=args.opset, input_names=["ids"], output_names=["logits"],
                      dynamic_axes={"ids": {0: "b"}, "logits": {0: "b"}})
    write_safetensors(data_path, {"ids": ids.numpy(), "labels": np.zeros(B, np.int64)})
    base = onnx.load(model_path)
    differing = total = 0
    for pname, p in m.named_parameters():
        if "norm" not in pname or not pname.endswith(args.which):
            continue
        for i in range(p.numel()):
            sd = {k: v.clone() for k, v in m.state_dict().items()}
            sd[pname].view(-1)[i] = args.value
            mf = Encoder().eval()
            mf.load_state_dict(sd)
            with torch.no_grad():
                want = mf(ids).numpy()
            mod = onnx.ModelProto()
            mod.CopyFrom(base)
            for init in mod.graph.initializer:
                if init.name == pname:
                    a = numpy_helper.to_array(init).copy()
                    a.ravel()[i] = args.value
                    init.CopyFrom(numpy_helper.from_array(a, pname))
            fpath, opath = os.path.join(tmp, "f.onnx"), os.path.join(tmp, "f.csv")
            onnx.save(mod, fpath)
            subprocess.run([args.bitflip, "eval", fpath, data_path, "--outputs", opath], check=True,
                           capture_output=True)
            got = np.loadtxt(opath, delimiter=",", dtype=np.float32)
            total += 1
            if pattern(want) != pattern(got):
                differing += 1
                print(f"{pname}[{i}]  torch {pattern(want)}  bitflip {pattern(got)}")
    print(f"{differing} of {total} faults differ in NaN/Inf pattern (opset {args.opset}, value {args.value:g})")


if __name__ == "__main__":
    main()
