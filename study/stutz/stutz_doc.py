"""Writes docs/study/stutz.md and its figures from the study's results.json
(study/stutz/stutz.py calls `write`; alone: stutz_doc.py RESULTS.json DOC.md).

Every number in the doc is read from the results; the paper's findings are
stated as the paper states them, qualitatively, beside ours."""
import json
import os
import sys


def _pct(x):
    return "%.1f" % (100.0 * x)


def _err(acc, lo, hi):
    """test error in %, with the interval of the mean (1 - the accuracy's)."""
    return "%s (%s–%s)" % (_pct(1 - acc), _pct(1 - hi), _pct(1 - lo))


def _sweep(res, model, r):
    for s in res["sweeps"]:
        if s["model"] == model and s["repr"] == r:
            return s
    return None


def _at(s, rate):
    for row in s["rates"]:
        if abs(row[0] - rate) <= 1e-12:
            return row
    return None


def figures(res, doc_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    schemes = res["schemes"]
    fig, axes = plt.subplots(1, len(schemes), figsize=(4.2 * len(schemes), 3.3), squeeze=False)
    colors = {8: "tab:blue", 6: "tab:orange", 4: "tab:green", 3: "tab:red", 2: "tab:purple"}
    for ax, scheme in zip(axes[0], schemes):
        for m in res["widths"]:
            for model, style in (("normal", "--"), ("clipped", "-")):
                s = _sweep(res, model, "%s%d" % (scheme, m))
                if not s:
                    continue
                x = [row[0] * 100 for row in s["rates"]]
                y = [100 * (1 - row[1]) for row in s["rates"]]
                ax.plot(x, y, style, color=colors.get(m, "black"), marker="o", ms=3,
                        label="%d bit%s" % (m, ", clipped" if model == "clipped" else ""))
        ax.set_xscale("log")
        ax.set_xlabel("bit error rate p (%)")
        ax.set_ylabel("test error (%)")
        ax.set_ylim(0, 100)
        ax.set_title("%s (%s)" % ("asymmetric, unsigned" if scheme == "uint" else "symmetric, two's complement",
                                  scheme + "<m>"))
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    path = os.path.join(doc_dir, "stutz_ber.png")
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return os.path.basename(path)


def write(res, doc):
    doc_dir = os.path.dirname(os.path.abspath(doc))
    os.makedirs(doc_dir, exist_ok=True)
    fig = figures(res, doc_dir)
    rates = res["rates"]
    mode = "quick (`--quick`)" if res["quick"] else "full"
    L = []
    w = L.append
    w("# Stutz et al. on bitflip: bit errors in fixed-point weights")
    w("")
    w("<!-- written by study/stutz/stutz_doc.py from the study's results.json; do not edit by hand -->")
    w("")
    w("Stutz et al., *Bit Error Robustness for Energy-Efficient DNN Accelerators* (MLSys 2021), "
      "study what low-voltage SRAM bit errors do to a quantized network's weights, and how to make "
      "networks robust to them. This page reruns their study with bitflip: fixed-point weights at "
      "%s bits (`int<m>`, `uint<m>`), random bit errors at rates %s, with and without weight "
      "clipping, and a profiled error map replayed at random offsets." %
      (", ".join(str(m) for m in res["widths"]), ", ".join("%g%%" % (100 * r) for r in rates)))
    w("")
    w("Regenerate everything on this page (numbers, tables, figure) with `make study-stutz` "
      "(`study/stutz/stutz.py`); these numbers are from a **%s** run that took %.0f s "
      "on a 2-core machine shared with other work (training included)." % (mode, res["seconds"]))
    w("")
    w("## Setup")
    w("")
    nm, cm = res["models"]["normal"], res["models"]["clipped"]
    w("- **Data**: scikit-learn's digits (8x8, shipped with Debian's python3-sklearn), upscaled to 16x16; "
      "%d images to train, %d held out to evaluate. No download." % (res["train"], res["test"]))
    w("- **Model**: a small ResNet (stem, three stages of one basic block with 16/32/64 channels, "
      "GroupNorm without affine parameters, global average pooling, a linear classifier): %d parameters." %
      nm["params"])
    w("- **Training** (PyTorch, CPU): %d epochs of Adam, plain (*normal*, fp32 accuracy %s%%, largest "
      "|w| %.2f) and with **weight clipping** (*clipped*: every parameter clamped to [-%g, %g] after "
      "each step; fp32 accuracy %s%%). Then, per width and scheme, %d epoch(s) of quantization-aware "
      "fine-tuning (weights fake-quantized by the paper's formulas, straight-through gradients; the "
      "clipped model quantizes in [-w_max, w_max])." %
      (res["epochs"], _pct(nm["fp32_accuracy"]), nm["max_abs_weight"], res["w_max"], res["w_max"],
       _pct(cm["fp32_accuracy"]), res["qat_epochs"]))
    w("- **Quantization** (bitflip's `representation`): per layer, `int<m>` symmetric (two's "
      "complement, scale max|w| / (2^(m-1)-1)) and `uint<m>` asymmetric (unsigned after shifting by the "
      "minimum, scale (max-min) / (2^m-1)); the clipped models with `\"w_max\": %g`. Sites: every "
      "convolution and classifier weight and bias (`\"tensors\": [\"*.weight\", \"*.bias\"]`)." % res["w_max"])
    w("- **Random bit errors** (`\"model\": \"ber\"`): each of the m stored bits of every weight flips "
      "with probability p; %d draws (trials) per rate, paired across models by the seed. Metric: test "
      "error on the %d held-out digits, the mean over draws (Stutz et al.'s RErr), with its 95%% interval." %
      (res["repeats"], res["test"]))
    mp = res["map"]
    w("- **Profiled errors** (`\"model\": \"profiled\"`): a %d x %d-cell map made by "
      "`study/stutz/bfmap.py` (weak columns; %d flip, %d stuck-at-0, %d stuck-at-1 cells: %.2f%% of the "
      "cells), laid over the weights' stored bits in memory order at a random offset per draw "
      "(docs/CAMPAIGNS.md, Profiled error maps). No chip's measured map ships with bitflip; this one "
      "stands in for one." %
      (mp["rows"], mp["cols"], mp["cells"]["flip"], mp["cells"]["stuck_at_0"], mp["cells"]["stuck_at_1"],
       100 * mp["rate"]))
    w("")
    w("## Quantized accuracy: bitflip against PyTorch")
    w("")
    w("The golden model of each campaign is the fp32 model quantized by bitflip; its test error must be "
      "PyTorch's with the same quantization (study/stutz/quant_ref.py, the paper's formulas in numpy):")
    w("")
    w("| model | " + " | ".join(s["repr"] for s in res["sweeps"] if s["model"] == "normal") + " |")
    w("| --- |" + " --- |" * len([s for s in res["sweeps"] if s["model"] == "normal"]))
    for model in ("normal", "clipped"):
        cells = []
        for s in res["sweeps"]:
            if s["model"] != model:
                continue
            cells.append("%s / %s" % (_pct(1 - s["golden_accuracy"]), _pct(1 - s["torch_quantized_accuracy"])))
        w("| %s: error %% bitflip / PyTorch | %s |" % (model, " | ".join(cells)))
    w("")
    w("## Test error (%) under random bit errors")
    w("")
    w("![test error vs bit error rate](%s)" % fig)
    w("")
    w("Solid: clipped; dashed: normal. Each cell of the tables is the mean test error over %d draws and "
      "its 95%% interval." % res["repeats"])
    w("")
    for scheme in res["schemes"]:
        w("**%s**" % ("`uint<m>`: asymmetric, unsigned" if scheme == "uint" else "`int<m>`: symmetric, two's complement"))
        w("")
        w("| m | model | clean | " + " | ".join("p=%g%%" % (100 * r) for r in rates) + " |")
        w("| --- | --- | --- |" + " --- |" * len(rates))
        for m in res["widths"]:
            for model in ("normal", "clipped"):
                s = _sweep(res, model, "%s%d" % (scheme, m))
                if not s:
                    continue
                w("| %d | %s | %s | %s |" % (m, model, _pct(1 - s["golden_accuracy"]),
                                             " | ".join(_err(row[1], row[2], row[3]) for row in s["rates"])))
        w("")
    if res["profiled"]:
        w("## Profiled errors")
        w("")
        eff = (mp["cells"]["flip"] + 0.5 * (mp["cells"]["stuck_at_0"] + mp["cells"]["stuck_at_1"])) / (mp["rows"] * mp["cols"])
        w("The map fails %.2f%% of its cells; a stuck cell corrupts a bit only where the stored bit "
          "differs from it (about half of the time), so the map flips about %.2f%% of the stored bits. "
          "Test error (%%) over %d offsets, beside random errors at p = 1%%:" %
          (100 * mp["rate"], 100 * eff, res["repeats"]))
        w("")
        w("| model | m | clean | profiled map | random p=1% |")
        w("| --- | --- | --- | --- | --- |")
        for p in res["profiled"]:
            s = _sweep(res, p["model"], p["repr"])
            row = _at(s, 0.01) if s else None
            w("| %s | %s | %s | %s | %s |" % (p["model"], p["repr"], _pct(1 - p["golden_accuracy"]),
                                             _err(p["mean"], p["ci"][0], p["ci"][1]),
                                             _err(row[1], row[2], row[3]) if row else "–"))
        w("")
    w("## The paper's findings beside ours")
    w("")
    findings(res, w)
    with open(doc, "w") as fh:
        fh.write("\n".join(L) + "\n")


def findings(res, w):
    def err(model, r, rate):
        s = _sweep(res, model, r)
        row = _at(s, rate) if s else None
        return None if row is None else 1 - row[1]

    big = 0.01 if 0.01 in res["rates"] else res["rates"][len(res["rates"]) // 2]
    clean8 = 1 - _sweep(res, "normal", "uint8")["golden_accuracy"]
    e_lo, e_big, e_hi = (err("normal", "uint8", r) for r in (res["rates"][0], big, res["rates"][-1]))
    shape = ("The same shape: no measurable harm at %g%%, a collapse by %g%%." % (100 * res["rates"][0], 100 * res["rates"][-1])
             if abs(e_lo - clean8) < 0.01 and e_hi > 3 * clean8 else
             "Not the same shape here: see the table.")
    w("1. **Normally trained, quantized networks lose their accuracy as p grows past about 0.1%%** "
      "(paper: with normal training the robust error grows quickly once p passes about 0.1%% and is far "
      "above the clean error at p = 1%%). Ours, `uint8` normal: %s at p=%g%%, %s at p=%g%%, %s at p=%g%% "
      "(clean %s). %s Digits are easier than CIFAR-10 and our model is small, so where exactly the knee "
      "sits does not carry over." % (
          _fmt(e_lo), 100 * res["rates"][0], _fmt(e_big), 100 * big, _fmt(e_hi), 100 * res["rates"][-1],
          _fmt(clean8), shape))
    w("")
    if "int" in res["schemes"]:
        pairs = [(m, err("normal", "int%d" % m, big), err("normal", "uint%d" % m, big)) for m in res["widths"]]
        better = sum(1 for _, a, b in pairs if b < a)
        w("2. **The quantization scheme matters** (paper: per-layer, asymmetric quantization into unsigned "
          "integers with proper rounding is more robust than symmetric two's complement). Ours, normal "
          "model at p=%g%%, `int<m>` vs `uint<m>`: %s: unsigned is the more robust at %d of %d widths. In "
          "two's complement, a flip of the sign bit turns a small weight into one near -q_max; in the "
          "unsigned code the top bit moves a weight by half the range, up or down." % (
              100 * big, ", ".join("m=%d %s vs %s" % (m, _fmt(a), _fmt(b)) for m, a, b in pairs), better,
              len(pairs)))
        w("")
    clip = [(m, err("normal", "uint%d" % m, big), err("clipped", "uint%d" % m, big)) for m in res["widths"]]
    wins = sum(1 for _, a, b in clip if b < a)
    cm = res["models"]["clipped"]
    w("3. **Weight clipping makes the network more robust at little cost in clean accuracy** (paper: "
      "training with w_max = 0.1 lowers the robust error at p = 1%% substantially while the clean error "
      "stays about the same). Ours at p=%g%%, `uint<m>` normal vs clipped: %s (clipping lower at %d of %d "
      "widths); clean fp32 error %s vs %s.%s" % (
          100 * big, ", ".join("m=%d %s vs %s" % (m, _fmt(a), _fmt(b)) for m, a, b in clip), wins, len(clip),
          _fmt(1 - res["models"]["normal"]["fp32_accuracy"]), _fmt(1 - cm["fp32_accuracy"]),
          "" if "at_bound" not in cm else
          " With clipping every layer's range is [-w_max, w_max] (%.0f%% of the weights end at a bound); "
          "unclipped, each layer's range is set by its own largest weights (up to %.2f here). The paper "
          "explains the gain by redundancy: with every weight bounded, the network spreads what it "
          "computes over more weights, and one corrupted weight matters less." % (
              100 * cm["at_bound"], res["models"]["normal"]["max_abs_weight"])))
    w("")
    low = [m for m in res["widths"] if m <= 4]
    if low:
        w("4. **Lower precision** (the paper reports clipping, and its random bit error training, at 4 bits "
          "and fewer too, where one bit error moves a weight by a larger share of the range). Ours, "
          "clipped `uint<m>` at p=%g%%: %s." % (
              100 * big, ", ".join("m=%d %s (clean %s)" % (
                  m, _fmt(err("clipped", "uint%d" % m, big)),
                  _fmt(1 - _sweep(res, "clipped", "uint%d" % m)["golden_accuracy"])) for m in res["widths"])))
        w("")
    if res["profiled"]:
        w("5. **Profiled errors are not random errors** (paper: bit errors profiled on chips are "
          "spatially patterned and partly stuck-at, so what they do depends on the stored data; the paper "
          "replays them at random offsets of the weights in memory). Ours: %s A generated map is only a "
          "stand-in: with a measured one, the same spec replays a real chip." % profiled_verdict(res))
        w("")
    w("**Where we differ, and why.** The model has %d parameters and the data are 16x16 digits, not "
      "CIFAR-10 and ResNets of millions of weights; training is minutes, not hundreds of epochs; we do "
      "not train with random bit errors (the paper's RandBET), only with clipping and quantization-aware "
      "fine-tuning; and our error map is generated, not measured. The trends, not the percentages, are "
      "what carries over." % res["models"]["normal"]["params"])


def profiled_verdict(res):
    mp = res["map"]
    eff = (mp["cells"]["flip"] + 0.5 * (mp["cells"]["stuck_at_0"] + mp["cells"]["stuck_at_1"])) / (mp["rows"] * mp["cols"])
    pairs = []
    for p in res["profiled"]:
        s = _sweep(res, p["model"], p["repr"])
        row = _at(s, 0.01) if s else None
        if row:
            pairs.append((p["model"], p["repr"], 1 - p["mean"], 1 - row[1]))
    lower = sum(1 for _, _, a, b in pairs if a < b)
    clip_helps = all(a_c < a_n for (mn, rn, a_n, _) in pairs for (mc, rc, a_c, _) in pairs
                     if mn == "normal" and mc == "clipped" and rn == rc)
    return ("the map corrupts about %.2f%% of the stored bits, fewer than random errors at p = 1%%, and its "
            "test error is below theirs in %d of %d cases; clipping %s against the map as it does against "
            "random errors." % (100 * eff, lower, len(pairs), "helps" if clip_helps else "does not always help"))


def _fmt(x):
    return "–" if x is None else "%s%%" % _pct(x)


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        write(json.load(fh), sys.argv[2])
