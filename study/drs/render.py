#!/usr/bin/python3
"""Renders the DRS study's results (run_study.py's study.json and the result files it
lists) into docs/STUDY.md's DRS tables and figures.

    /usr/bin/python3 study/drs/render.py [--study build/study/drs/study.json]
        [--doc docs/STUDY.md] [--figures docs/study/drs] [--bitflip build/bitflip] [--print]

Rewrites only the part of --doc between <!-- drs-study:start --> and
<!-- drs-study:end --> (appended if the markers are absent), and the PNG figures in
--figures (matplotlib, Agg, 100 dpi: tens of KB each).  It also writes `bitflip report`'s
HTML beside --study (report_MODEL.html: a model's sweeps in fp32, fp16 and int8;
report_all.html: every model's fp32 sweep), which stays out of git, and the last one as
Markdown with SVG figures in --figures (report.md, report-figures/), which the page links.  Every number comes from the
result files; nothing is typed in.  --print writes the section to stdout instead.

The recovery of a protection at a rate is bitflip's (docs/MITIGATIONS.md):
(AUC_protected - AUC_faulty) / (AUC_golden - AUC_faulty) with a paired-bootstrap 95%
interval, null where the faults did not lower the AUC.
"""
import argparse
import json
import math
import os
import sys

START, END = "<!-- drs-study:start -->", "<!-- drs-study:end -->"
CONFIGS = ["none", "clip", "sbp", "abft", "ecc"]
PROTECTIONS = CONFIGS[1:]
# a rate's mean AUC more than this below golden is "degraded"; below COLLAPSE, "collapsed"
ONSET = 0.01
COLLAPSE = 0.55
# recoveries where the faults cost less than this are noise (docs/MITIGATIONS.md)
SMALL_LOSS = 1e-3


def load(path):
    with open(path) as f:
        return json.load(f)


def fmt_rate(r):
    e = math.log10(r)
    return f"1e{int(round(e))}" if abs(e - round(e)) < 1e-9 else f"{r:g}"


def fmt_ci(m, digits=3):
    if m is None or m.get("mean") is None:
        return "–"
    lo, hi = (m.get("ci") or [None, None])
    s = f"{m['mean']:.{digits}f}"
    if lo is not None and hi is not None:
        s += f" [{lo:.{digits}f}, {hi:.{digits}f}]"
    return s


def z(x):
    """x, with a value that rounds to zero shown as 0 (not -0.00)."""
    return 0.0 if abs(x) < 0.005 else x


def fmt_rec(rec, loss):
    if rec is None or rec.get("value") is None:
        return "–"
    v = rec["value"]
    if loss is not None and loss < SMALL_LOSS:
        return f"{z(v):.2f}‡"
    lo, hi = rec.get("ci") or [None, None]
    s = f"{z(v):.2f}"
    if lo is not None and hi is not None:
        s += f" [{z(lo):.2f}, {z(hi):.2f}]"
    return s


def pct(x):
    return "–" if x is None else f"{100 * x:.0f}%"


class Study:
    def __init__(self, path):
        self.path = path
        self.s = load(path)
        self.zoo = self.s["zoo"]
        self.results = {}
        for c in self.s["campaigns"]:
            self.results[c["name"]] = (c, load(c["result"]))
        self.models = [m for m in self.zoo["models"]
                       if any(c["model"] == m for c in self.s["campaigns"])]

    def sweep(self, model, rep):
        return self.results.get(f"sweep_{model}_{rep}", (None, None))[1]

    def tables(self, model):
        return [(c, r) for c, r in self.results.values() if c["kind"] == "table" and c["model"] == model]


def config(res, name):
    for m in res.get("mitigations", []):
        if m["name"] == name:
            return m
    return None


def rate_rows(res, name):
    """Per rate of configuration NAME: (rate, auc metrics, critical rate, due rate, recovery)."""
    m = config(res, name)
    rows = []
    for j, br in enumerate(m["by_rate"] if m else res["by_rate"]):
        rows.append((br["rate"], br["metrics"].get("auc"), br["critical"]["rate"],
                     br["due"]["rate"], br.get("recovery")))
    return rows


