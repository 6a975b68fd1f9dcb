"""Results as data: the result document (api/src/result_json.c) and the trial
records, read as pandas data frames.

A :class:`Result` is the same object whether the campaign ran locally
(``bitflip.run``) or on a daemon (``Client.result``): the document is the same.
"""
import json
import math

from .errors import BitflipError, need

OUTCOMES = ("masked", "tolerable", "critical", "due")
TABLES = ("outcomes", "metrics", "tensors", "bits", "rates", "mitigations", "mitigation_rates")


def _nan(v):
    return float("nan") if v is None else v


def _ci(o):
    ci = (o or {}).get("ci") or [None, None]
    return _nan(ci[0]), _nan(ci[1])


def _group_row(g):
    """The columns every group (a tensor, a bit, a rate) has: counts, rates, intervals."""
    row = {"trials": g.get("trials", 0)}
    for k in OUTCOMES:
        row[k] = g.get("outcomes", {}).get(k, 0)
    for which in ("critical", "due"):
        r = g.get(which) or {}
        lo, hi = _ci(r)
        row[f"{which}_rate"] = _nan(r.get("rate"))
        row[f"{which}_lo"] = lo
        row[f"{which}_hi"] = hi
        # the design's standard error and effective sample size (docs/STATISTICS.md):
        # for a stratified or adaptive design the interval rests on n_eff, not trials
        if "se" in r or "n_eff" in r:
            row[f"{which}_se"] = _nan(r.get("se"))
            row[f"{which}_n_eff"] = _nan(r.get("n_eff"))
    pvf = g.get("pvf")
    if pvf is not None:   # a tensor's PVF: critical or DUE, with its interval
        lo, hi = _ci(pvf)
        row["pvf"] = _nan(pvf.get("rate"))
        row["pvf_lo"] = lo
        row["pvf_hi"] = hi
    iv = g.get("ivmod")
    if iv is not None:   # detection and segmentation: the share of images made critical
        lo, hi = _ci(iv)
        row["critical_images"] = iv.get("critical_images", 0)
        row["images"] = iv.get("images", 0)
        row["ivmod"] = _nan(iv.get("rate"))
        row["ivmod_lo"] = lo
        row["ivmod_hi"] = hi
    return row


def _metric_cols(row, metrics):
    for name, m in (metrics or {}).items():
        lo, hi = _ci(m)
        row[f"{name}_mean"] = _nan(m.get("mean"))
        row[f"{name}_std"] = _nan(m.get("std"))
        row[f"{name}_lo"] = lo
        row[f"{name}_hi"] = hi


