"""The mitigation benchmark (bench/mitigation_bench.py): what the numbers say, and the coverage
per fault model."""
from mitigation_setup import SINGLE
from mitigation_tables import by_name, fmt_pct, fmt_rate_name, fmt_rec, metric_of, mits, mlabel, small_loss, table, z


# ---------------------------------------------------------------- what the numbers say


def rv(m):
    return (m.get("recovery") or {}).get("value")


def rci(m):
    ci = (m.get("recovery") or {}).get("ci") or [None, None]
    return ci


def r2(x):
    return "–" if x is None else f"{z(x):.2f}"


def pct(x):
    return fmt_pct(x) + "%"


def ranges(bits):
    """[17, 18, 19, 23] -> '17–19, 23'."""
    out, bits = [], sorted(bits)
    i = 0
    while i < len(bits):
        j = i
        while j + 1 < len(bits) and bits[j + 1] == bits[j] + 1:
            j += 1
        out.append(f"{bits[i]}" if i == j else f"{bits[i]}–{bits[j]}")
        i = j + 1
    return ", ".join(out)


def plural(n, word):
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def embedding_share(row):
    sites = row["result"]["campaign"].get("sites") or []
    tot = sum(s["elements"] for s in sites)
    emb = sum(s["elements"] for s in sites if s.get("op") == "Gather")
    return emb / tot if tot else 0.0


def due_rate(m):
    return m["summary"]["rates"]["due"]["rate"]


def crit_rate(m):
    return m["summary"]["rates"]["critical"]["rate"]


def ci_text(m):
    lo, hi = rci(m)
    return f"{r2(rv(m))} [{r2(lo)}, {r2(hi)}]"


def ber_findings(row):
    """Sentences computed from the numbers of a BER case: they hold for any run."""
    B = by_name(row)
    met = mlabel(metric_of(row))
    none, sbp, clip, pytei = B["none"], B["sbp"], B["clip"], B["clip-pytei"]
    ad, ac = B["abft-detect"], B["abft-correct"]
    out = []
    silent = [m for m in (clip, pytei, sbp) if rv(m) is not None]
    if silent:
        best = max(silent, key=rv)
        out.append(f"Of the protections that discard no trial, `{best['name']}` recovers most of the lost "
                   f"{met}, {ci_text(best)} over the sweep, for {pct(best['cost']['storage_overhead'])} extra "
                   f"storage and {best['cost']['time_ratio']:.2f}× the pass time.")
    if rv(ad) is not None and rv(ac) is not None:
        s = (f"ABFT recovers {r2(rv(ad))} (detect) and {r2(rv(ac))} (correct), but by declaring "
             f"{pct(due_rate(ad))} and {pct(due_rate(ac))} of the trials DUE, each counted as recovered "
             f"(re-executed), where the unprotected model has {pct(due_rate(none))} DUE (NaN/Inf outputs); "
             f"the checksums cost {ad['cost']['time_ratio']:.2f}× the pass time and "
             f"{pct(ad['cost']['storage_overhead'])} storage")
        emb = embedding_share(row)
        if emb > 0 and max(crit_rate(ad), crit_rate(ac)) > 0:
            s += (f", and {pct(crit_rate(ad))} / {pct(crit_rate(ac))} of the trials stay critical: the "
                  f"embedding tables ({pct(emb)} of the weights) are read by Gather, which has no checksum")
        out.append(s + ".")
    if rv(clip) is not None and rv(pytei) is not None:
        lo, hi = rci(pytei)
        cmp = ("its interval contains" if lo is not None and lo <= 0.30 <= hi else
               "above" if lo is not None and lo > 0.30 else "below")
        out.append(f"Clipping recovers {ci_text(clip)} with profiled bounds and {ci_text(pytei)} with "
                   f"PyTEI's ±100 (the paper: up to 30%; " + (f"{cmp} 0.30" if cmp.startswith("its") else
                                                               f"{cmp} that") + ").")
    traded = [m for m in (clip, pytei, sbp) if due_rate(m) < due_rate(none) and crit_rate(m) > crit_rate(none)]
    if traded:
        n = row["result"]["golden"]["samples"]
        s = ("Removing NaN/Inf outputs makes those trials silent, DUE → critical: "
             + "; ".join(f"`{m['name']}` DUE {pct(due_rate(none))} → {pct(due_rate(m))}, critical "
                         f"{pct(crit_rate(none))} → {pct(crit_rate(m))}" for m in traded)
             + f". A trial is critical as soon as one of the {n:,} predictions changes")
        if sbp in traded:
            s += (f": under `sbp` these are the mantissa flips it lets through moving a few predictions "
                  f"(its {met} stays {sbp['summary']['metrics'][metric_of(row)]['mean']:.4f})")
        if clip in traded or pytei in traded:
            s += ("; " if sbp in traded else ": ") + ("under clipping, a clamped Inf or a NaN set to 0 gives "
                                                      "finite but wrong outputs")
        out.append(s + ".")
    rates = row["result"]["campaign"]["rates"]
    for m in mits(row)[1:]:
        if rv(m) is not None and rci(m)[1] is not None and rci(m)[1] < 0:
            out.append(f"`{m['name']}` makes the {met} *worse* than no protection over the sweep "
                       f"({ci_text(m)}).")
            continue
        bad = [(rates[j], br["recovery"]) for j, br in enumerate(m["by_rate"])
               if br.get("recovery") and br["recovery"].get("value") is not None and br["recovery"]["value"] < 0
               and (br["recovery"].get("ci") or [None, None])[1] is not None and br["recovery"]["ci"][1] <= 0
               and not small_loss(br["recovery"])]
        if bad:
            out.append(f"`{m['name']}` does slightly *worse* than no protection at BER "
                       + ", ".join(f"{fmt_rate_name(r)} ({fmt_rec(rec)})" for r, rec in bad) + ".")
    for m in mits(row)[1:]:
        rec = m.get("recovery") or {}
        if rec.get("mitigated") is not None and rec.get("golden") is not None and \
                rec["mitigated"] > rec["golden"] + 1e-9 and rci(m)[0] is not None and rci(m)[0] > 1:
            out.append(f"`{m['name']}`'s recovery is above 1: with it the mean {met} under faults "
                       f"({rec['mitigated']:.4f}) ends above the golden one ({rec['golden']:.4f}); the faults "
                       f"it lets through happen to help.")
    return out


