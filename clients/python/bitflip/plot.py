"""Figures of a result with matplotlib: the figures of the DRS study from one result.

- :func:`metric_vs_ber`: a metric against the bit error rate, with confidence
  bands; several results (or one result's protections) overlaid;
  :func:`perplexity_vs_ber` the same for a language model's perplexity.
- :func:`layer_vulnerability`, :func:`bit_vulnerability`: the critical (or DUE)
  rate per tensor and per bit position, with intervals.
- :func:`mitigation_recovery`: what each protection recovers, with its paired
  bootstrap interval (per rate for a BER sweep).
- :func:`summary`: the panels that apply to a result, in one figure.

Each draws on ``ax`` (a new figure's axes by default) and returns the axes.
matplotlib is imported when a function is called; tests use the Agg backend.
"""
import math

from .errors import BitflipError, need
from .result import Result


def _plt():
    return need("matplotlib.pyplot", "bitflip.plot")


def _ax(ax, size=(6, 4)):
    if ax is not None:
        return ax
    return _plt().subplots(figsize=size)[1]


def _bars(v, lo, hi):
    # matplotlib wants distances below and above, never negative
    return [max(0.0, v - lo) if not math.isnan(lo) else 0.0 for v, lo in zip(v, lo)], \
           [max(0.0, hi - v) if not math.isnan(hi) else 0.0 for v, hi in zip(v, hi)]


def _results(results, labels):
    if isinstance(results, Result):
        results = [results]
    if isinstance(results, dict):
        labels, results = list(results.keys()), list(results.values())
    results = list(results)
    if labels is None:
        labels = [None] * len(results)
    if len(labels) != len(results):
        raise BitflipError(f"{len(labels)} labels for {len(results)} results")
    return results, labels


def _curves(result, metric, protections):
    """(label, rates, means, los, his) per curve of a BER result."""
    out = []
    if protections and result.mitigations:
        for m in result.mitigations:
            pts = [(g["rate"], g.get("metrics", {}).get(metric)) for g in m.get("by_rate", [])]
            out.append((m.get("name"), pts))
    else:
        out.append((None, [(g["rate"], g.get("metrics", {}).get(metric)) for g in result.doc.get("by_rate", [])]))
    curves = []
    for name, pts in out:
        pts = [(r, m) for r, m in pts if m]
        if not pts:
            continue
        rates = [r for r, _ in pts]
        mean = [m["mean"] if m.get("mean") is not None else math.nan for _, m in pts]
        lo = [(m.get("ci") or [None, None])[0] for _, m in pts]
        hi = [(m.get("ci") or [None, None])[1] for _, m in pts]
        lo = [mv if v is None else v for v, mv in zip(lo, mean)]
        hi = [mv if v is None else v for v, mv in zip(hi, mean)]
        curves.append((name, rates, mean, lo, hi))
    return curves


def metric_vs_ber(results, metric=None, *, labels=None, ax=None, protections=True, golden=True):
    """A metric (default: the task's, AUC or accuracy) against the bit error rate,
    mean and confidence band per rate. ``results``: one Result, a list, or
    ``{label: Result}``; a result with ``mitigations`` draws one curve per
    protection (``protections=False``: the unprotected model only)."""
    results, labels = _results(results, labels)
    ax = _ax(ax)
    metric = metric or results[0].task_metric
    drawn = 0
    styles = [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", "-"), ("P", "--")]
    for res, label in zip(results, labels):
        if not res.rates:
            raise BitflipError("metric_vs_ber needs a BER sweep (faults.model 'ber' with 'rates'); this result has "
                               f"fault model {res.doc['campaign'].get('fault_model')!r}")
        for name, rates, mean, lo, hi in _curves(res, metric, protections):
            text = " / ".join(x for x in (label, name) if x) or metric
            marker, ls = styles[drawn % len(styles)]   # curves that coincide stay visible
            line, = ax.plot(rates, mean, marker=marker, ls=ls, ms=4, label=text)
            ax.fill_between(rates, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
            drawn += 1
        g = res.golden.get(metric)
        if golden and g is not None:
            ax.axhline(g, color="0.5", ls="--", lw=0.8)
    if not drawn:
        raise BitflipError(f"no result has metric {metric!r} per rate; pick one of the metrics the campaign reports")
    ax.set_xscale("log")
    ax.set_xlabel("bit error rate")
    ax.set_ylabel(metric + " (mean, 95% band; dashed: golden)")
    ax.set_title(f"{metric} under bit errors")
    if drawn > 1 or labels[0]:
        ax.legend(fontsize="small")
    return ax


def perplexity_vs_ber(results, *, labels=None, ax=None, protections=True, golden=True, log=True):
    """A language model's perplexity against the bit error rate: :func:`metric_vs_ber`
    with metric ``perplexity`` on a log scale (``log=False``: linear), since a
    few exponent-bit flips take it from near 1 to thousands."""
    results, labels = _results(results, labels)
    for res in results:
        if "perplexity" not in res.golden:
            raise BitflipError("perplexity_vs_ber needs a language model's result (task language_model: golden "
                               f"perplexity); this one has golden metrics {sorted(res.golden)}")
    ax = metric_vs_ber(results, "perplexity", labels=labels, ax=ax, protections=protections, golden=golden)
    if log:
        ax.set_yscale("log")
    ax.set_title("perplexity under bit errors")
    return ax


def layer_vulnerability(result, *, outcome="critical", top=20, ax=None):
    """The ``outcome`` rate (critical or due) per fault site, most vulnerable first,
    with intervals; labelled by PyTorch name where there is one."""
    rows = [r for r in result.rows("tensors") if r["trials"] > 0]
    if not rows:
        raise BitflipError("no tensor has trials in this result (a BER sweep counts per rate, not per tensor)")
    rows.sort(key=lambda r: -r[f"{outcome}_rate"])
    rows = rows[:top][::-1]
    ax = _ax(ax, (6, max(2.5, 0.3 * len(rows) + 1)))
    v = [r[f"{outcome}_rate"] for r in rows]
    lo, hi = _bars(v, [r[f"{outcome}_lo"] for r in rows], [r[f"{outcome}_hi"] for r in rows])
    ax.barh(range(len(rows)), v, xerr=[lo, hi], capsize=2)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r["torch_name"] or r["tensor"] for r in rows], fontsize="small")
    ax.set_xlabel(f"{outcome} rate per fault (95% interval)")
    ax.set_title("per-layer vulnerability")
    return ax