class Result:
    """A campaign's result document (``doc``), with tables and figures.

    ``trials`` holds the per-trial records (:class:`Trials`) when they were kept;
    ``verdict`` is ``pass``/``fail`` against the campaign's gates, when it had any.
    """

    def __init__(self, doc, trials=None, verdict=None, campaign=None):
        if not isinstance(doc, dict) or "summary" not in doc or "campaign" not in doc:
            raise BitflipError("not a bitflip result document (no 'summary' or 'campaign'): "
                               "use the JSON that `bitflip run --out` or GET /v1/campaigns/{id}/results gives")
        self.doc = doc
        self.trials = trials
        self.verdict = verdict
        self.campaign = campaign

    @classmethod
    def load(cls, path, trials_path=None):
        """A result from a ``bitflip run --out`` file (and ``--trials-out``)."""
        with open(path) as f:
            doc = json.load(f)
        return cls(doc, trials=Trials(trials_path) if trials_path else None)

    def save(self, path):
        with open(path, "w") as f:
            json.dump(self.doc, f, indent=1)

    def __getitem__(self, key):
        return self.doc[key]

    @property
    def summary(self):
        return self.doc["summary"]

    @property
    def golden(self):
        return self.doc.get("golden", {})

    @property
    def task_metric(self):
        """The metric the task is judged by: ``auc`` for binary outputs, ``perplexity``
        for a language model, else ``accuracy``."""
        if "auc" in self.golden:
            return "auc"
        return "perplexity" if "perplexity" in self.golden else "accuracy"

    @property
    def rates(self):
        """The BER sweep's rates (empty for other fault models)."""
        return list(self.doc["campaign"].get("rates", []))

    @property
    def mitigations(self):
        return list(self.doc.get("mitigations", []))

    def rate(self, outcome="critical"):
        """An outcome's rate over all trials, with its interval: ``(rate, lo, hi)``."""
        r = self.summary["rates"][outcome]
        lo, hi = _ci(r)
        return _nan(r["rate"]), lo, hi

    def __repr__(self):
        s = self.summary
        c = self.doc["campaign"]
        parts = [f"{s['trials']} trials of {c.get('fault_model')} faults in {c.get('target')}"]
        for k in OUTCOMES:
            r = s["rates"][k]
            if r.get("rate") is not None:
                parts.append(f"{k} {100 * r['rate']:.2f}%")
        if self.verdict:
            parts.append(f"verdict {self.verdict}")
        return "<bitflip.Result " + ", ".join(parts) + ">"

    # --- tables -------------------------------------------------------------------

    def rows(self, table="outcomes"):
        """The rows of a table as a list of dicts (what :meth:`to_pandas` frames)."""
        doc = self.doc
        if table == "outcomes":
            out = []
            for k in OUTCOMES:
                r = doc["summary"]["rates"][k]
                lo, hi = _ci(r)
                out.append({"outcome": k, "count": doc["summary"]["outcomes"][k], "rate": _nan(r.get("rate")),
                            "lo": lo, "hi": hi, "se": _nan(r.get("se")), "n_eff": _nan(r.get("n_eff"))})
            return out
        if table == "metrics":
            out = []
            for name, m in doc["summary"].get("metrics", {}).items():
                lo, hi = _ci(m)
                out.append({"metric": name, "golden": _nan(self.golden.get(name)), "n": m.get("n"),
                            "mean": _nan(m.get("mean")), "std": _nan(m.get("std")), "lo": lo, "hi": hi})
            return out
        if table == "tensors":
            # each tensor's weight: its share of the fault population (its elements over
            # all the sites'), the W_t with which the overall rates are sum W_t x rate_t;
            # with fault groups, a group's rows (key "group") share its own sites'
            groups = [doc["campaign"].get("sites") or []]
            groups += [fg.get("sites") or [] for fg in doc["campaign"].get("fault_groups") or []]
            elements = [{s.get("name"): s.get("elements") for s in sites if isinstance(s.get("elements"), int)}
                        for sites in groups]
            out = []
            for g in doc.get("by_tensor", []):
                row = {"tensor": g.get("tensor"), "torch_name": g.get("torch_name")}
                k = g.get("group", 0)
                if "group" in g:
                    row["group"] = k
                el = elements[k] if isinstance(k, int) and 0 <= k < len(elements) else {}
                e, total = el.get(g.get("tensor")), sum(el.values())
                row["weight"] = e / total if e is not None and total > 0 else float("nan")
                row.update(_group_row(g))
                out.append(row)
            return out
        if table == "bits":
            out = []
            for g in doc.get("by_bit", []):
                row = {"bit": g.get("bit")}
                if "group" in g:
                    row["group"] = g["group"]
                row.update(_group_row(g))
                out.append(row)
            return out
        if table == "rates":
            out = []
            for g in doc.get("by_rate", []):
                row = {"rate": g.get("rate")}
                row.update(_group_row(g))
                _metric_cols(row, g.get("metrics"))
                out.append(row)
            return out
        if table == "mitigations":
            out = []
            for m in self.mitigations:
                rec = m.get("recovery") or {}
                metric = rec.get("metric") or self.task_metric
                s = m.get("summary", {})
                row = {"name": m.get("name"), "metric": metric, "golden": _nan(m.get("golden", {}).get(metric)),
                       "faulty": _nan(rec.get("faulty")), "mitigated": _nan(rec.get("mitigated"))}
                for k in ("critical", "due"):
                    r = s.get("rates", {}).get(k, {})
                    lo, hi = _ci(r)
                    row[f"{k}_rate"], row[f"{k}_lo"], row[f"{k}_hi"] = _nan(r.get("rate")), lo, hi
                lo, hi = _ci(rec)
                row["recovery"], row["recovery_lo"], row["recovery_hi"] = _nan(rec.get("value")), lo, hi
                cov = m.get("coverage", {})
                for k in ("detected", "harmless"):
                    lo, hi = _ci(cov.get(k))
                    row[k] = _nan((cov.get(k) or {}).get("rate"))
                    row[f"{k}_lo"], row[f"{k}_hi"] = lo, hi
                cost = m.get("cost", {})
                row["time_ratio"] = _nan(cost.get("time_ratio"))
                row["storage_overhead"] = _nan(cost.get("storage_overhead"))
                out.append(row)
            return out
        if table == "mitigation_rates":
            out = []
            for m in self.mitigations:
                for g in m.get("by_rate", []):
                    rec = g.get("recovery") or {}
                    row = {"name": m.get("name"), "rate": g.get("rate")}
                    row.update(_group_row(g))
                    _metric_cols(row, g.get("metrics"))
                    lo, hi = _ci(rec)
                    row["recovery"], row["recovery_lo"], row["recovery_hi"] = _nan(rec.get("value")), lo, hi
                    out.append(row)
            return out
        raise BitflipError(f"no table {table!r}; the tables are {', '.join(TABLES)}")

    def to_pandas(self, table="outcomes"):
        """One table of the result as a pandas DataFrame.

        - ``outcomes``: masked, tolerable, critical, due: count, rate, interval (lo, hi),
          the design's standard error ``se`` and effective sample size ``n_eff``
        - ``metrics``: each metric under faults: golden, n, mean, std, interval
        - ``tensors``: per fault site (ONNX name, PyTorch name): ``weight`` (its share
          of the fault population), counts, critical and DUE rates with intervals,
          ``_se`` and ``_n_eff``, and ``pvf`` (critical or DUE) with ``pvf_lo``/``pvf_hi``
        - ``bits``: the same per bit position
        - ``rates``: per bit error rate of a BER sweep, with each metric's mean, std
          and interval (``auc_mean``, ``auc_lo``, ...)
        - ``mitigations``: per protection: golden, faulty and mitigated metric,
          critical/DUE rates, recovery, coverage, cost, each with its interval
        - ``mitigation_rates``: per protection and rate (BER sweeps)

        Rates are fractions (0..1); a missing value is NaN.
        """
        pd = need("pandas", "Result.to_pandas")
        rows = self.rows(table)
        return pd.DataFrame(rows, columns=list(rows[0]) if rows else None)

    def tables(self):
        """Every non-empty table, ``{name: DataFrame}``."""
        return {t: self.to_pandas(t) for t in TABLES if self.rows(t)}


