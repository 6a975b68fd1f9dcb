"""IVMOD in results and the pictures of `bitflip report`, against references
made here.

usage: report_pictures_check.py BITFLIP FIXTURES_DIR TMP_DIR

TMP_DIR holds what test_report_pictures.sh ran: det/seg/cls results with
their trial records, the merged shards, the reports det.html and cls.html,
and detlist/seglist (list campaigns of the fixtures' reference faults).

- ivmod: per tensor, per bit and per tensor x bit, the trial records'
  changed_predictions (the critical images) summed by hand, their squares,
  trials x samples, the rate, and the Student-t interval from scipy;
  absent for classification; the same after a sharded run is merged.
- the IVMOD bars: one per group, its counts the result's, bar lengths in
  proportion to the rates.
- a trial's picture: the boxes drawn are PyTorch's detections over the score
  threshold (count, class, score) for golden and under the reference fault;
  the masks' pixels (decoded from the PNGs) differ where PyTorch's arg-max
  does; the image is the eval set's, stretched to 0..255.
Prints "N passed, N failed"; exit 1 on a failure."""
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib

import numpy as np
from scipy import stats

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/clients/python")
from bitflip.safetensors import read_safetensors  # noqa: E402

BF, FIX, TMP = sys.argv[1:4]
SVG = "{http://www.w3.org/2000/svg}"
passes = fails = 0


def check(name, cond, detail=""):
    global passes, fails
    if cond:
        passes += 1
    else:
        fails += 1
        print(f"FAIL {name} {detail}")


def load(p):
    return json.load(open(f"{TMP}/{p}"))


def records(p):
    return [json.loads(line) for line in open(f"{TMP}/{p}")]


# --- ivmod against the records ------------------------------------------

def expect_ivmod(recs, samples, conf=0.95):
    ks = [r["changed_predictions"] for r in recs]
    t = len(ks)
    want = {"trials": t, "images": t * samples, "critical_images": sum(ks),
            "critical_images_sumsq": sum(k * k for k in ks)}
    rate = sum(ks) / (t * samples)
    if t > 1:
        x = np.array(ks, float) / samples
        half = stats.t.ppf(1 - (1 - conf) / 2, t - 1) * x.std(ddof=1) / np.sqrt(t)
        ci = (max(0.0, rate - half), min(1.0, rate + half))
    else:
        ci = (None, None)
    return want, rate, ci


def same_ivmod(name, got, recs, samples):
    want, rate, ci = expect_ivmod(recs, samples)
    check(f"{name}_counts", got and {k: got.get(k) for k in want} == want, f"{got} vs {want}")
    if not got:
        return
    check(f"{name}_rate", abs(got["rate"] - rate) < 1e-12, f"{got['rate']} vs {rate}")
    if ci[0] is None:
        check(f"{name}_ci_null", got["ci"] == [None, None], str(got["ci"]))
    else:   # bitflip's t quantile: Cornish-Fisher's (within 0.2% for 3 or more degrees of freedom), exact below
        tol = 1e-9 + 0.01 * max(rate - ci[0], ci[1] - rate)
        check(f"{name}_ci", abs(got["ci"][0] - ci[0]) <= tol and abs(got["ci"][1] - ci[1]) <= tol + 1e-9,
              f"{got['ci']} vs {ci}")


def check_sums(kind):
    doc, recs = load(f"{kind}.res.json"), records(f"{kind}.jsonl")
    n = doc["golden"]["samples"]
    check(f"{kind}_some_critical", sum(r["changed_predictions"] for r in recs) > 0)
    for g in doc["by_tensor"]:
        mine = [r for r in recs if r["faults"][0]["tensor"] == g["tensor"]]
        if not mine:
            continue
        same_ivmod(f"{kind}_tensor_{g['tensor']}", g.get("ivmod"), mine, n)
        for c in g["by_bit"]:
            sub = [r for r in mine if min(r["faults"][0]["bits"]) == c["bit"]]
            same_ivmod(f"{kind}_tensor_{g['tensor']}_bit_{c['bit']}", c.get("ivmod"), sub, n)
    bits = sorted({min(r["faults"][0]["bits"]) for r in recs})
    check(f"{kind}_bits", [b["bit"] for b in doc["by_bit"]] == bits)
    for b in doc["by_bit"]:
        same_ivmod(f"{kind}_bit_{b['bit']}", b.get("ivmod"), [r for r in recs if min(r["faults"][0]["bits"]) == b["bit"]], n)


