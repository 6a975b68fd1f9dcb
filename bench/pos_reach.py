"""How far a campaign's weight faults reach inside a model's later Convs, at
(image, position) granularity, replayed in PyTorch: for each trial of a
`bitflip run --trials-out` record file, the fault flipped in the module's own
weights, each watched Conv's input compared with the golden pass's, and the
output positions whose window holds a moved input counted against those of the
batches a trial re-runs. The sums are PyTorch's, not bitflip's, so which
positions a small change reaches differs in detail; the shares are what
core/src/diff/diffpos.c was weighed on (docs/perf/trials/resnet18.md, h52-pos;
mobilenet_v2's 1x1 Convs: docs/perf/trials/mobilenet_v2.md, h53-pwl). "saved" is the
share of those positions a list leaves out where the batch's reach is at most 90%
(diffpos.c's POS_SHARE).

    bitflip run --local bench/out/real_resnet18_spec.json --trials-out /tmp/r18.jsonl
    /usr/bin/python3 bench/pos_reach.py /tmp/r18.jsonl [--batch 4] [--model mobilenet_v2]
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import real_bench  # noqa: E402

# the Convs watched: resnet18's last 3x3s; mobilenet_v2's 1x1s from features.11 on (14x14 and 7x7)
WATCH = {"resnet18": lambda convs: ["layer3.1.conv2", "layer4.0.conv1", "layer4.0.conv2", "layer4.1.conv1",
                                    "layer4.1.conv2"],
         "mobilenet_v2": lambda convs: [n for n, c in convs.items()
                                        if c.kernel_size == (1, 1) and int(n.split(".")[1]) >= 11]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", help="the model's campaign's --trials-out file")
    ap.add_argument("--batch", type=int, default=4, help="the campaign's batch (default 4, the bench's)")
    ap.add_argument("--model", choices=sorted(WATCH), default="resnet18")
    a = ap.parse_args()
    torch.set_num_threads(1)
    m = real_bench.load_module(a.model).eval()
    x = torch.from_numpy(benchlib.read_safetensors(os.path.join(real_bench.MODELS_DIR,
                                                                a.model + ".eval.safetensors"))["input"])
    convs = {n: mod for n, mod in m.named_modules() if isinstance(mod, torch.nn.Conv2d)}
    watch = WATCH[a.model](convs)
    acts = {}
    for n in watch:
        convs[n].register_forward_hook(lambda mod, inp, out, n=n: acts.__setitem__(n, inp[0].detach().clone()))
    with torch.no_grad():
        m(x)
    gold = dict(acts)
    params = dict(m.named_parameters())
    tot = {w: [0, 0, 0] for w in watch}
    for line in open(a.records):
        f = json.loads(line)["faults"][0]
        flat = params[f["torch_name"]].data.view(-1)
        old = flat[f["index"]].item()
        bits = np.array([old], dtype=np.float32).view(np.uint32)
        for b in f["bits"]:
            bits ^= np.uint32(1 << b)
        with torch.no_grad():
            flat[f["index"]] = float(bits.view(np.float32)[0])
            m(x)
            flat[f["index"]] = old
        for w in watch:
            moved = (gold[w] != acts[w]).any(1)                  # [N, H, W]
            c = convs[w]
            reach = torch.nn.functional.max_pool2d(moved.float()[:, None], c.kernel_size[0], c.stride[0],
                                                   c.padding[0])[:, 0] > 0
            for rb, mb in zip(reach.flatten(1).split(a.batch), moved.flatten(1).split(a.batch)):
                if mb.any():   # a batch the trial re-runs
                    n, r = rb.numel(), rb.sum().item()
                    tot[w][0] += n
                    tot[w][1] += r
                    tot[w][2] += n - r if r <= 0.9 * n else 0
    for w in watch:
        ran, reached, saved = tot[w]
        print("%-24s positions of the batches re-run %6d, reached %6d: %.3f, saved %.3f" %
              (w, ran, reached, reached / max(1, ran), saved / max(1, ran)))


if __name__ == "__main__":
    main()
