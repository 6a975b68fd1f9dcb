"""bitflip report against independent references.

usage: report_check.py BITFLIP FIXTURES_DIR TMP_DIR

Runs small real campaigns (the fixtures' demo CNN and DLRM) and hand-built
result documents through `bitflip report`, and checks what a reviewer
relies on: the headline's numbers against Wilson intervals computed here
from the counts, the tensor bars in the order of the counts, the heatmap's
cells against the result's joint counts (which must add up to by_tensor and
by_bit), overlays with one curve and legend entry per result, hostile tensor
names and labels inert, well-formed XML everywhere (ElementTree and
xmllint), no script and no external reference in the HTML, and Markdown
whose SVG links all exist. Prints "N passed, N failed"."""
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import xml.etree.ElementTree as ET

BF, FIX, TMP = sys.argv[1], sys.argv[2], sys.argv[3]
SVG = "{http://www.w3.org/2000/svg}"
passes = fails = 0


def check(name, cond, detail=""):
    global passes, fails
    if cond:
        passes += 1
    else:
        fails += 1
        print(f"FAIL {name} {detail}")


def run(*args, cwd=None):
    return subprocess.run([BF, *args], cwd=cwd, capture_output=True, text=True)


def wilson(k, n, conf=0.95):
    """Wilson score interval, from its formula (Wilson 1927)."""
    z = statistics.NormalDist().inv_cdf(1 - (1 - conf) / 2)
    p = k / n
    den = 1 + z * z / n
    c = (p + z * z / (2 * n)) / den
    h = z / den * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, c - h) if k > 0 else 0.0, min(1.0, c + h) if k < n else 1.0


def per_bit_interval(by_bit, outcome="critical", conf=0.95):
    """The overall rate of a per_bit campaign and its interval, from the
    formulas of docs/STATISTICS.md: bit positions are strata of equal
    weight, variances shrunk by half a trial, Wilson's interval on the
    effective sample size."""
    z = statistics.NormalDist().inv_cdf(1 - (1 - conf) / 2)
    cells = [(g["outcomes"][outcome], g["trials"]) for g in by_bit if g["trials"] > 0]
    B = len(cells)
    p = sum(x / n for x, n in cells) / B
    q = [(x + 0.5) / (n + 1) for x, n in cells]
    v = sum(qi * (1 - qi) / n for qi, (x, n) in zip(q, cells)) / (B * B)
    qb = sum(q) / B
    ne = qb * (1 - qb) / v
    den = 1 + z * z / ne
    c = (p + z * z / (2 * ne)) / den
    h = z / den * math.sqrt(p * (1 - p) / ne + z * z / (4 * ne * ne))
    return p, (max(0.0, c - h) if p > 0 else 0.0), (min(1.0, c + h) if p < 1 else 1.0)


def close(printed, value_pct):
    """printed: a percentage as the report wrote it; within its rounding"""
    dec = len(printed.split(".")[1]) if "." in printed else 0
    return abs(float(printed) - value_pct) <= 0.5 * 10 ** -dec + 1e-9


def xmllint_ok(path):
    if not shutil.which("xmllint"):
        return True
    return subprocess.run(["xmllint", "--noout", path], capture_output=True).returncode == 0


def html_tree(path, name):
    text = open(path, encoding="utf-8").read()
    try:
        root = ET.fromstring(text.replace("<!DOCTYPE html>", "", 1))
    except ET.ParseError as e:
        check(f"{name}_wellformed", False, str(e))
        return text, None
    check(f"{name}_wellformed", True)
    check(f"{name}_xmllint", xmllint_ok(path))
    return text, root


def self_contained(text, root, name, hostile=False):
    """no script, no external reference: nothing a browser would fetch or run.
    hostile: the document holds such words as (escaped) text; only markup counts"""
    low = text.lower()
    words = ("<script", "<link", "<iframe", "<img", "<object", "<embed", "<foreignobject")
    if not hostile:
        words += ("http://", "https://", "src=", "href=", "url(", "@import", "javascript:")
    for bad in words:
        check(f"{name}_no_{bad}", bad not in low, f"found {bad!r}")
    if root is not None:
        for el in root.iter():
            tag = el.tag.split("}")[-1].lower()
            check(f"{name}_tag_{tag}", tag not in ("script", "foreignobject", "iframe", "a", "image", "use"))
            for a in el.attrib:
                a = a.split("}")[-1].lower()
                if a.startswith("on") or a in ("href", "src"):
                    check(f"{name}_attr_{a}", False, "an active attribute")