def bits_findings(row):
    B = by_name(row)
    ms = mits(row)
    none = B["none"]
    out = []

    def count(m, bits, what):
        return sum(e["outcomes"][what] for e in m["by_bit"] if e["bit"] in bits)

    def bad(m, b):
        return count(m, [b], "critical") + count(m, [b], "due")

    allb = range(32)
    hurt = [b for b in allb if bad(none, b) > 0]
    if hurt:
        out.append(f"Unprotected, the critical and DUE trials are on bits {ranges(hurt)}; no flip of a lower "
                   f"bit changed a prediction in these trials.")
    for m in ms[1:]:
        c, d = count(m, allb, "critical"), count(m, allb, "due")
        c0, d0 = count(none, allb, "critical"), count(none, allb, "due")
        neutral = [b for b in hurt if bad(m, b) == 0]
        if all(count(m, [b], "critical") == count(none, [b], "critical") and
               count(m, [b], "due") == count(none, [b], "due") for b in allb):
            out.append(f"`{m['name']}` neutralises no bit: its critical and DUE counts are the unprotected "
                       f"model's, bit for bit (its recovery, {r2(rv(m))}, comes from fewer wrong predictions "
                       f"within trials that stay critical).")
            continue
        s = f"`{m['name']}` "
        if c == 0 and c0 > 0 and d > d0:
            s += (f"leaves no critical trial: it detects every harmful flip"
                  + (" and many harmless ones" if d > c0 + d0 else "")
                  + f", {plural(d, 'DUE trial')} in all, each a re-execution, against {c0:,} critical and "
                  f"{d0:,} DUE unprotected")
            out.append(s + ".")
            continue
        s += (f"neutralises bit{'s' if len(neutral) > 1 else ''} {ranges(neutral)}" if neutral
              else "neutralises no bit")
        s += f": {plural(c, 'critical trial')} and {plural(d, 'DUE trial')} in all (unprotected: {c0:,} and {d0:,})"
        if d > d0 and m["name"].startswith("abft"):
            s += "; its DUE include its detections, each a re-execution"
        if c > c0 and d < d0:
            s += "; it turns NaN/Inf outputs (DUE) into finite wrong ones (critical)"
        out.append(s + ".")
    for m in ms[1:]:
        if rv(m) is not None and rci(m)[1] is not None and rci(m)[1] < 0:
            out.append(f"`{m['name']}` makes the {mlabel(metric_of(row))} *worse* than no protection "
                       f"(recovery {ci_text(m)}).")
    emb = embedding_share(row)
    ad = B.get("abft-detect")
    ac = B.get("abft-correct")
    if emb > 0 and ad and ac and count(ad, allb, "critical") + count(ac, allb, "critical") > 0:
        out.append(f"ABFT leaves critical trials ({count(ad, allb, 'critical'):,} with detect, "
                   f"{count(ac, allb, 'critical'):,} with correct) because {pct(emb)} of the weights are "
                   f"embedding tables, read by Gather, which has no checksum.")
    return out


