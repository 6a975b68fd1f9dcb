"""The mitigation benchmark (bench/mitigation_bench.py): numbers and tables."""
from mitigation_setup import BUSY_LIMIT, SMALL_LOSS


# ---------------------------------------------------------------- formatting


def z(x):
    return x + 0.0 if isinstance(x, float) else x   # -0.0 -> 0.0


def fmt_rate_name(r):
    m, e = f"{r:.0e}".split("e")
    return f"{m}e{int(e)}"


def fmt_num(x, nd=4):
    return "–" if x is None else f"{z(x):.{nd}f}"


def fmt_pct(x):
    if x is None:
        return "–"
    p = 100 * x
    return f"{p:.0f}" if abs(p - round(p)) < 1e-9 else (f"{p:.1f}" if p >= 0.95 else f"{p:.2f}")


def fmt_rec(rec, with_ci=True):
    if not rec or rec.get("value") is None:
        return "–"
    s = f"{z(rec['value']):.2f}"
    ci = rec.get("ci")
    if with_ci and ci and ci[0] is not None:
        s += f" [{z(ci[0]):.2f}, {z(ci[1]):.2f}]"
    return s


def small_loss(rec):
    return rec and rec.get("golden") is not None and rec.get("faulty") is not None and \
        abs(rec["golden"] - rec["faulty"]) < SMALL_LOSS


def disturbed(row):
    o = row.get("others_cores") or 0
    return o > BUSY_LIMIT


def metric_of(row):
    return "auc" if "auc" in row["result"]["golden"] else "accuracy"


def mlabel(metric):
    return "AUC" if metric == "auc" else "accuracy"


def mits(row):
    return row["result"]["mitigations"]


def by_name(row):
    return {m["name"]: m for m in mits(row)}


def table(hdr, rows):
    out = ["| " + " | ".join(hdr) + " |", "|" + "|".join(["---"] * len(hdr)) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def per_rate_table(row):
    met = metric_of(row)
    ms = mits(row)
    hdr = ["BER", "bit errors / trial"] + [f"`{m['name']}`" for m in ms]
    golden = ["golden", "0"] + [fmt_num(m["golden"].get(met)) for m in ms]
    rows = [golden]
    for j, rate in enumerate(row["result"]["campaign"]["rates"]):
        e = row["param_bits"] * rate
        cells = [fmt_rate_name(rate), f"{e:,.0f}" if e >= 100 else f"{e:.3g}"]
        for k, m in enumerate(ms):
            br = m["by_rate"][j]
            s = fmt_num(br["metrics"][met]["mean"])
            rec = br.get("recovery")
            if k > 0:
                if rec and rec.get("value") is not None:
                    s += " · " + (fmt_rec(rec, with_ci=False) + " ‡" if small_loss(rec) else fmt_rec(rec))
                else:
                    s += " · –"
            due = br["outcomes"]["due"] / max(1, br["trials"])
            if due > 0:
                s += f" · DUE {fmt_pct(due)}%"
            cells.append(s)
        rows.append(cells)
    return table(hdr, rows)


def fmt_cov(m):
    """The configuration's coverage of the effective faults (those the unprotected model does
    not mask): detected (DUE) % / left harmless %, of how many."""
    c = m.get("coverage")
    if not c or not c.get("effective"):
        return "–"
    return f"{fmt_pct(c['detected']['rate'])}% / {fmt_pct(c['harmless']['rate'])}% of {c['effective']:,}"


def overall_table(row, with_metric=True):
    met = metric_of(row)
    hdr = ["configuration", f"golden {mlabel(met)}"] + \
          ([f"{mlabel(met)} under faults"] if with_metric else []) + \
          ["recovery [95% CI]", "critical", "DUE", "effective faults: detected / harmless", "time ratio",
           "storage overhead"]
    rows = []
    for k, m in enumerate(mits(row)):
        s = m["summary"]
        cost = m["cost"]
        rows.append([f"`{m['name']}`", fmt_num(m["golden"].get(met))]
                    + ([fmt_num(s["metrics"][met]["mean"])] if with_metric else [])
                    + ["(baseline)" if k == 0 else fmt_rec(m["recovery"]),
                       fmt_pct(s["rates"]["critical"]["rate"]) + "%", fmt_pct(s["rates"]["due"]["rate"]) + "%",
                       fmt_cov(m),
                       f"{cost['time_ratio']:.2f}×" + ("†" if disturbed(row) else ""),
                       fmt_pct(cost["storage_overhead"]) + "%"])
    return table(hdr, rows)


BIT_GROUPS = [("mantissa 0–21", list(range(0, 22)))] + \
             [(f"{b}" + {22: " (mantissa MSB)", 23: " (exponent LSB)", 30: " (exponent MSB)", 31: " (sign)"}.get(b, ""),
               [b]) for b in range(22, 32)]


def bit_cell(m, bits):
    n = crit = due = 0
    for e in m["by_bit"]:
        if e["bit"] in bits:
            n += e["trials"]
            crit += e["outcomes"]["critical"]
            due += e["outcomes"]["due"]
    if not n:
        return "–"
    return f"{fmt_pct(crit / n)} / {fmt_pct(due / n)}"


def bits_table(row):
    ms = mits(row)
    hdr = ["bit (trials)"] + [f"`{m['name']}`" for m in ms]
    rows = []
    for label, bits in BIT_GROUPS:
        n = sum(e["trials"] for e in ms[0]["by_bit"] if e["bit"] in bits)
        rows.append([f"{label} ({n:,})"] + [bit_cell(m, bits) for m in ms])
    rows.append([f"all 32 bits ({row['result']['summary']['trials']:,})"]
                + [bit_cell(m, list(range(32))) for m in ms])
    met = metric_of(row)
    rows.append([f"{mlabel(met)} under faults (golden {fmt_num(ms[0]['golden'].get(met))})"]
                + [fmt_num(m["summary"]["metrics"][met]["mean"]) for m in ms])
    rows.append(["recovery [95% CI]"] + ["(baseline)"] + [fmt_rec(m["recovery"]) for m in ms[1:]])
    rows.append(["effective faults: detected / harmless"] + [fmt_cov(m) for m in ms])
    rows.append(["time ratio / storage"]
                + [f"{m['cost']['time_ratio']:.2f}× / {fmt_pct(m['cost']['storage_overhead'])}%" for m in ms])
    return table(hdr, rows)