def figures(root):
    """{figure name: <svg> element} of a report's HTML"""
    out = {}
    for fig in root.iter("figure"):
        svg = fig.find("svg")
        out[fig.get("id", "")[4:]] = svg
    return out


def texts(svg, cls):
    return [t.text or "" for t in svg.iter("text") if t.get("class") == "bfr-" + cls]


def headline(root):
    return "".join(next(p for p in root.iter("p") if p.get("class") == "headline").itertext())


def campaign(spec, out, *extra):
    r = run("run", "--local", os.path.join(FIX, "specs", spec), "--out", out, "--format", "json", *extra)
    check(f"run_{spec}", r.returncode == 0, r.stderr[-400:])
    return json.load(open(out))


# --- a real single-bit campaign: headline, outcome bars, tensor bars, heatmap
demo = campaign("demo_campaign.json", f"{TMP}/demo.json")
r = run("report", f"{TMP}/demo.json", "-o", f"{TMP}/demo.html")
check("report_demo", r.returncode == 0 and "demo.html" in r.stdout, r.stderr)
text, root = html_tree(f"{TMP}/demo.html", "demo")
self_contained(text, root, "demo")
figs = figures(root)
check("demo_figures", {"outcomes", "tensors", "heatmap"} <= set(figs) and "ber_curve" not in figs, str(list(figs)))

s = demo["summary"]
n, k = s["trials"], s["outcomes"]["critical"]
# the demo samples per_bit: its overall interval is the stratified one
_, lo, hi = per_bit_interval(demo["by_bit"])
h = headline(root)
m = re.match(r"critical rate ([\d.]+)% \[([\d.]+), ([\d.]+)\], DUE ([\d.]+)% \[([\d.]+), ([\d.]+)\] "
             r"at 1 bit per trial \(([\d,]+) trials\)", h)
check("headline_form", m is not None, h)
if m:
    check("headline_rate", close(m.group(1), 100 * k / n), f"{m.group(1)} vs {100 * k / n}")
    check("headline_lo", close(m.group(2), 100 * lo), f"{m.group(2)} vs {100 * lo}")
    check("headline_hi", close(m.group(3), 100 * hi), f"{m.group(3)} vs {100 * hi}")
    # DUE beside it, its interval the same design's
    du, dlo, dhi = per_bit_interval(demo["by_bit"], "due")
    check("headline_due", close(m.group(4), 100 * du) and close(m.group(5), 100 * dlo) and close(m.group(6), 100 * dhi),
          f"{m.groups()[3:6]} vs {du} [{dlo}, {dhi}]")
    check("headline_trials", m.group(7) == f"{n:,}", m.group(7))

name = lambda g: g.get("torch_name") or g["tensor"]
crit = {name(g): g["outcomes"]["critical"] for g in demo["by_tensor"]}
top = max(crit, key=crit.get)
m = re.search(r"tensor (\S+) holds (\d+)% of critical faults", h)
check("headline_tensor", m is not None and m.group(1) == top, f"{h} vs {top}")
if m:
    check("headline_share", abs(int(m.group(2)) - 100 * crit[top] / sum(crit.values())) <= 0.5, m.group(2))

# the outcome bars: each value text against the per_bit interval from the counts
vals = texts(figs["outcomes"], "v")
check("outcomes_four", len(vals) == 4, str(vals))
for key, v in zip(("masked", "tolerable", "critical", "due"), vals):
    kk = s["outcomes"][key]
    _, l, u = per_bit_interval(demo["by_bit"], key)
    mm = re.match(r"([\d.]+)% \[([\d.]+), ([\d.]+)\]", v)
    check(f"outcome_{key}", mm and close(mm.group(1), 100 * kk / n) and close(mm.group(2), 100 * l) and
          close(mm.group(3), 100 * u), f"{v} vs {kk}/{n} [{l}, {u}]")

# the tensor bars: most critical first, by rates computed here (per_bit: a
# tensor's rate post-stratified on the bits that hit it, docs/STATISTICS.md)
hit = [g for g in demo["by_tensor"] if g["trials"] > 0]
want = sorted(hit, key=lambda g: (-per_bit_interval(g["by_bit"])[0], -per_bit_interval(g["by_bit"])[1], -g["trials"],
                                  name(g)))