# ---------------------------------------------------------------- coverage per fault model


def cov_campaigns(row):
    """The coverage case's campaigns that ran, in FAULT_MODELS order."""
    return [c for c in row.get("campaigns") or [] if c.get("ok")]


def fm_label(c):
    fm = c["fault_model"]
    if fm == "ber":
        return f"`ber` {fmt_rate_name(c['spec']['faults']['rate'])}"
    return f"`{fm}`" + (", 1 bit" if c["spec"]["faults"].get("bits") == 1 else "")


def cov_count(pairs, cfg, groups=None):
    """(effective, detected, harmless, trials) for one configuration from its pairs with the
    unprotected trials, over the trials of the given fault groups (all by default)."""
    eff = det = harm = n = 0
    for k, v in pairs["pairs"].get(cfg, {}).items():
        g, _, o0, o = k.split("|")
        if groups and g not in groups:
            continue
        n += v
        if o0 == "masked":
            continue
        eff += v
        det += v if o == "due" else 0
        harm += v if o in ("masked", "tolerable") else 0
    return eff, det, harm, n


def pair_count(c, cfg, groups=None, multi=None, before=None, after=None):
    """Trials of campaign c whose unprotected outcome is in `before` and outcome under cfg in
    `after` (None: any), in the given fault groups and multi-fault flag."""
    n = 0
    for k, v in c["paired"]["pairs"].get(cfg, {}).items():
        g, mu, o0, o = k.split("|")
        if (groups and g not in groups) or (multi is not None and int(mu) != multi) or \
                (before and o0 not in before) or (after and o not in after):
            continue
        n += v
    return n


def cov_cell(eff, det, harm):
    return "–" if not eff else f"{fmt_pct(det / eff)} / {fmt_pct(harm / eff)}"


def cov_shares(c, cfg):
    """(detected, harmless, critical) shares of the campaign's effective faults under cfg."""
    cov = by_name_c(c)[cfg]["coverage"]
    e, d, h = cov["effective"], cov["detected"]["count"], cov["harmless"]["count"]
    return (d / e, h / e, (e - d - h) / e) if e else (0.0, 0.0, 0.0)


def by_name_c(c):
    return {m["name"]: m for m in c["result"]["mitigations"]}


def has_gather(row):
    cs = cov_campaigns(row)
    return bool(cs) and any(s.get("op") == "Gather" for s in cs[0]["result"]["campaign"].get("sites") or [])


def other_ops(row):
    sites = cov_campaigns(row)[0]["result"]["campaign"].get("sites") or []
    return sorted({s.get("op") for s in sites if s.get("op") != "Gather"})


def cov_table(row):
    cs = cov_campaigns(row)
    names = [m["name"] for m in cs[0]["result"]["mitigations"]]
    hdr = ["fault model (effective / trials)"] + [f"`{n}`" for n in names]
    rows = []
    for c in cs:
        cov0 = by_name_c(c)["none"]["coverage"]
        rows.append([f"{fm_label(c)} ({cov0['effective']:,} / {c['result']['summary']['trials']:,})"]
                    + [cov_cell(m["coverage"]["effective"], m["coverage"]["detected"]["count"],
                                m["coverage"]["harmless"]["count"]) for m in c["result"]["mitigations"]])
    if has_gather(row):
        single = [c for c in cs if c["fault_model"] in SINGLE]
        for group, label in (("gather", "embedding tables (Gather)"),
                             ("other", "other weights (" + ", ".join(other_ops(row)) + ")")):
            tot = [0, 0]
            cells = []
            for n in names:
                e = d = h = 0
                for c in single:
                    e1, d1, h1, n1 = cov_count(c["paired"], n, [group])
                    e, d, h = e + e1, d + d1, h + h1
                    if n == "none":
                        tot[0], tot[1] = tot[0] + e1, tot[1] + n1
                cells.append(cov_cell(e, d, h))
            rows.append([f"{label}, " + (f"the {len(single)} single-element models pooled" if group == "gather"
                                         else "the same") + f" ({tot[0]:,} / {tot[1]:,})"] + cells)
    return table(hdr, rows)


