#!/usr/bin/env python3
"""bitflip's golden pass node by node beside ONNX Runtime's, both in CPU time (docs/perf/conv.md, h21-eval).

    build/bitflip-bench-steps MODEL.onnx 32 3 > steps.md
    node bench/ort_eval.js MODEL.onnx DATA.safetensors --threads 1 --batch 32 --repeat 5 \\
         --profile /tmp/ortp --cpu-runs /tmp/ortp.cpu.json
    /usr/bin/python3 bench/node_table.py MODEL.onnx --steps steps.md [steps2.md ...] \\
        --ort /tmp/ortp_<date>.json:/tmp/ortp.cpu.json [...]

ONNX Runtime's profiler times each node in wall time, which a loaded host stretches by
however long the process waited; bitflip-bench-steps times each step in thread CPU. So each
ORT node's wall time in a run is scaled by the share of that run's wall time the process
had a core (its CPU over its wall, ort_eval.js --cpu-runs, same order as the profile's
model_run events), and the table shows the median of those over the timed runs (the
warm-up passes' runs pay the first touches of ORT's buffers and are left out; a --cpu-runs file
without the marks: every run but the first). A short node is seldom preempted, so its wall time
is its CPU time and the scaling would shrink it: a node whose fastest run took under 2 ms
of wall shows that fastest run instead. Several steps tables and profiles (rounds taken
alternately, so both peers see the same load) give each row's median over the rounds.

ORT fuses a Conv with its Relu/Clip/Add and names the node by its last output ("/layer1/layer1.0/relu/Relu_output_0_nchwc"); each such node is mapped
back through the graph to the Conv, MatMul or Gemm that heads it, and bitflip's steps of the
same ONNX nodes (its fused activations cost 0 on their own step) are summed into the same
row. Rows whose work is a product show GFLOP/s from bitflip's own count (its table's GFLOP/s
times its ms). Rows that match nothing on the other side are listed with '-'.
"""
import argparse
import collections
import json
import re
import statistics

import onnx

HEAVY = ('Conv', 'MatMul', 'Gemm', 'FusedConv', 'FusedMatMul', 'FusedGemm', 'QLinearConv')


# --kinds vit: ViT-S/16's nodes by what they do, both engines' names (ORT's fused Gelu is
# named 'Gelu', 'Gelu_token_N', its LayerNorms '.../ln_1/Mul/LayerNormFusion/'); bitflip's fused bias, Gelu,
# Softmax and residual Adds cost 0 on their own steps and land with their product
VIT_KINDS = [
    (r'self_attention/(MatMul|Add)$', 'QKV MatMul + bias'),
    (r'self_attention/(MatMul_1|Softmax)$', 'scores q k^T (MatMul_1) + Softmax'),
    (r'self_attention/MatMul_2$', 'p v (MatMul_2)'),
    (r'self_attention/Gemm$', 'out_proj Gemm'),
    (r'(mlp\.0/|mlp\.1/|^Gelu(_token_\d+)?$)', 'mlp.0 MatMul + bias + Gelu'),
    (r'(mlp\.3/|encoder_layer_\d+/Add_1$)', 'mlp.3 MatMul + bias + residual Add'),
    (r'/ln(_\d)?/', 'LayerNorm (+ its Mul, Add)'),
    (r'Transpose', 'Transpose'),
    (r'Slice', 'Slice (q, k, v)'),
    (r'self_attention/Div', 'Div (q scaling)'),
    (r'encoder_layer_\d+/Add$', 'residual Add after attention'),
    (r'conv_proj', 'patch Conv'),
    (r'heads', 'head Gemm'),
]


def kind_of(name, op):
    for rx, k in VIT_KINDS:
        if re.search(rx, name):
            return k
    return f'other ({op})'


def graph_maps(model_path):
    g = onnx.load(model_path, load_external_data=False).graph
    producer = {}
    byname = {}
    for i, n in enumerate(g.node):
        name = n.name or f'{n.op_type}_{i}'
        byname[name] = n
        for o in n.output:
            producer[o] = (name, n)
    return producer, byname


def head_of(out_name, producer):
    """ONNX node names covered by an ORT node whose last output is out_name, the head first."""
    covered = []
    cur = producer.get(out_name)
    while cur is not None:
        name, n = cur
        covered.append(name)
        if n.op_type in HEAVY:
            return list(reversed(covered))
        # walk back through the element-wise tail: Relu/Clip/Add/BN... take the input made by a
        # heavy node if one is, else the first input
        nxt = None
        for i in n.input:
            p = producer.get(i)
            if p is not None and p[1].op_type in HEAVY:
                nxt = p
                break
        if nxt is None:
            nxt = producer.get(n.input[0]) if n.input else None
            if n.op_type not in ('Relu', 'Clip', 'Add', 'BatchNormalization', 'Sigmoid', 'Mul'):
                nxt = None
        if nxt is None:
            return [name]
        cur = nxt
    return covered