got = [t for t in texts(figs["tensors"], "lb") if "critical rate" not in t]
check("tensor_order", got == [name(g) for g in want][:20], f"{got} vs {[name(g) for g in want]}")

# PVF per tensor: critical or DUE, most first; each bar's numbers are the
# document's, the PVF is critical + DUE (the two exclude each other), and the
# rate is the per_bit estimate of the union computed here from the counts
check("pvf_figure", "pvf" in figs, str(list(figs)))
bars = [el for el in figs["pvf"].iter() if el.get("class") == "bfr-pvf"] if "pvf" in figs else []
with_pvf = [g for g in demo["by_tensor"] if g.get("pvf") and g["pvf"]["rate"] is not None]
check("pvf_bars", len(bars) == min(len(with_pvf), 20) and len(bars) > 0, f"{len(bars)} vs {len(with_pvf)}")
byname = {name(g): g for g in with_pvf}
prev = 2.0
for el in bars:
    g = byname.get(el.get("data-tensor"))
    check("pvf_tensor_known", g is not None, el.get("data-tensor"))
    if g is None:
        continue
    pv = float(el.get("data-pvf"))
    check(f"pvf_{name(g)}_doc", pv == g["pvf"]["rate"] and [float(el.get("data-lo")), float(el.get("data-hi"))] == g["pvf"]["ci"],
          f"{el.attrib} vs {g['pvf']}")
    check(f"pvf_{name(g)}_sum", abs(pv - (g["critical"]["rate"] + g["due"]["rate"])) < 1e-12, f"{pv} vs {g['critical']} {g['due']}")
    union = [{"trials": c["trials"], "outcomes": {"wrong": c["outcomes"]["critical"] + c["outcomes"]["due"]}} for c in g["by_bit"]]
    check(f"pvf_{name(g)}_counts", abs(pv - per_bit_interval(union, "wrong")[0]) < 1e-12, f"{pv} vs {per_bit_interval(union, 'wrong')}")
    check(f"pvf_{name(g)}_order", pv <= prev, f"{pv} after {prev}")
    prev = pv

# the joint counts add up to the two marginals bitflip keeps apart
for g in demo["by_tensor"]:
    tot = {o: sum(c["outcomes"][o] for c in g.get("by_bit", [])) for o in g["outcomes"]}
    check(f"by_bit_sums_{g['tensor']}", tot == g["outcomes"], f"{tot} vs {g['outcomes']}")
for b in demo["by_bit"]:
    tot = sum(c["outcomes"]["critical"] for g in demo["by_tensor"] for c in g.get("by_bit", []) if c["bit"] == b["bit"])
    check(f"by_tensor_sums_bit{b['bit']}", tot == b["outcomes"]["critical"])
# and the heatmap shows each cell's counts
cells = {}
for rect in figs["heatmap"].iter("rect"):
    t = rect.find("title")
    mm = t is not None and re.match(r"(.+), bit (\d+): ([\d,]+) of ([\d,]+) faults critical", t.text or "")
    if mm:
        cells[(mm.group(1), int(mm.group(2)))] = (int(mm.group(3).replace(",", "")), int(mm.group(4).replace(",", "")))
want_cells = {(name(g), c["bit"]): (c["outcomes"]["critical"], c["trials"]) for g in demo["by_tensor"] for c in g["by_bit"]}
check("heatmap_cells", cells == want_cells, f"{len(cells)} cells vs {len(want_cells)}")

# --- shards: the joint counts merge exactly
parts = []
for i in range(2):
    r = run("run", "--local", os.path.join(FIX, "specs", "demo_campaign.json"), "--shard", f"{i}/2", "--out",
            f"{TMP}/part{i}.json", "--format", "json")
    parts.append(f"{TMP}/part{i}.json")
r = run("merge", *parts, "--out", f"{TMP}/merged.json", "--format", "json")
merged = json.load(open(f"{TMP}/merged.json"))
check("merge_by_tensor_bit", [g["by_bit"] for g in merged["by_tensor"]] == [g["by_bit"] for g in demo["by_tensor"]])