def span(vals, what):
    """[(share, fault model)], 'them' -> 'a% (`x`) to b% (`y`) of them', or 'a% of them under every
    fault model' if all are equal."""
    lo, hi = min(vals), max(vals)
    if fmt_pct(lo[0]) == fmt_pct(hi[0]):
        return f"{pct(lo[0])} of {what}" + (" under every fault model" if len(vals) > 1 else "")
    return f"{pct(lo[0])} (`{lo[1]}`) to {pct(hi[0])} (`{hi[1]}`) of {what}"


def cov_findings(row):
    """Sentences computed from the numbers of a coverage case: they hold for any run."""
    cs = cov_campaigns(row)
    if not cs:
        return []
    names = [m["name"] for m in cs[0]["result"]["mitigations"]]
    single = [c for c in cs if c["fault_model"] in SINGLE]
    ber = [c for c in cs if c["fault_model"] == "ber"]
    n_samples = cs[0]["result"]["golden"]["samples"]
    gather = has_gather(row)
    out = []
    crit0 = [(cov_shares(c, "none")[2], c["fault_model"]) for c in cs]
    out.append(f"Unprotected, {span(crit0, 'the effective faults')} are critical (a prediction changes "
               f"without an error being seen).")
    if "abft-detect" in names:
        det = [(cov_shares(c, "abft-detect")[0], c["fault_model"]) for c in cs]
        crit = [cov_shares(c, "abft-detect")[2] for c in cs]
        s = f"`abft-detect` flags {span(det, 'them')}"
        if max(crit) == 0:
            s += ("; none of those it lets through is critical, under any fault model: a weight fault "
                  "below its tolerance changed no prediction here")
        elif gather and all(pair_count(c, "abft-detect", ["other"], before=["critical", "tolerable", "due"],
                                       after=["critical"]) == 0 for c in cs):
            s += (f"; what stays critical, {span([(x, c['fault_model']) for x, c in zip(crit, cs)], 'them')}, "
                  f"is all in trials with a fault in the embedding tables (below)")
        else:
            s += f"; {span([(x, c['fault_model']) for x, c in zip(crit, cs)], 'them')} stay critical"
        out.append(s + ".")
        flagged = sum(pair_count(c, "abft-detect", before=["critical", "tolerable", "due"], after=["due"])
                      for c in cs)
        tol = sum(pair_count(c, "abft-detect", before=["tolerable"], after=["due"]) for c in cs)
        harmful = sum(pair_count(c, "abft-detect", before=["critical"], after=["due"]) for c in cs)
        if flagged:
            out.append(f"{tol:,} of its {flagged:,} detections of effective faults ({pct(tol / flagged)}, all "
                       f"{len(cs)} campaigns together) are of faults the unprotected model tolerates (no "
                       f"prediction changed), each a re-execution the fault did not need; {harmful:,} are of "
                       f"critical ones"
                       + (", the rest of NaN/Inf outputs." if flagged > tol + harmful else "."))
    if "abft-correct" in names and single:
        harm = [(cov_shares(c, "abft-correct")[1], c["fault_model"]) for c in single]
        new_due = [pair_count(c, "abft-correct", before=["critical", "tolerable"], after=["due"]) for c in single]
        s = ("`abft-correct` corrects instead: it leaves harmless "
             + span(harm, "the single-element faults (" + ", ".join(f"`{c['fault_model']}`" for c in single) + ")"))
        s += (", and flags none the unprotected model does not already turn into NaN/Inf" if sum(new_due) == 0
              else f", and flags {plural(sum(new_due), 'fault')} that the unprotected model does not turn into NaN/Inf")
        for c in ber:
            nd = pair_count(c, "abft-correct", before=["critical", "tolerable", "masked"], after=["due"])
            multi = pair_count(c, "abft-correct", multi=1, before=["critical", "tolerable", "masked"],
                               after=["due"])
            if nd:
                s += (f"; with `ber` it flags {plural(nd, 'trial')} more than the unprotected model's NaN/Inf, "
                      + ("all" if multi == nd else f"{multi:,} of them") + " with two or more corrupted "
                      "weights, which can put two wrong channels in one row of a layer: more than the "
                      "checksums locate")
        out.append(s + ".")
        if gather:
            left = sum(pair_count(c, "abft-correct", ["other"], after=["critical"]) for c in single)
            det_left = sum(pair_count(c, "abft-detect", ["other"], after=["critical"]) for c in single)
            if left:
                out.append(f"In the checksummed layers it leaves {plural(left, 'single-element fault')} "
                           "critical"
                           + (" that `abft-detect` flags" if det_left == 0 else "")
                           + ": the correction is made row by row (sample by sample), only where a row's "
                           "error exceeds the tolerance, and what is left can still flip a prediction at "
                           f"its threshold among the {n_samples:,}.")
    if "sbp" in names:
        harm = [(cov_shares(c, "sbp")[1], c["fault_model"]) for c in cs]
        lo = min(harm)
        s = f"`sbp` flags nothing and leaves harmless {span(harm, 'the effective faults')}"
        if lo[1] == "random_value" and fmt_pct(lo[0]) != fmt_pct(max(harm)[0]):
            c = [c for c in cs if c["fault_model"] == "random_value"][0]
            s += (f"; `random_value` is its weak spot, {pct(cov_shares(c, 'sbp')[2])} critical: the whole "
                  "mantissa it does not protect is random there, which moves a weight by up to a factor of 2 "
                  "(one flipped mantissa bit: at most 1.5)")
        if gather and "abft-correct" in names and single:
            e, _, h, _ = (sum(x) for x in zip(*[cov_count(c["paired"], "sbp", ["other"]) for c in single]))
            e2, _, h2, _ = (sum(x) for x in zip(*[cov_count(c["paired"], "abft-correct", ["other"]) for c in single]))
            if e and e2:
                s += (f"; in the {', '.join(other_ops(row))} weights it leaves {pct(h / e)} of the single-element "
                      f"faults harmless, where `abft-correct` leaves {pct(h2 / e2)}")
        out.append(s + ".")
    clips = [n for n in ("clip", "clip-pytei") if n in names]
    if clips:
        diff = max(abs(cov_shares(c, n)[1] - cov_shares(c, "none")[1]) for c in cs for n in clips)
        s = ("Clipping leaves the same harmless share as `none` in every row" if fmt_pct(diff) == "0" else
             f"Clipping stays within {100 * diff:.1f} points of `none`'s harmless share in every row")
        turned = {n: sum(pair_count(c, n, before=["due"], after=["critical"]) for c in cs) for n in clips}
        worse = {n: sum(pair_count(c, n, before=["tolerable", "masked"], after=["critical"]) for c in cs)
                 for n in clips}
        if any(turned.values()):
            s += ("; what it does change is NaN/Inf outputs (DUE) into silent wrong ones, "
                  + ", ".join(f"{plural(turned[n], 'trial')} with `{n}`" for n in clips if turned[n]))
        if any(worse.values()):
            s += (", and trials the unprotected model tolerates into critical ones, "
                  + ", ".join(f"{worse[n]:,} with `{n}`" for n in clips if worse[n])
                  + " (a clamped activation can end on the other side of a decision threshold "
                  "than the unclamped one)")
        out.append(s + ".")
    if gather and "abft-detect" in names and single:
        sites = cs[0]["result"]["campaign"]["sites"]
        emb = sum(s["elements"] for s in sites if s.get("op") == "Gather") / max(1, sum(s["elements"] for s in sites))
        g = [cov_count(c["paired"], "abft-detect", ["gather"]) for c in single]
        o = [cov_count(c["paired"], "abft-detect", ["other"]) for c in single]
        ge, gd, gh = (sum(x[i] for x in g) for i in range(3))
        oe, od, oh = (sum(x[i] for x in o) for i in range(3))
        if ge and oe:
            over = sum(pair_count(c, "abft-detect", ["gather"], before=["critical", "tolerable", "masked"],
                                  after=["due"]) for c in single)
            nan0 = sum(pair_count(c, "none", ["gather"], before=["due"]) for c in single)
            mins = [c["paired"]["gather_due_min_abs"].get("abft-detect") for c in single]
            mins = [x for x in mins if x is not None]
            s = (f"ABFT does not cover the embedding tables, {pct(emb)} of the weights, read by Gather, which "
                 f"has no checksum: of the effective single-element faults in them, `abft-detect` flags "
                 f"{pct(gd / ge)}")
            parts = []
            if nan0:
                parts.append(f"{nan0:,} of them NaN/Inf outputs unprotected too")
            if over:
                m, e = f"{min(mins):.1e}".split("e") if mins else ("", "0")
                parts.append(f"{over:,} corrupted to {m}e{int(e)} or more, close to the largest float, 3.4e38, "
                             "which a checksum downstream flags" if mins else f"{over:,} others")
            if parts:
                s += " (" + "; ".join(parts) + ")"
            s += (f" and {pct(max(0.0, 1 - (gd + gh) / ge))} stay critical, against {pct(od / oe)} flagged and "
                  f"{pct(max(0.0, 1 - (od + oh) / oe))} critical in the other weights")
            out.append(s + ".")
    return out
