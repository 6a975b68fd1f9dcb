#!/usr/bin/env python3
"""mobilenet_v2's pass by kind of step, bitflip beside ONNX Runtime (docs/BENCHMARKS.md, h13-mbv2).

    build/bitflip-bench-steps bench/models/real/mobilenet_v2.onnx 4 20 > steps.md
    node bench/ort_eval.js MODEL.onnx DATA.safetensors --threads 1 --batch 4 --repeat 5 --profile /tmp/ortp
    /usr/bin/python3 bench/mbv2_kinds.py steps.md /tmp/ortp_<date>.json

Each Conv is put in a kind by its torchvision name: the stem (features.0), depthwise
(features.1's first Conv and every block's conv.1), pointwise (the other 1x1 Convs);
ONNX Runtime names a fused node by its last output (".../conv.1/conv.1.2/Clip_output_0_nchwc"),
so both map to (block, Conv in the block). bitflip's times are thread CPU per pass, ONNX
Runtime's the profiler's wall time per run (all runs, warm-up included): compare shares,
not milliseconds, unless the machine is idle. Prints each kind's share of either pass and,
with bitflip's pass taken as PASS_RATIO times ONNX Runtime's (--ratio, default the two
shares' own total 1), how much of the difference each kind holds. --per-step: first each
Conv and the Gemm, bitflip's ms beside the median of ONNX Runtime's runs of the same node
(less moved by the load than the mean) and both GFLOP/s (h14-mbv2)."""
import argparse
import collections
import json
import re
import statistics


def key(name):
    m = re.search(r'features\.(\d+)/(conv/conv\.(\d)|features\.\d+\.\d)', name)
    if not m:
        return None
    return (int(m.group(1)), int(m.group(3)) if m.group(3) else 0)


def kind(k):
    if not isinstance(k, tuple):
        return k
    block, conv = k
    if block == 0 or block == 18:
        return 'stem' if block == 0 else 'pointwise'
    if block == 1:   # no expansion: its conv.0 is the depthwise one, conv.1 the projection
        return 'depthwise' if conv == 0 else 'pointwise'
    return 'depthwise' if conv == 1 else 'pointwise'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('steps', help="bitflip-bench-steps' table")
    ap.add_argument('ort', help="ONNX Runtime's profile (ort_eval.js --profile)")
    ap.add_argument('--per-step', dest='steps_table', action='store_true',
                    help="also each Conv and the Gemm: bitflip's ms against ONNX Runtime's median over runs")
    ap.add_argument('--ratio', type=float, default=None,
                    help="bitflip's pass time over ONNX Runtime's from a same-run A/B (e.g. 1.25)")
    a = ap.parse_args()
    bf = collections.defaultdict(float)
    bf_step = {}   # (block, conv) or op -> (name, output, ms, GFLOP/s)
    for line in open(a.steps):
        f = [x.strip() for x in line.split('|')]
        if len(f) < 8 or not f[1].isdigit():
            continue
        k = key(f[3]) if f[2] == 'Conv' else None
        bf[kind(k) if k else f[2]] += float(f[5])
        if f[2] in ('Conv', 'Gemm'):
            bf_step[k or f[2]] = (f[3], f[4], float(f[5]), f[7])
    ev = json.load(open(a.ort))
    runs = sum(1 for e in ev if e.get('cat') == 'Session' and e['name'] == 'model_run')
    ort = collections.defaultdict(float)
    ort_runs = collections.defaultdict(list)
    for e in ev:
        if e.get('cat') == 'Node' and e['name'].endswith('_kernel_time'):
            k = key(e['name'])
            ort[kind(k) if k else e['args'].get('op_name')] += e['dur'] / max(runs, 1) / 1000
            ort_runs[k or e['args'].get('op_name')].append(e['dur'] / 1000)
    if a.steps_table:
        # the median of a node's runs is less moved by the machine's load than the mean
        print('| step | kind | output | bitflip ms | GFLOP/s | ONNX Runtime ms (median) | GFLOP/s | bitflip / ORT |')
        print('|---|---|---|---|---|---|---|---|')
        for k, (name, out, ms, gf) in bf_step.items():
            o = statistics.median(ort_runs[k]) if ort_runs.get(k) else float('nan')
            ogf = float(gf) * ms / o if gf not in ('-', '') and o == o else float('nan')
            step = f'{k[0]}.{k[1]}' if isinstance(k, tuple) else k
            print(f'| {step} | {kind(k)} | {out} | {ms:.3f} | {gf} | {o:.3f} | {ogf:.1f} | {ms / o:.2f} |')
        print()
    tb, to = sum(bf.values()), sum(ort.values())
    print(f'bitflip {tb:.2f} ms a pass (thread CPU); ONNX Runtime {to:.2f} ms a run (wall, profiled, {runs} runs)')
    print('| kind | bitflip share | ONNX Runtime share | of the difference |\n|---|---|---|---|')
    ratio = a.ratio or 1.0
    diff = ratio - 1.0
    for k in sorted(set(bf) | set(ort), key=lambda k: -(bf.get(k, 0) / tb)):
        b, o = bf.get(k, 0) / tb, ort.get(k, 0) / to
        share = f'{100 * (ratio * b - o) / diff:.0f}%' if a.ratio and diff > 0 else '-'
        print(f'| {k} | {100 * b:.1f}% | {100 * o:.1f}% | {share} |')


if __name__ == '__main__':
    main()