class Trials:
    """The per-trial records (one JSON object per trial, docs/CAMPAIGNS.md),
    read lazily: from a JSON Lines file, or streamed from a daemon."""

    def __init__(self, source):
        self._source = source

    def _lines(self):
        if callable(self._source):
            return self._source()
        return open(self._source, "rb")

    def __iter__(self):
        src = self._lines()
        try:
            for n, line in enumerate(src, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    yield json.loads(line)
                except ValueError as e:
                    raise BitflipError(f"trial record {n} is not JSON ({e}): {line[:120]!r}") from None
        finally:
            close = getattr(src, "close", None)
            if close:
                close()

    def to_list(self):
        return list(self)

    def to_pandas(self):
        """One row per trial record: ``trial``, ``mitigation`` (paired runs),
        ``outcome``, ``rate`` (BER), ``n_faults``, ``changed_predictions``, each
        metric, and the first fault's ``tensor``, ``torch_name``, ``index``,
        ``bits``, ``old``, ``new`` (``faults`` has them all)."""
        pd = need("pandas", "Trials.to_pandas")
        rows = []
        for t in self:
            row = {"trial": t.get("trial")}
            if "mitigation" in t:
                row["mitigation"] = t["mitigation"]
            row["outcome"] = t.get("outcome")
            if "rate" in t:
                row["rate"] = t["rate"]
            row["n_faults"] = t.get("n_faults")
            row["changed_predictions"] = t.get("changed_predictions")
            for k, v in (t.get("metrics") or {}).items():
                row[k] = _nan(v)
            f = (t.get("faults") or [None])[0] or {}
            row["tensor"] = f.get("tensor")
            row["torch_name"] = f.get("torch_name")
            row["index"] = f.get("index")
            row["bits"] = tuple(f.get("bits", ()))
            row["old"] = _num(f.get("old"))
            row["new"] = _num(f.get("new"))
            row["faults"] = t.get("faults", [])
            rows.append(row)
        return pd.DataFrame(rows)


def _num(v):
    # trial records write non-finite values as strings ("NaN", "Infinity")
    if isinstance(v, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(v, math.nan)
    return _nan(v)