def bit_vulnerability(result, *, outcome="critical", ax=None):
    """The ``outcome`` rate per bit position of the faults, with intervals."""
    rows = [r for r in result.rows("bits") if r["trials"] > 0]
    if not rows:
        raise BitflipError("no per-bit counts in this result (multi-bit and BER faults are counted per bit "
                           "only when one bit changes)")
    ax = _ax(ax, (7, 3.5))
    v = [r[f"{outcome}_rate"] for r in rows]
    lo, hi = _bars(v, [r[f"{outcome}_lo"] for r in rows], [r[f"{outcome}_hi"] for r in rows])
    ax.bar([r["bit"] for r in rows], v, yerr=[lo, hi], capsize=2)
    ax.set_xlabel("bit position (0 = least significant)")
    ax.set_ylabel(f"{outcome} rate (95% interval)")
    ax.set_title("per-bit vulnerability")
    return ax


def mitigation_recovery(result, *, ax=None):
    """Each protection's recovery of the metric lost to faults, with its paired
    bootstrap interval; for a BER sweep, grouped by rate."""
    mits = [m for m in result.mitigations if m.get("name") != "none"]
    if not mits:
        raise BitflipError("this result has no mitigations: list protections under the spec's 'mitigations' "
                           "(docs/MITIGATIONS.md)")
    ax = _ax(ax, (7, 4))
    by_rate = result.rows("mitigation_rates")
    if by_rate:
        rates = sorted({r["rate"] for r in by_rate})
        width = 0.8 / len(mits)
        for k, m in enumerate(mits):
            rows = {r["rate"]: r for r in by_rate if r["name"] == m["name"]}
            v = [rows[x]["recovery"] if x in rows else math.nan for x in rates]
            lo, hi = _bars(v, [rows[x]["recovery_lo"] for x in rates], [rows[x]["recovery_hi"] for x in rates])
            ax.bar([i + (k - (len(mits) - 1) / 2) * width for i in range(len(rates))], v, width, yerr=[lo, hi],
                   capsize=2, label=m["name"])
        ax.set_xticks(range(len(rates)))
        ax.set_xticklabels([f"{x:.0e}" for x in rates])
        ax.set_xlabel("bit error rate")
        ax.legend(fontsize="small")
    else:
        rows = [r for r in result.rows("mitigations") if r["name"] != "none"]
        v = [r["recovery"] for r in rows]
        lo, hi = _bars(v, [r["recovery_lo"] for r in rows], [r["recovery_hi"] for r in rows])
        ax.bar(range(len(rows)), v, yerr=[lo, hi], capsize=3)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels([r["name"] for r in rows])
    ax.axhline(0, color="0.3", lw=0.8)
    ax.axhline(1, color="0.5", ls="--", lw=0.8)
    ax.set_ylabel(f"recovery of {result.task_metric} lost (95% interval)")
    ax.set_title("mitigation recovery")
    return ax


def summary(result, path=None, *, dpi=120):
    """The panels that apply to ``result`` in one figure (saved to ``path`` if
    given); returns the figure."""
    plt = _plt()
    panels = []
    if result.rates and result.task_metric == "perplexity":
        panels.append(lambda ax: perplexity_vs_ber(result, ax=ax))
    elif result.rates:
        panels.append(lambda ax: metric_vs_ber(result, ax=ax))
    else:
        if any(r["trials"] for r in result.rows("tensors")):
            panels.append(lambda ax: layer_vulnerability(result, ax=ax, top=12))
        if any(r["trials"] for r in result.rows("bits")):
            panels.append(lambda ax: bit_vulnerability(result, ax=ax))
    if any(m.get("name") != "none" for m in result.mitigations):
        panels.append(lambda ax: mitigation_recovery(result, ax=ax))
    if not panels:
        raise BitflipError("nothing to draw: the result has no trials per tensor, bit or rate")
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    for p, ax in zip(panels, axes[0]):
        p(ax)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=dpi)
    return fig