def ort_nodes(profile_path, cpu_path):
    ev = json.load(open(profile_path))
    runs = sorted((e for e in ev if e.get('cat') == 'Session' and e['name'] == 'model_run'),
                  key=lambda e: e['ts'])
    cpu = json.load(open(cpu_path)) if cpu_path else None
    if cpu is not None and len(cpu) != len(runs):
        raise SystemExit(f'{cpu_path}: {len(cpu)} runs, the profile has {len(runs)}')
    per = collections.defaultdict(lambda: collections.defaultdict(float))   # node -> run -> us
    op = {}
    order = []
    for e in ev:
        if e.get('cat') != 'Node' or not e['name'].endswith('_kernel_time'):
            continue
        r = next((i for i, m in enumerate(runs) if m['ts'] <= e['ts'] <= m['ts'] + m['dur']), None)
        if r is None:
            continue
        nm = e['name'][:-len('_kernel_time')]
        if nm not in op:
            order.append(nm)
        op[nm] = e['args'].get('op_name')
        per[nm][r] += e['dur']
    out = {}
    for nm in order:
        vals = []
        walls_n = []
        for r, us in per[nm].items():
            if (cpu[r].get('warmup', r == 0) if cpu else r == 0) and len(runs) > 1:
                continue
            # the share of the time this process had a core over the run's window (its CPU
            # over its wall, ort_eval.js's own clock around session.run): a node's wall times it
            # is its CPU, whatever the run spent outside the profiled nodes (the output's copy)
            scale = (cpu[r]['cpu_us'] / (cpu[r].get('wall_us') or runs[r]['dur'])) if cpu else 1.0
            vals.append(us * scale / 1000)
            walls_n.append(us / 1000)
        est = statistics.median(vals) if vals else float('nan')
        if walls_n and min(walls_n) < 2.0:
            est = min(walls_n)
        out[nm] = (op[nm], est)
    timed = [r for r in range(len(runs)) if not (cpu[r].get('warmup', r == 0) if cpu else r == 0)] or [0]
    walls = [runs[r]['dur'] / 1000 for r in timed]
    cpus = [cpu[r]['cpu_us'] / 1000 for r in timed] if cpu else []
    return out, walls, cpus


def bitflip_steps(path):
    with open(path) as f:
        return bitflip_steps_text(f.read())