# --- a paired mitigation comparison: recovery, its cost, a curve per protection
mit = campaign("dlrm_mitigations.json", f"{TMP}/mit.json")
r = run("report", f"{TMP}/mit.json", "-o", f"{TMP}/mit.html")
text, root = html_tree(f"{TMP}/mit.html", "mit")
self_contained(text, root, "mit")
figs = figures(root)
check("mit_figures", {"ber_curve", "outcomes", "mitigation"} <= set(figs), str(list(figs)))
best = max((x for x in mit["mitigations"] if isinstance(x["recovery"].get("value"), (int, float))),
           key=lambda x: x["recovery"]["value"])
h = headline(root)
m = re.search(r"; (\S+) recovers (-?\d+)% \[(-?\d+), (-?\d+)\] of the (AUC|accuracy) lost to faults", h)
check("headline_recovery", m is not None and m.group(1) == best["name"], h)
if m:
    check("headline_recovery_value", int(m.group(2)) == round(100 * best["recovery"]["value"]), m.group(2))
    check("headline_recovery_ci", [int(m.group(3)), int(m.group(4))] == [round(100 * c) for c in best["recovery"]["ci"]])
curves = [g for g in figs["ber_curve"].iter("g") if g.get("class") == "bfr-curve"]
check("mit_curves", len(curves) == len(mit["mitigations"]), f"{len(curves)} curves")
bars = [g for g in figs["mitigation"].iter("g") if g.get("class") == "bfr-bar"]
check("mit_bars", len(bars) == sum(isinstance(x["recovery"].get("value"), (int, float)) for x in mit["mitigations"][1:]))
costs = [t for t in texts(figs["mitigation"], "v")]
check("mit_cost_text", all("\u00d7 time" in c and "storage" in c for c in costs), str(costs))

# --- three BER sweeps overlaid: three curves, three legend entries
specs = []
for seed in (1, 2, 3):
    sp = json.load(open(os.path.join(FIX, "specs", "dlrm_ber.json")))
    sp["seed"] = seed
    for key in ("model", "dataset"):
        sp[key] = os.path.normpath(os.path.join(FIX, "specs", sp[key]))
    path = f"{TMP}/ber{seed}.spec.json"
    json.dump(sp, open(path, "w"))
    r = run("run", "--local", path, "--out", f"{TMP}/ber{seed}.json", "--format", "json")
    check(f"run_ber{seed}", r.returncode == 0, r.stderr[-300:])
    specs.append(f"{TMP}/ber{seed}.json")
r = run("report", *specs, "--label", "seed one", "--label", "seed two", "--label", "seed three", "-o", f"{TMP}/ber.html",
        "--title", "Three seeds")
text, root = html_tree(f"{TMP}/ber.html", "overlay")
self_contained(text, root, "overlay")
figs = figures(root)
curves = [g for g in figs["ber_curve"].iter("g") if g.get("class") == "bfr-curve"]
check("overlay_curves", len(curves) == 3, f"{len(curves)} curves")
legend = ["".join(g.itertext()).strip() for g in figs["ber_curve"].iter("g") if g.get("class") == "bfr-legend"]
check("overlay_legend", legend == ["without faults", "seed one", "seed two", "seed three"], str(legend))
check("overlay_title", root.find("body/main/h1").text == "Three seeds")
# each curve's points: the mean of each rate, as the result has it
doc = json.load(open(specs[0]))
pts = [c.find(f"title").text for c in curves[0].iter("circle")]
check("overlay_points", len(pts) == len(doc["by_rate"]), str(pts))
for p, g in zip(pts, doc["by_rate"]):
    mean = g["metrics"]["auc"]["mean"]
    shown = float(re.search(r"AUC ([-\d.]+) \[", p).group(1))
    check("overlay_point_value", abs(shown - mean) <= 0.5 * 10 ** (math.floor(math.log10(abs(mean))) - 3), f"{p} vs {mean}")
check("overlay_outcome_bars", len([g for g in figs["outcomes"].iter("g") if g.get("class") == "bfr-bar"]) == 12)

# --- hostile names: inert in HTML, SVG files and Markdown
hostile = ["</svg><script>alert(1)</script>", '"onload="alert(1)', "a&b]]><!--", "\u202e\u0001tab\tname",
           "<img src=x onerror=alert(1)>"]
