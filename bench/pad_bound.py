#!/usr/bin/env python3
"""What computing the padding's taps costs: resnet18's 3x3 Convs alone, padded by the Conv
(pads 1) against the same Conv on an input padded beforehand (pads 0: every tap a
multiply-add), ONNX Runtime and bitflip alternated in one run (docs/perf/conv.md, h21-eval).

    /usr/bin/python3 bench/pad_bound.py OUTDIR [--steps build/bitflip-bench-steps] [--rounds 3]

bitflip computes every tap of a window, the ones on the padding too (fma(w, +0, s)): a
faulty weight of Inf or NaN then gives NaN at the border as PyTorch's kernels do, and -0
sums come out as PyTorch's. ONNX Runtime's NCHWc kernels (MLAS) skip the taps that fall in
the padding, so at 7x7 about 18% of resnet18's layer4 multiply-adds are never done. A Conv
with pads 0 on a pre-padded input gives MLAS no taps to skip: the ratio of its time to the
padded Conv's is what skipping buys ONNX Runtime on that shape. The Conv node's time is
taken from ONNX Runtime's profile, scaled to CPU as bench/node_table.py does (the input's
reorder to NCHWc, bigger for the pre-padded input, is a node of its own and left out);
bitflip's is the Conv step's thread CPU from bitflip-bench-steps (its random inputs: its
kernels do not look at the values).
"""
import argparse
import glob
import json
import os
import statistics
import struct
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import node_table  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONVS = ['/layer1/layer1.1/conv1/Conv', '/layer2/layer2.1/conv1/Conv',
         '/layer3/layer3.1/conv1/Conv', '/layer4/layer4.1/conv1/Conv']
SIZE = {'layer1': 56, 'layer2': 28, 'layer3': 14, 'layer4': 7}


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        dt = {np.dtype('float32'): 'F32', np.dtype('int64'): 'I64'}[a.dtype]
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {'dtype': dt, 'shape': list(a.shape), 'data_offsets': [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))


def make(out, batch):
    m = onnx.load(os.path.join(ROOT, 'bench/models/real/resnet18.onnx'))
    inits = {i.name: i for i in m.graph.initializer}
    for x in m.graph.node:   # the exporter's Identity nodes over shared initializers
        if x.op_type == 'Identity' and x.input[0] in inits:
            inits[x.output[0]] = inits[x.input[0]]
    made = []
    for name in CONVS:
        n = next(x for x in m.graph.node if x.name == name)
        w = numpy_helper.to_array(inits[n.input[1]])
        b = numpy_helper.to_array(inits[n.input[2]])
        c, hw = w.shape[1], SIZE[name.split('/')[1]]
        for pre in (False, True):
            side = hw + 2 if pre else hw
            x = helper.make_tensor_value_info('x', TensorProto.FLOAT, [None, c, side, side])
            y = helper.make_tensor_value_info('y', TensorProto.FLOAT, [None, w.shape[0], hw, hw])
            conv = helper.make_node('Conv', ['x', 'W', 'B'], ['y'], name='conv', kernel_shape=[3, 3],
                                    pads=[0, 0, 0, 0] if pre else [1, 1, 1, 1], strides=[1, 1])
            g = helper.make_graph([conv], 'conv', [x], [y],
                                  [numpy_helper.from_array(w, 'W'), numpy_helper.from_array(b, 'B')])
            mm = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)])
            tag = f"{name.split('/')[2]}_{'prepad' if pre else 'pad1'}"
            p = os.path.join(out, tag)
            onnx.save(mm, p + '.onnx')
            rng = np.random.default_rng(1)
            xs = rng.random((batch, c, side, side), dtype=np.float32)
            if pre:   # the zeros a Conv's padding would read
                xs[:, :, 0, :] = xs[:, :, -1, :] = xs[:, :, :, 0] = xs[:, :, :, -1] = 0
            write_safetensors(p + '.eval.safetensors', {'x': xs, 'labels': np.zeros(batch, np.int64)})
            made.append((tag, p, 2 * w.size * hw * hw * batch))
    return made


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out')
    ap.add_argument('--steps', default=os.path.join(ROOT, 'build/bitflip-bench-steps'))
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--batch', type=int, default=32)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    made = make(a.out, a.batch)
    res = {tag: {'ort': [], 'bf': []} for tag, _, _ in made}
    for r in range(a.rounds):
        with open('/proc/loadavg') as f:
            print(f'round {r + 1} load {f.read().split()[0]}', file=sys.stderr)
        for tag, p, _ in made:
            for f in glob.glob(p + '_ort_*.json'):
                os.remove(f)
            subprocess.run(['node', os.path.join(ROOT, 'bench/ort_eval.js'), p + '.onnx', p + '.eval.safetensors',
                            '--threads', '1', '--batch', str(a.batch), '--repeat', '5', '--no-check',
                            '--profile', p + '_ort', '--cpu-runs', p + '.cpu'], check=True,
                           stdout=subprocess.DEVNULL)
            nodes, _, _ = node_table.ort_nodes(glob.glob(p + '_ort_*.json')[0], p + '.cpu')
            res[tag]['ort'].append(sum(ms for op, ms in nodes.values() if op == 'Conv'))
            t = subprocess.run([a.steps, p + '.onnx', str(a.batch), '5'], check=True, capture_output=True, text=True)
            st = [s for s in node_table.bitflip_steps_text(t.stdout) if s[1] == 'Conv']
            res[tag]['bf'].append(st[0][3])
    print('| Conv (batch %d) | ORT pads 1 ms | ORT pre-padded ms | ORT pre-padded / pads 1 | '
          'bitflip pads 1 ms | bitflip pre-padded ms | bitflip pads 1 / ORT pads 1 | bitflip pads 1 / ORT pre-padded |'
          % a.batch)
    print('|---|---|---|---|---|---|---|---|')
    for tag, _, _ in made[::2]:
        base = tag[:-len('_pad1')]
        o1, o2 = (statistics.median(res[base + s]['ort']) for s in ('_pad1', '_prepad'))
        b1, b2 = (statistics.median(res[base + s]['bf']) for s in ('_pad1', '_prepad'))
        print(f'| {base} | {o1:.2f} | {o2:.2f} | {o2 / o1:.3f} | {b1:.2f} | {b2:.2f} | {b1 / o1:.3f} | {b1 / o2:.3f} |')
    print('\nper round (ms): ' + json.dumps(res))


if __name__ == '__main__':
    main()
