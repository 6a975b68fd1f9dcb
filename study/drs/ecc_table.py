"""The ECC measurement of docs/STUDY.md: a `bitflip run --local --format json` result of
study/drs/ecc_dlrm.spec.json (or any BER sweep with mitigations) as a Markdown table.

    /usr/bin/python3 study/drs/ecc_table.py RESULT.json

Per rate and configuration: mean AUC under faults · critical share / DUE share (DUE:
detections and NaN/Inf outputs); then per configuration over the sweep: critical and DUE
shares, the recovery with its 95% paired-bootstrap interval, the effective faults it
makes DUE / leaves harmless, time ratio and storage overhead. Standard
library only."""
import json
import sys


def fmt_rec(r):
    v = r.get("value")
    if v is None:
        return "–"
    ci = r.get("ci") or [None, None]
    if ci[0] is None:
        return f"{v:.2f}"
    return f"{v:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def main():
    doc = json.load(open(sys.argv[1]))
    mits = doc["mitigations"]
    names = [m["name"] for m in mits]
    rates = [r["rate"] for r in mits[0]["by_rate"]]
    print("| BER | " + " | ".join(f"`{n}`" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    g = mits[0]["golden"]["auc"]
    print("| golden | " + " | ".join(f"{m['golden']['auc']:.4f}" for m in mits) + " |")
    for j, rate in enumerate(rates):
        cells = []
        for m in mits:
            br = m["by_rate"][j]
            n = br["trials"]
            due = br["outcomes"]["due"] / n if n else 0
            auc = br["metrics"]["auc"]["mean"] if "auc" in br.get("metrics", {}) else float("nan")
            crit = br["outcomes"]["critical"] / n if n else 0
            cell = f"{auc:.4f} · {100 * crit:.0f}% / {100 * due:.0f}%"
            cells.append(cell)
        print(f"| {rate:g} | " + " | ".join(cells) + " |")
    print()
    print("| configuration | critical | DUE | recovery over the sweep | effective faults: detected / harmless | time ratio | storage overhead |")
    print("|---|---|---|---|---|---|---|")
    for m in mits:
        s = m["summary"]
        n = s["trials"]
        o = s["outcomes"]
        print(f"| `{m['name']}` | {100 * o['critical'] / n:.1f}% | {100 * o['due'] / n:.1f}% | "
              f"{fmt_rec(m['recovery']) if m['name'] != 'none' else '(baseline)'} | "
              f"{100 * m['coverage']['detected']['rate']:.1f}% / {100 * m['coverage']['harmless']['rate']:.1f}% "
              f"of {m['coverage']['effective']} | "
              f"{m['cost']['time_ratio']:.2f}× | {100 * m['cost']['storage_overhead']:.1f}% |")
    print(f"\n(golden AUC {g:.4f})")


if __name__ == "__main__":
    main()