sites = [{"name": t, "op": "Conv", "elements": 10, "bits": 32} for t in hostile]
by_tensor = []
for i, t in enumerate(hostile):
    c = {"masked": 10 - i, "tolerable": 0, "critical": i + 1, "due": 0}
    by_tensor.append({"tensor": t, "trials": 11, "outcomes": c,
                      "by_bit": [{"bit": 30, "trials": 11, "outcomes": c}]})
tot = {o: sum(g["outcomes"][o] for g in by_tensor) for o in ("masked", "tolerable", "critical", "due")}
nn = sum(tot.values())
hand = {"bitflip": "test", "campaign": {"model": "<script>m.onnx", "dataset": "d", "seed": 1, "trials": nn,
                                         "target": "weights", "fault_model": "bitflip", "bits": 1,
                                         "representation": "fp32", "confidence": 0.95, "sites": sites},
        "golden": {"task": "classification", "accuracy": 0.9},
        "summary": {"trials": nn, "planned": nn, "stopped_early": False, "outcomes": tot,
                    "rates": {o: {"rate": v / nn, "ci": list(wilson(v, nn))} for o, v in tot.items()}, "metrics": {}},
        "by_tensor": by_tensor, "by_bit": [{"bit": 30, "trials": nn, "outcomes": tot}]}
json.dump(hand, open(f"{TMP}/hostile.json", "w"))
r = run("report", f"{TMP}/hostile.json", "--label", "<script>alert(2)</script>", "--title", "</title><script>x</script>",
        "-o", f"{TMP}/hostile.html")
check("hostile_report", r.returncode == 0, r.stderr)
text, root = html_tree(f"{TMP}/hostile.html", "hostile")
self_contained(text, root, "hostile", hostile=True)
if root is not None:
    alltext = "".join(root.itertext())
    check("hostile_roundtrip", "</svg><script>alert(1)</script>" in alltext and '"onload="alert(1)' in alltext)
    check("hostile_title", root.find("head/title").text == "</title><script>x</script>")
    got = [t for t in texts(figures(root)["tensors"], "lb") if "critical rate" not in t]
    # most critical first: the hand-set counts give the reverse of the list
    check("hostile_order", got[0] == hostile[-1] and got[-1] == hostile[0], str(got))
# ... and hostile bytes that JSON allows but XML does not: replaced, still well-formed
check("hostile_control_replaced", "\u0001" not in text and "\ufffd" in text)

# --- Markdown: the SVG files it links, each well-formed
os.makedirs(f"{TMP}/md dir", exist_ok=True)
r = run("report", f"{TMP}/demo.json", f"{TMP}/mit.json", f"{TMP}/hostile.json", "--format", "md", "-o",
        f"{TMP}/md dir/pr comment.md")
check("md_report", r.returncode == 0, r.stderr)
md = open(f"{TMP}/md dir/pr comment.md", encoding="utf-8").read()
links = re.findall(r"\]\(([^)\s]+\.svg)\)$", md, re.M)
files = sorted(os.listdir(f"{TMP}/md dir/pr comment-figures"))
check("md_links", len(links) >= 5 and len(links) == len(files), f"{links} vs {files}")
from urllib.parse import unquote
for ln in links:
    p = os.path.join(f"{TMP}/md dir", unquote(ln))
    check(f"md_file_{ln}", os.path.isfile(p), p)
    if os.path.isfile(p):
        try:
            svg = ET.parse(p).getroot()
            check(f"md_svg_{ln}", svg.tag == SVG + "svg")
        except ET.ParseError as e:
            check(f"md_svg_{ln}", False, str(e))
        check(f"md_xmllint_{ln}", xmllint_ok(p))
        self_contained(open(p, encoding="utf-8").read().replace('xmlns="http://www.w3.org/2000/svg"', ""), None,
                       f"md_{ln}", hostile="heatmap_3" in ln or "tensors_3" in ln)
check("md_no_raw_html", "<script" not in md.lower() and "<img" not in md.lower())
# entities stay whole (a Markdown escape inside one would show it as text)
check("md_entities", "&\\#" not in md and "campaign&#39;s" in md)
check("md_hostile_escaped", "&lt;img src=x onerror=alert\\(1\\)&gt;" in md, "hostile tensor name not found escaped")

print(f"{passes} passed, {fails} failed")
sys.exit(1 if fails else 0)