check_sums("det")
check_sums("seg")
cls = load("cls.res.json")
check("cls_no_ivmod", "ivmod" not in json.dumps(cls))
merged, whole = load("merged.json"), load("det.res.json")
check("merge_ivmod", [g.get("ivmod") for g in merged["by_tensor"]] == [g.get("ivmod") for g in whole["by_tensor"]] and
      [g.get("ivmod") for g in merged["by_bit"]] == [g.get("ivmod") for g in whole["by_bit"]])


# --- the IVMOD bars ---------------------------------------------------------

def figure(html, name):
    m = re.search(r'<figure id="fig-%s">\s*(<svg.*?</svg>)' % re.escape(name), html, re.S)
    return ET.fromstring(m.group(1).replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1)) if m else None


def bars(svg):
    out = []
    for g in svg.iter(SVG + "g"):
        if g.get("class") != "bfr-ivmod":
            continue
        label = g.find(SVG + "text").text
        rect = g.find(f"{SVG}g/{SVG}rect")
        out.append((label, int(g.get("data-critical")), int(g.get("data-images")), float(rect.get("width"))))
    return out


html = open(f"{TMP}/det.html").read()
for fig, groups, key in (("ivmod_tensors", whole["by_tensor"], lambda g: g.get("torch_name") or g["tensor"]),
                         ("ivmod_bits", whole["by_bit"], lambda g: f"bit {g['bit']}")):
    svg = figure(html, fig)
    check(f"{fig}_drawn", svg is not None)
    if svg is None:
        continue
    got = bars(svg)
    want = {key(g): (g["ivmod"]["critical_images"], g["ivmod"]["images"]) for g in groups if g["ivmod"]["images"]}
    check(f"{fig}_counts", {b[0]: (b[1], b[2]) for b in got} == want, f"{got} vs {want}")
    # bar length over rate: one scale for every bar (1-decimal coordinates)
    scale = [w / (k / n) for _, k, n, w in got if k]
    check(f"{fig}_lengths", scale and max(scale) - min(scale) <= 0.15 / min(k / n for _, k, n, _ in got if k) + 1e-9,
          str(scale))
    check(f"{fig}_zero_bars", all(w == 0 for _, k, _, w in got if k == 0))
    if fig == "ivmod_bits":
        check("ivmod_bits_order", [b[0] for b in got] == sorted([b[0] for b in got], key=lambda s: -int(s[4:])))
check("cls_no_ivmod_figure", "fig-ivmod" not in open(f"{TMP}/cls.html").read())


# --- pictures of a trial ----------------------------------------------------

def picture(spec, result, trial, image):
    out = f"{TMP}/pic_{trial}_{image}.html"
    p = subprocess.run([BF, "report", f"{TMP}/{result}", "--spec", f"{TMP}/{spec}", "--trial", str(trial), "--image",
                        str(image), "-o", out], capture_output=True, text=True)
    check(f"picture_{spec}_{trial}_{image}_exit", p.returncode == 0, p.stderr)
    return figure(open(out).read(), "trial") if p.returncode == 0 else None


def boxes(svg, cls):
    return sorted((int(g.get("data-label")), float(g.get("data-score"))) for g in svg.iter(SVG + "g") if g.get("class") == cls)


def torch_dets(out, thr=0.5):
    return sorted((int(lb), float(s)) for lb, s in zip(out["labels"], out["scores"]) if s > thr)


def same_dets(name, got, want):
    check(name, len(got) == len(want) and all(a[0] == b[0] and abs(a[1] - b[1]) < 1e-4 for a, b in zip(got, want)),
          f"{got} vs {want}")