def onset_collapse(res):
    g = res["golden"]["auc"]
    onset = collapse = None
    for rate, auc, *_ in rate_rows(res, "none"):
        if auc is None or auc.get("mean") is None:
            continue
        if onset is None and auc["mean"] < g - ONSET:
            onset = rate
        if collapse is None and auc["mean"] < COLLAPSE:
            collapse = rate
    return onset, collapse


def best_recovery(res, name):
    """The largest per-rate recovery of NAME where the faults cost at least SMALL_LOSS."""
    best = None
    for rate, _, _, _, rec in rate_rows(res, name):
        if rec is None or rec.get("value") is None:
            continue
        if rec["golden"] - rec["faulty"] < SMALL_LOSS:
            continue
        if best is None or rec["value"] > best[1]["value"]:
            best = (rate, rec)
    return best


def figures(st, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("render: matplotlib is missing (python3-matplotlib): no figures", file=sys.stderr)
        return []
    os.makedirs(outdir, exist_ok=True)
    made = []
    reps = st.s["representations"]
    # 1. AUC vs BER, unprotected, one panel per representation
    fig, axes = plt.subplots(1, len(reps), figsize=(4 * len(reps), 3.2), sharey=True, squeeze=False)
    for ax, rep in zip(axes[0], reps):
        for m in st.models:
            res = st.sweep(m, rep)
            if not res:
                continue
            rows = [(r, a["mean"]) for r, a, *_ in rate_rows(res, "none") if a and a.get("mean") is not None]
            ax.plot([r for r, _ in rows], [v for _, v in rows], marker="o", ms=3, label=m)
        ax.set_xscale("log")
        ax.set_title(f"{rep}, unprotected")
        ax.set_xlabel("bit error rate")
        ax.axhline(0.5, color="grey", lw=0.5, ls=":")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("mean AUC")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    p = os.path.join(outdir, "auc_vs_ber.png")
    fig.savefig(p, dpi=100)
    plt.close(fig)
    made.append(p)
    # 2. protections, fp32, one column per model: mean AUC (top), and the critical
    # (solid) and DUE (dashed) shares of the trials (bottom), which is where protections
    # that all keep the golden AUC (sbp, abft, ecc) differ
    fig, axes = plt.subplots(2, len(st.models), figsize=(3.2 * len(st.models), 5.6), sharey="row",
                             sharex=True, squeeze=False)
    for k, m in enumerate(st.models):
        res = st.sweep(m, "fp32") or st.sweep(m, reps[0])
        if not res:
            continue
        ax, bx = axes[0][k], axes[1][k]
        for j, cname in enumerate(CONFIGS):
            if config(res, cname) is None:
                continue
            col = f"C{j}"
            rows = [(r, a["mean"]) for r, a, *_ in rate_rows(res, cname) if a and a.get("mean") is not None]
            ax.plot([r for r, _ in rows], [v for _, v in rows], marker="o", ms=3, color=col, label=cname)
            rr = rate_rows(res, cname)
            bx.plot([r[0] for r in rr], [100 * (r[2] or 0) for r in rr], marker="o", ms=3, color=col,
                    label=f"{cname} critical")
            bx.plot([r[0] for r in rr], [100 * (r[3] or 0) for r in rr], marker="x", ms=3, ls="--", color=col,
                    label=f"{cname} DUE")
        ax.set_xscale("log")
        ax.set_title(m)
        ax.grid(alpha=0.3)
        bx.set_xscale("log")
        bx.set_xlabel("bit error rate")
        bx.grid(alpha=0.3)
    axes[0][0].set_ylabel("mean AUC (fp32)")
    axes[1][0].set_ylabel("% of trials: critical (solid)\nDUE (dashed)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    p = os.path.join(outdir, "protections.png")
    fig.savefig(p, dpi=100)
    plt.close(fig)
    made.append(p)
    # 3. per-table AUC loss vs table size
    fig, ax = plt.subplots(figsize=(6, 3.6))
    marks = "osD^v"
    for k, m in enumerate(st.models):
        pts = [(c["rows"] * c["dim"], r["golden"]["auc"] - r["summary"]["metrics"]["auc"]["mean"], c["dim"])
               for c, r in st.tables(m) if c.get("rows")]
        if not pts:
            continue
        ax.scatter([x for x, _, _ in pts], [max(y, 1e-5) for _, y, _ in pts], s=14, marker=marks[k % 5],
                   label=m, alpha=0.7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("table parameters (rows x dim)")
    ax.set_ylabel(f"AUC loss at BER {fmt_rate(st.s['table_rate'])}\n(losses <= 1e-5 drawn at 1e-5)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    p = os.path.join(outdir, "tables.png")
    fig.savefig(p, dpi=100)
    plt.close(fig)
    made.append(p)
    return made


def rec_at(res, name, rate):
    """(recovery dict or None, due rate) of NAME at RATE."""
    for r, _, _, due, rec in rate_rows(res, name):
        if r == rate:
            return rec, due
    return None, None


def per_flip(st, model):
    """(median AUC loss per expected flip over the tables, the MLPs' loss per flip)."""
    tab, mlp = [], None
    for c, r in st.tables(model):
        flips = r["campaign"]["population"] * st.s["table_rate"]
        if flips <= 0:
            continue
        loss = r["golden"]["auc"] - r["summary"]["metrics"]["auc"]["mean"]
        if c["table"] == "mlp":
            mlp = loss / flips
        else:
            tab.append(loss / flips)
    tab.sort()
    med = tab[len(tab) // 2] if tab else None
    return med, mlp


def ecc_cell(res):
    """ECC over a sweep in a few words: its critical trials, the highest rate where it
    corrected everything (0 DUE), and its DUE share at each higher rate up to the first
    that is all DUE, e.g. "0 of 80; 0% to 1e-6, 1e-5: 90%, 1e-4: 100%"."""
    if config(res, "ecc") is None:
        return "–"
    rows = rate_rows(res, "ecc")
    n = config(res, "ecc")["summary"]["trials"]
    crit = config(res, "ecc")["summary"]["outcomes"]["critical"]
    clean = [r for r, _, _, due, _ in rows if not due]
    parts = []
    if clean:
        parts.append(f"0% to {fmt_rate(max(clean))}")
    for r, _, _, due, _ in rows:
        if due and (not clean or r > max(clean)):
            parts.append(f"{fmt_rate(r)}: {pct(due)}")
            if due >= 1:
                break
    return f"{crit} of {n}; " + ", ".join(parts)


def beside(st):
    """The paper's claims with our measurement of each, per model (fp32)."""
    s = st.s
    top = max(s["rates"])
    L = ["| model | AUC degrades from (onset) | collapses at (AUC < 0.55) | clip recovery at "
         f"{fmt_rate(top)} | clip's best | sbp recovery at {fmt_rate(top)} | abft recovery at {fmt_rate(top)} "
         "(DUE) | ecc: critical trials; DUE by rate | AUC loss per flip: tables (median) / MLPs | int8 AUC at "
         + fmt_rate(top) + " |",
         "| --- | ---: | ---: | --- | --- | --- | --- | --- | --- | --- |"]
    for m in st.models:
        res = st.sweep(m, "fp32")
        if not res:
            continue
        on, co = onset_collapse(res)
        cells = [fmt_rate(on) if on else "none", fmt_rate(co) if co else "none"]
        rec, _ = rec_at(res, "clip", top)
        cells.append(fmt_rec(rec, None))
        b = best_recovery(res, "clip")
        cells.append(f"{fmt_rec(b[1], None)} @ {fmt_rate(b[0])}" if b else "–")
        rec, _ = rec_at(res, "sbp", top)
        cells.append(fmt_rec(rec, None))
        rec, due = rec_at(res, "abft", top)
        cells.append(f"{fmt_rec(rec, None)} ({pct(due)})")
        cells.append(ecc_cell(res))
        med, mlp = per_flip(st, m)
        clean = lambda x: 0.0 if abs(x) < 1e-9 else x   # noqa: E731  (float noise of a zero loss)
        cells.append(f"{clean(med):.2g} / {clean(mlp):.2g}" if med is not None and mlp is not None else "–")
        q = st.sweep(m, "int8")
        if q:
            a = [x for r, x, *_ in rate_rows(q, "none") if r == top][0]
            cells.append(f"{a['mean']:.4f} (golden {q['golden']['auc']:.4f})" if a else "–")
        else:
            cells.append("–")
        L.append(f"| {m} | " + " | ".join(cells) + " |")
    return L


def used(s, name):
    """Whether the study ran configuration NAME (an older study.json may have no ecc)."""
    return any((m if isinstance(m, str) else m.get("name")) == name for m in s.get("mitigations", ["none"]))


def section(st, figdir, docdir):
    s, z = st.s, st.zoo
    rel = os.path.relpath(figdir, docdir)
    L = []
    L.append("Generated by `study/drs/render.py` from the results of `make study-drs` "
             "(edit the scripts, not this section).")
    L.append("")
    quick = z["cap"] != 200000 or s["repeats"] < 10
    secs = [c["seconds"] for c in s["campaigns"] if c.get("seconds") is not None]
    resumed = sum(1 for c in s["campaigns"] if c.get("resumed"))
    took = "run elsewhere (`run_study.py --specs-only`)" if not secs else \
        f"{sum(secs):.0f} s of campaigns" + (f" ({resumed} of them kept from an earlier run with --resume)"
                                             if resumed else "")
    L.append(f"- Run: {s['started']}, {took} for {len(s['campaigns'])} campaigns "
             f"(`bitflip run --local --threads {s['threads']}`), {s['machine']['nproc']} cores, load average "
             f"{s['machine']['loadavg_start'][0]:.1f} at the start and {s['machine']['loadavg_end'][0]:.1f} at the end; "
             f"**{'QUICK mode (a smaller cap, fewer repeats): read the shapes, not the digits' if quick else 'the full study'}**.")
    L.append(f"- Zoo: tables of Criteo Kaggle's cardinalities capped at {z['cap'] or 'no cap':,} rows "
             f"({sum(z['table_rows']):,} rows in all), dim {z['dim']}; synthetic log with Zipf exponent "
             f"{z['zipf']}, {z['train_samples']:,} training samples ({z['epochs']} pass), "
             f"{z['eval_samples']:,} eval samples (click rate {z['click_rate_eval']:.3f}); the planted "
             f"teacher's AUC on the eval set: {z['teacher_auc']:.4f}.")
    L.append(f"- Campaigns: BER sweep over every weight at {', '.join(fmt_rate(r) for r in s['rates'])}, "
             f"{s['repeats']} trials per rate, configurations {', '.join(c for c in CONFIGS if used(s, c))} "
             f"on the same faults, in "
             f"{', '.join(s['representations'])}; per-table campaigns at BER {fmt_rate(s['table_rate'])}, fp32, "
             f"{s['repeats']} trials each. Seed {s['seed']}.")
    L.append("")
    L.append("#### Beside the paper, in one table")
    L.append("")
    L.append("fp32 storage, BER over every weight; recoveries with their 95% paired-bootstrap interval "
             "(a DUE trial counts as recovered); the AUC loss per flip comes from the per-table campaigns "
             "(loss over expected flips in the tensor); the sections below have every number behind these.")
    L.append("")
    L += beside(st)
    L.append("")
    L.append(f"`bitflip report`'s figures of the same fp32 sweeps (BER curves with bands, outcomes, "
             f"recovery): [{rel}/report.md]({rel}/report.md).")
    L.append("")
    L.append("#### The zoo")
    L.append("")
    L.append("| model | parameters | in tables | golden AUC (PyTorch) | golden AUC (bitflip fp32 / fp16 / int8) | training | ONNX |")
    L.append("| --- | ---: | ---: | ---: | --- | ---: | ---: |")
    for m in st.models:
        mi = z["models"][m]
        g = []
        for rep in ("fp32", "fp16", "int8"):
            res = st.sweep(m, rep)
            g.append(f"{res['golden']['auc']:.4f}" if res else "–")
        L.append(f"| {m} | {mi['parameters']:,} | {100 * mi['table_parameters'] / mi['parameters']:.1f}% | "
                 f"{mi['golden_auc_torch']:.4f} | {' / '.join(g)} | {mi['train_seconds']:.0f} s | "
                 f"{mi['onnx_bytes'] / 2**20:.1f} MiB |")
    L.append("")
    L.append("#### AUC against the bit error rate")
    L.append("")
    L.append(f"![mean AUC against BER, per model and storage format]({rel}/auc_vs_ber.png)")
    L.append("")
    L.append(f"Where it degrades and collapses (unprotected): *onset* is the lowest rate whose mean AUC "
             f"is more than {ONSET} below golden, *collapse* the lowest whose mean AUC is below {COLLAPSE}; "
             f"flips per trial at a rate = rate × the model's bits in that format.")
    L.append("")
    L.append("| model | format | bits | onset | flips at onset | collapse | flips at collapse |")
    L.append("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for m in st.models:
        for rep in s["representations"]:
            res = st.sweep(m, rep)
            if not res:
                continue
            bits = res["campaign"]["population"]
            on, co = onset_collapse(res)
            L.append(f"| {m} | {rep} | {bits:.3g} | {fmt_rate(on) if on else 'none'} | "
                     f"{f'{on * bits:.3g}' if on else '–'} | {fmt_rate(co) if co else 'none'} | "
                     f"{f'{co * bits:.3g}' if co else '–'} |")
    L.append("")
    L.append("Per rate, mean AUC [95% interval] unprotected, and the share of trials with NaN/Inf outputs (DUE):")
    L.append("")
    for m in st.models:
        L.append(f"<details><summary>{m}</summary>")
        L.append("")
        hdr = "| rate | " + " | ".join(f"{rep}: AUC | {rep}: DUE" for rep in s["representations"]) + " |"
        L.append(hdr)
        L.append("| ---: | " + " | ".join("--- | ---:" for _ in s["representations"]) + " |")
        per = {rep: rate_rows(st.sweep(m, rep), "none") for rep in s["representations"] if st.sweep(m, rep)}
        for j, rate in enumerate(s["rates"]):
            cells = []
            for rep in s["representations"]:
                if rep not in per:
                    cells += ["–", "–"]
                    continue
                _, auc, _, due, _ = per[rep][j]
                cells += [fmt_ci(auc), pct(due)]
            L.append(f"| {fmt_rate(rate)} | " + " | ".join(cells) + " |")
        L.append("")
        L.append("</details>")
        L.append("")
    L.append("#### What the protections recover")
    L.append("")
    L.append(f"![mean AUC against BER with each protection, fp32]({rel}/protections.png)")
    L.append("")
    L.append("Best recovery of each protection over the rates where the faults cost at least "
             f"{SMALL_LOSS} AUC (value [95% paired-bootstrap interval] @ rate; a DUE trial counts as recovered, "
             "docs/MITIGATIONS.md), with its DUE rate there:")
    L.append("")
    L.append("| model | format | " + " | ".join(PROTECTIONS) + " |")
    L.append("| --- | --- | " + " | ".join("---" for _ in PROTECTIONS) + " |")
    for m in st.models:
        for rep in s["representations"]:
            res = st.sweep(m, rep)
            if not res:
                continue
            cells = []
            for cname in PROTECTIONS:
                b = best_recovery(res, cname)
                if b is None:
                    cells.append("–")
                    continue
                rate, rec = b
                due = [d for r, _, _, d, _ in rate_rows(res, cname) if r == rate][0]
                cells.append(f"{fmt_rec(rec, None)} @ {fmt_rate(rate)} (DUE {pct(due)})")
            L.append(f"| {m} | {rep} | " + " | ".join(cells) + " |")
    L.append("")
    L.append("Per rate (fp32): mean AUC per configuration · its critical / DUE shares of the trials "
             "(critical: the outputs wrong enough to count; DUE: a detection, an uncorrectable ECC word, "
             "or NaN/Inf outputs), and recovery [95% interval] "
             "(‡: the faults cost less than 0.001 AUC there, the ratio is noise; –: they cost nothing):")
    L.append("")
    for m in st.models:
        res = st.sweep(m, "fp32")
        if not res:
            continue
        L.append(f"<details><summary>{m}, fp32</summary>")
        L.append("")
        L.append("| rate | " + " | ".join(CONFIGS) + " | " + " | ".join(f"{c} recovery" for c in PROTECTIONS) + " |")
        L.append("| ---: | " + " | ".join("---" for _ in CONFIGS + PROTECTIONS) + " |")
        per = {c: rate_rows(res, c) for c in CONFIGS if config(res, c)}
        for j, rate in enumerate(s["rates"]):
            aucs = [f"{per[c][j][1]['mean']:.4f} · {pct(per[c][j][2])} / {pct(per[c][j][3])}"
                    if c in per and per[c][j][1] and per[c][j][1].get("mean") is not None
                    else "–" for c in CONFIGS]
            loss = None
            if per["none"][j][1] and per["none"][j][1].get("mean") is not None:
                loss = res["golden"]["auc"] - per["none"][j][1]["mean"]
            recs = [fmt_rec(per[c][j][4], loss) if c in per else "–" for c in PROTECTIONS]
            L.append(f"| {fmt_rate(rate)} | " + " | ".join(aucs + recs) + " |")
        L.append("")
        L.append("</details>")
        L.append("")
    L.append("Cost of each protection (fp32; bitflip's measurement: one golden pass with it over one without, "
             "and protected bits, ECC check bits, checksums and bounds over the parameters' bits; ECC's check "
             "runs in the memory controller, so its pass is the unprotected one and its time ratio is timing noise):")
    L.append("")
    L.append("| model | " + " | ".join(f"{c} time" for c in PROTECTIONS) + " | "
             + " | ".join(f"{c} storage" for c in PROTECTIONS) + " |")
    L.append("| --- | " + " | ".join("---:" for _ in PROTECTIONS + PROTECTIONS) + " |")
    for m in st.models:
        res = st.sweep(m, "fp32")
        if not res:
            continue
        cs = [config(res, c) for c in PROTECTIONS]
        L.append(f"| {m} | " + " | ".join(f"{c['cost']['time_ratio']:.2f}x" if c else "–" for c in cs) + " | " +
                 " | ".join(f"{100 * c['cost']['storage_overhead']:.3g}%" if c else "–" for c in cs) + " |")
    L.append("")
    L.append("#### Which tables matter")
    L.append("")
    L.append(f"![AUC loss against table size, per model]({rel}/tables.png)")
    L.append("")
    L.append(f"Faults confined to one tensor at a time, BER {fmt_rate(s['table_rate'])}, fp32: the five tensors "
             "whose errors cost the most AUC per model, the MLPs (every Gemm weight) for comparison, and the "
             "correlation over all tables between the AUC loss and the table's size:")
    L.append("")
    L.append("| model | tensor | rows | dim | expected flips | mean AUC loss [95% interval] | DUE |")
    L.append("| --- | --- | ---: | ---: | ---: | --- | ---: |")
    for m in st.models:
        tabs = st.tables(m)
        if not tabs:
            continue
        items = []
        for c, r in tabs:
            a = r["summary"]["metrics"]["auc"]
            g = r["golden"]["auc"]
            loss = g - a["mean"]
            ci = a.get("ci") or [None, None]
            lci = f"[{g - ci[1]:.4f}, {g - ci[0]:.4f}]" if None not in ci else ""
            items.append((loss, c, r, lci))
        items.sort(key=lambda x: -x[0])
        mlp = [x for x in items if x[1]["table"] == "mlp"]
        top = [x for x in items if x[1]["table"] != "mlp"][:5]
        for loss, c, r, lci in top + mlp:
            flips = r["campaign"]["population"] * s["table_rate"]
            L.append(f"| {m} | {c['table']} | {c['rows'] if c.get('rows') else '–'} | {c['dim'] if c.get('dim') else '–'} | "
                     f"{flips:.3g} | {loss:.4f} {lci} | {pct(r['summary']['rates']['due']['rate'])} |")
        xs = [(math.log10(c["rows"] * c["dim"]), loss) for loss, c, _, _ in items if c.get("rows")]
        if len(xs) > 2:
            rk = spearman([x for x, _ in xs], [y for _, y in xs])
            L.append(f"| {m} | *Spearman ρ (loss, table size) over {len(xs)} tables* | | | | {rk:.2f} | |")
    L.append("")
    return "\n".join(L)


def spearman(x, y):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(v):
            j = i
            while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else float("nan")


def reports(st, bitflip, outdir, figdir):
    """bitflip report's HTML: per model its sweeps in each storage format overlaid, and every
    model's fp32 sweep together; and that last one as Markdown with SVG figures into
    FIGDIR (report.md, committed with the page).  Skipped, with a note, where the binary
    fails."""
    import subprocess
    if not bitflip or not os.access(bitflip, os.X_OK):
        print(f"render: no bitflip binary at {bitflip}: no HTML reports", file=sys.stderr)
        return []
    jobs = []
    for m in st.models:
        res = [(rep, f"sweep_{m}_{rep}") for rep in st.s["representations"] if f"sweep_{m}_{rep}" in st.results]
        if res:
            jobs.append((os.path.join(outdir, f"report_{m}.html"), f"DRS study: {m}, BER sweeps by storage format",
                         [(rep, st.results[n][0]["result"]) for rep, n in res]))
    fp32 = [(m, st.results[f"sweep_{m}_fp32"][0]["result"]) for m in st.models if f"sweep_{m}_fp32" in st.results]
    if fp32:
        jobs.append((os.path.join(outdir, "report_all.html"), "DRS study: every model, fp32", fp32))
        jobs.append((os.path.join(figdir, "report.md"), "DRS study: every model, fp32", fp32))
    made = []
    for out, title, items in jobs:
        cmd = [bitflip, "report", "-o", out, "--title", title]
        for lab, _ in items:
            cmd += ["--label", lab]
        cmd += [p for _, p in items]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"render: bitflip report failed ({p.stderr.strip()[:300]}): no HTML reports", file=sys.stderr)
            return made
        made.append(out)
    return made


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", default="build/study/drs/study.json")
    ap.add_argument("--doc", default="docs/STUDY.md")
    ap.add_argument("--figures", default="docs/study/drs")
    ap.add_argument("--print", action="store_true")
    ap.add_argument("--bitflip", default="build/bitflip",
                    help="the binary whose `bitflip report` writes HTML reports beside --study")
    a = ap.parse_args(argv)
    if not os.path.exists(a.study):
        print(f"render: {a.study} is missing: run the study first (make study-drs)", file=sys.stderr)
        return 1
    st = Study(a.study)
    figures(st, a.figures)
    for r in reports(st, a.bitflip, os.path.dirname(os.path.abspath(a.study)), a.figures):
        print(f"render: {r}", file=sys.stderr)
    text = section(st, a.figures, os.path.dirname(os.path.abspath(a.doc)) if not a.print else ".")
    if a.print:
        print(text)
        return 0
    doc = open(a.doc).read() if os.path.exists(a.doc) else ""
    block = f"{START}\n\n{text}\n{END}"
    if START in doc and END in doc:
        doc = doc[:doc.index(START)] + block + doc[doc.index(END) + len(END):]
    else:
        doc = doc + ("\n" if doc and not doc.endswith("\n") else "") + block + "\n"
    with open(a.doc, "w") as f:
        f.write(doc)
    print(f"render: {a.doc} and {a.figures}/*.png rewritten", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