def bitflip_steps_text(text):
    steps = []
    for line in text.splitlines():
        f = [x.strip() for x in line.split('|')]
        if len(f) < 8 or not f[1].isdigit():
            continue
        gf = float(f[7]) if f[7] not in ('-', '') else None
        steps.append((f[3], f[2], f[4], float(f[5]), gf))
    return steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('model')
    ap.add_argument('--steps', nargs='+', required=True, help="bitflip-bench-steps' tables, one a round")
    ap.add_argument('--ort', nargs='+', required=True,
                    help="PROFILE.json:CPU.json (ort_eval.js --profile, --cpu-runs), one a round; "
                         "PROFILE.json alone: wall times")
    ap.add_argument('--by-op', action='store_true', help='also a table summed by the head op')
    ap.add_argument('--kinds', choices=['vit'], help='only a table by kind of node (ViT-S/16)')
    a = ap.parse_args()
    producer, _ = graph_maps(a.model)
    rounds = []
    walls, cpus = [], []
    for spec in a.ort:
        prof, _, cpu = spec.partition(':')
        o, w, c = ort_nodes(prof, cpu or None)
        rounds.append(o)
        walls += w
        cpus += c
    ort = {nm: (op, statistics.median(r[nm][1] for r in rounds if nm in r))
           for nm, (op, _) in rounds[0].items()}
    group = {}        # ONNX node name -> row key
    rows = collections.OrderedDict()   # key -> dict
    for nm, (op, ms) in ort.items():
        out = re.sub(r'_nchwc$', '', nm)
        covered = head_of(out, producer) if out in producer else []
        key = covered[0] if covered else nm
        for c in covered:
            group[c] = key
        r = rows.setdefault(key, {'op': op, 'ort': 0.0, 'bf': 0.0, 'flop': 0.0, 'out': '', 'bfsteps': 0})
        r['ort'] += ms
    tabs = [bitflip_steps(p) for p in a.steps]
    # matched by step name, not row: bitflip-bench-steps leaves out the steps under a millionth
    # of the pass (an Identity's 0.00 ms), which rounds apart leave in or out; a step absent
    # from a round took no measurable time there (0 ms)
    med, seen = [], {}
    for t in tabs:
        for name, op, shape, ms, gf in t:
            seen.setdefault(name, (op, shape, gf))
    by_name = [{row[0]: row[3] for row in t} for t in tabs]
    for name, (op, shape, gf) in seen.items():
        med.append((name, op, shape, statistics.median(d.get(name, 0.0) for d in by_name), gf))
    bare = []
    for p in a.steps:
        for line in open(p):
            m = re.match(r'pass without a watch ([0-9.]+) ms', line)
            if m:
                bare.append(float(m.group(1)))
    for name, op, shape, ms, gf in med:
        key = group.get(name, name)
        r = rows.setdefault(key, {'op': op, 'ort': None, 'bf': 0.0, 'flop': 0.0, 'out': '', 'bfsteps': 0})
        r['bf'] += ms
        r['bfsteps'] += 1
        if gf is not None:
            r['flop'] += gf * ms * 1e6   # GFLOP/s * ms = MFLOP; in FLOP
        if name == key or not r['out']:
            r['out'] = shape
            r['op'] = op if name == key else r['op']
    if a.kinds:
        kinds = collections.OrderedDict()
        for key, r in rows.items():
            k = kinds.setdefault(kind_of(key, r['op']), [0.0, 0.0, 0.0])
            k[0] += r['bf']
            k[1] += r['ort'] or 0
            k[2] += r['flop']
        print('| kind | bitflip ms | ORT ms | bitflip / ORT | bitflip GFLOP/s | ORT GFLOP/s |')
        print('|---|---|---|---|---|---|')
        for k, (b, o, fl) in sorted(kinds.items(), key=lambda kv: -kv[1][0] - kv[1][1]):
            if b < 0.005 and o < 0.005:
                continue
            print(f"| {k} | {b:.2f} | {o:.2f} | {b / o if o else float('nan'):.2f} | "
                  f"{fl / b / 1e6 if fl and b else float('nan'):.1f} | {fl / o / 1e6 if fl and o else float('nan'):.1f} |")
        tb = sum(v[0] for v in kinds.values())
        to = sum(v[1] for v in kinds.values())
        print(f'\nsum: bitflip {tb:.1f} ms, ONNX Runtime {to:.1f} ms ({tb / to:.2f}x); ORT run CPU median '
              f'{statistics.median(cpus) if cpus else float("nan"):.1f} ms')
        return
    print('| node (ONNX name of the head) | op | output | bitflip ms | ORT ms | bitflip / ORT | bitflip GFLOP/s | ORT GFLOP/s |')
    print('|---|---|---|---|---|---|---|---|')
    tb = to = 0.0
    byop = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    for key, r in rows.items():
        if r['bf'] < 0.005 and (r['ort'] or 0) < 0.005:
            continue
        o = r['ort']
        tb += r['bf']
        to += o or 0
        b = byop[r['op']]
        b[0] += r['bf']
        b[1] += o or 0
        b[2] += r['flop']
        ratio = f"{r['bf'] / o:.2f}" if o else '-'
        gb = f"{r['flop'] / r['bf'] / 1e6:.1f}" if r['flop'] and r['bf'] else '-'
        go = f"{r['flop'] / o / 1e6:.1f}" if r['flop'] and o else '-'
        ostr = f'{o:.2f}' if o is not None else '-'
        bstr = f"{r['bf']:.2f}" if r['bfsteps'] else '-'
        print(f"| {key} | {r['op']} | {r['out']} | {bstr} | {ostr} | {ratio} | {gb} | {go} |")
    print()
    print(f'sum of rows: bitflip {tb:.1f} ms (thread CPU a pass), ONNX Runtime {to:.1f} ms '
          f'(its nodes, {"CPU-scaled" if cpus else "wall"}); ORT run wall median {statistics.median(walls):.1f} ms'
          + (f', run CPU median {statistics.median(cpus):.1f} ms' if cpus else '')
          + (f'; bitflip pass without a watch (pairs fused) median {statistics.median(bare):.1f} ms'
             f' ({", ".join(f"{x:.1f}" for x in bare)})' if bare else ''))
    if a.by_op:
        print()
        print('| head op | bitflip ms | ORT ms | bitflip / ORT | bitflip GFLOP/s | ORT GFLOP/s |')
        print('|---|---|---|---|---|---|')
        for k, (b, o, fl) in sorted(byop.items(), key=lambda kv: -kv[1][0]):
            print(f"| {k} | {b:.2f} | {o:.2f} | {b / o if o else float('nan'):.2f} | "
                  f"{fl / b / 1e6 if fl and b else float('nan'):.1f} | {fl / o / 1e6 if fl and o else float('nan'):.1f} |")


if __name__ == '__main__':
    main()