ref = json.load(open(f"{FIX}/onesample/onesample_det.ref.json"))
n_ref = ref["n_ref_samples"]
# the (fault, image) pairs whose count of detections changes most, and one that stays
pairs = sorted(((abs(len(torch_dets(f["outputs"][i])) - len(torch_dets(ref["golden"][i]))), k, i)
                for k, f in enumerate(ref["faults"]) for i in range(n_ref)), reverse=True)
for _, k, i in pairs[:2] + pairs[-1:]:
    svg = picture("detlist.json", "detlist.res.json", k, i)
    if svg is None:
        continue
    same_dets(f"golden_boxes_{k}_{i}", boxes(svg, "bfr-box-golden"), torch_dets(ref["golden"][i]))
    same_dets(f"faulty_boxes_{k}_{i}", boxes(svg, "bfr-box-faulty"), torch_dets(ref["faults"][k]["outputs"][i]))


def png_pixels(href):
    """RGB of a PNG as bitflip writes it (8-bit RGB, filter 0 rows)"""
    import base64
    data = base64.b64decode(href.split(",", 1)[1])
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    idat, p = b"", 8
    while p < len(data):
        n = int.from_bytes(data[p:p + 4], "big")
        if data[p + 4:p + 8] == b"IDAT":
            idat += data[p + 8:p + 8 + n]
        p += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, w * 3 + 1)
    check("png_filter_0", (raw[:, 0] == 0).all())
    return raw[:, 1:].reshape(h, w, 3)


seg = json.load(open(f"{FIX}/det/unet.ref.json"))
H, W = seg["image_size"]
gold = np.array(seg["golden"][0], float).reshape(-1, H, W)
best = max(range(len(seg["faults"])),
           key=lambda k: (np.array(seg["faults"][k]["outputs"][0]).reshape(-1, H, W).argmax(0) != gold.argmax(0)).sum())
svg = picture("seglist.json", "seglist.res.json", best, 0)
if svg is not None:
    imgs = {}
    for g in svg.iter(SVG + "g"):
        if g.get("class") == "bfr-panel":
            imgs[g.get("data-panel")] = png_pixels(g.find(SVG + "image").get("href"))
    faulty = np.array(seg["faults"][best]["outputs"][0], float).reshape(-1, H, W)

    def ambiguous(x):   # pixels whose top two logits are within PyTorch's distance from ours
        s = np.sort(x, axis=0)
        return s[-1] - s[-2] < 1e-4
    changed_torch = faulty.argmax(0) != gold.argmax(0)
    changed_ours = (imgs["golden"] != imgs["faulty"]).any(axis=2)
    amb = ambiguous(gold) | ambiguous(faulty)
    check("seg_some_change", changed_torch.sum() > 0)
    check("seg_changed_pixels", (changed_torch == changed_ours)[~amb].all() and changed_ours.shape == (H, W),
          f"{changed_ours.sum()} vs {changed_torch.sum()}")
    # golden pixels of one class share one colour, and classes differ
    gcls = gold.argmax(0)
    cols = {c: {tuple(v) for v in imgs["golden"][(gcls == c) & ~amb]} for c in np.unique(gcls)}
    check("seg_class_colours", all(len(v) <= 1 for v in cols.values()) and
          len({next(iter(v)) for v in cols.values() if v}) == len([v for v in cols.values() if v]), str(cols))
    caption = "".join(t.text or "" for t in svg.iter(SVG + "text") if (t.text or "").startswith("faulty mask"))
    check("seg_caption", f"{changed_ours.sum()} pixel" in caption, caption)
    # the image: the eval set's, stretched from its min to its max
    x = read_safetensors(f"{FIX}/det/unet.eval.safetensors")[seg["inputs"][0]][0]
    want = np.rint(255 * (x - x.min()) / (x.max() - x.min())).transpose(1, 2, 0)
    check("seg_image", np.abs(imgs["image"].astype(int) - want).max() <= 1)

print(f"{passes} passed, {fails} failed")
sys.exit(1 if fails else 0)
