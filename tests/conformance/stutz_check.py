"""Fixed point and profiled error maps against independent references
(Stutz et al.'s formulas in numpy, study/stutz/quant_ref.py, and PyTorch):

    stutz_check.py PART BITFLIP FIXED_DUMP SOURCE_DIR

PART is one of
  quant  every width 8..2, symmetric and asymmetric, per tensor and per channel,
         with and without w_max: the stored codes and values, and flips and
         stuck-at faults on random 32-bit masks (only the m stored bits count),
         equal to numpy's exactly.
  ber    random bit errors at int4 and uint3: the bits a sweep flips are
         binomial (each of the m stored bits with probability p: within 5
         standard deviations of p x bits x repeats), and never past bit m-1.
  map    a profiled map (flip, stuck-at-0, stuck-at-1 cells) over a 4 x 3
         tensor in a 20-cell memory, so the map wraps around the 48 or 36
         stored bits: each trial's corrupted values, bit-error count and MSE
         equal numpy's at the trial's offset.
  torch  a CNN under a profiled map at int4 with w_max and at uint3: the
         corrupted weights computed by numpy, loaded into the PyTorch model,
         give bitflip's accuracy trial by trial (and the quantized golden one).

Exits 77 (skipped, with the reason) when numpy, or for `torch` PyTorch or
onnx, is missing.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy is not installed (scripts/install-deps.sh --test installs python3-numpy): skipped")
    sys.exit(77)

PART, BITFLIP, FIXED_DUMP, SRC = sys.argv[1:5]
sys.path.insert(0, os.path.join(SRC, "study", "stutz"))
import bfmap  # noqa: E402
import quant_ref as qr  # noqa: E402

FIX = os.path.join(SRC, "tests", "fixtures", "stutz")
REPRS = ["int%d" % m for m in range(8, 1, -1)] + ["uint%d" % m for m in range(8, 1, -1)]
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL", msg)


def run_campaign(tmp, spec, name):
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as fh:
        json.dump(spec, fh)
    out, trials = os.path.join(tmp, name + ".out.json"), os.path.join(tmp, name + ".trials.jsonl")
    r = subprocess.run([BITFLIP, "run", "--local", path, "--threads", "2", "--format", "json", "--out", out,
                        "--trials-out", trials], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("bitflip run %s failed (%d): %s" % (name, r.returncode, r.stderr))
    with open(out) as fh:
        doc = json.load(fh)
    with open(trials) as fh:
        recs = [json.loads(line) for line in fh if line.strip()]
    return doc, recs


def part_quant():
    rng = np.random.default_rng(2021)
    w = rng.normal(0, 0.08, size=(6, 5)).astype(np.float32)
    w[0, 0], w[1, 1], w[2, 2] = 0.3, -0.25, 0.0      # past w_max = 0.1, and a zero
    w[3, :] = 0.05                                   # a constant channel
    masks = rng.integers(0, 2 ** 32, size=w.size, dtype=np.uint64).astype(np.uint32)
    blob = w.astype("<f4").tobytes() + masks.astype("<u4").tobytes()
    for r in REPRS:
        m, _ = qr.parse(r)
        for per_channel in (0, 1):
            for w_max in (0.0, 0.1):
                out = subprocess.run([FIXED_DUMP, r, str(per_channel), repr(w_max), str(w.shape[0])], input=blob,
                                     capture_output=True, check=True).stdout
                n = w.size
                codes = np.frombuffer(out[:4 * n], dtype="<u4")
                vals = np.frombuffer(out[4 * n:], dtype="<f4").reshape(n, 4)
                s, lo = qr.params(w, r, bool(per_channel), w_max)
                s, lo, flat = s.reshape(-1), lo.reshape(-1), w.reshape(-1)
                ref_codes = qr.encode(flat, s, lo, r)
                what = "%s per_channel=%d w_max=%g" % (r, per_channel, w_max)
                if not np.array_equal(codes, ref_codes):
                    fail("%s: codes %s, numpy %s" % (what, codes[:8], ref_codes[:8]))
                    continue
                mm = masks.astype(np.int64) & (2 ** m - 1)   # only the m stored bits
                refs = [qr.decode(ref_codes, s, lo, r),
                        qr.decode(ref_codes.astype(np.int64) ^ mm, s, lo, r),
                        qr.decode(ref_codes.astype(np.int64) & ~mm, s, lo, r),
                        qr.decode(ref_codes.astype(np.int64) | mm, s, lo, r)]
                for k, name in enumerate(("golden", "bitflip", "stuck_at_0", "stuck_at_1")):
                    if not np.array_equal(vals[:, k], refs[k].astype(np.float32)):
                        i = int(np.nonzero(vals[:, k] != refs[k])[0][0])
                        fail("%s %s: element %d is %r, numpy %r" % (what, name, i, vals[i, k], refs[k][i]))
                # the codes are m-bit: every value is one of 2^m levels
                if codes.max() >= 2 ** m:
                    fail("%s: a code past %d bits" % (what, m))
    print("quant: %d representations x per-channel x w_max checked" % len(REPRS))


def part_ber(tmp):
    for r, rates in (("int4", [1e-3, 1e-2, 5e-2]), ("uint3", [1e-4, 1e-2])):
        m, _ = qr.parse(r)
        repeats = 200
        doc, recs = run_campaign(tmp, {
            "model": os.path.join(FIX, "cnn.onnx"), "dataset": os.path.join(FIX, "cnn.eval.safetensors"),
            "seed": 5, "faults": {"model": "ber", "rates": rates, "repeats": repeats, "representation": r}}, "ber_" + r)
        bits = sum(s["elements"] for s in doc["campaign"]["sites"]) * m
        if int(doc["campaign"]["population"]) != bits:
            fail("%s: population %s, wanted %d stored bits" % (r, doc["campaign"]["population"], bits))
        for p in rates:
            got = sum(t["n_faults"] for t in recs if t["rate"] == p)
            mean, sd = p * bits * repeats, (p * (1 - p) * bits * repeats) ** 0.5
            ok = abs(got - mean) <= 5 * sd + 1
            print("ber %s p=%g: %d bit errors over %d trials, binomial mean %.1f sd %.1f%s" %
                  (r, p, got, repeats, mean, sd, "" if ok else "  <-- FAIL"))
            if not ok:
                fail("%s p=%g: %d bit errors, binomial %.1f +- %.1f" % (r, p, got, mean, sd))
        for t in recs:
            for f in t["faults"]:
                if any(b >= m for b in f["bits"]):
                    fail("%s trial %d: bit %s past the %d stored bits" % (r, t["trial"], f["bits"], m))


def corrupt(ws, r, cells, rows, cols, offset, w_max=0.0):
    """numpy: every tensor of ws (memory order) quantized, laid over the map
    at offset, corrupted; (golden list, corrupted list, failing bits)."""
    m, _ = qr.parse(r)
    codes, params = [], []
    for w in ws:
        s, lo = qr.params(w, r, False, w_max)
        codes.append(qr.encode(w.reshape(-1), s.reshape(-1), lo.reshape(-1), r))
        params.append((s.reshape(-1), lo.reshape(-1)))
    allc = np.concatenate(codes)
    kinds = bfmap.lay_over(allc.size * m, rows, cols, cells, offset)
    bad = qr.apply_cells(allc, kinds, m)
    golden, out, at = [], [], 0
    for w, c, (s, lo) in zip(ws, codes, params):
        golden.append(qr.decode(c, s, lo, r).reshape(w.shape))
        out.append(qr.decode(bad[at:at + c.size], s, lo, r).reshape(w.shape))
        at += c.size
    return golden, out, int((kinds >= 0).sum())


def linear_weights():
    """W of linear.onnx, as the fixture maker wrote it beside the model (read
    without the onnx package, which `make test` does not install)."""
    return np.load(os.path.join(FIX, "linear.W.npy"))


def part_map_real(tmp):
    rows, cols = 4, 5
    cells = {"flip": [1, 7, 13], "stuck_at_0": [12], "stuck_at_1": [18, 19]}
    mp = os.path.join(tmp, "m.bfmap")
    bfmap.write(mp, rows, cols, cells, voltage=0.6, chip="test")
    w = linear_weights()
    for r in ("uint4", "int3", "int8"):
        m, _ = qr.parse(r)
        doc, recs = run_campaign(tmp, {
            "model": os.path.join(FIX, "linear.onnx"), "dataset": os.path.join(FIX, "linear.eval.safetensors"),
            "seed": 11, "metrics": ["mse", "max_abs"],
            "faults": {"model": "profiled", "error_map": mp, "repeats": 12, "representation": r}}, "map_" + r)
        offsets = set()
        for t in recs:
            off = t["offset"]
            offsets.add(off)
            golden, (wc,), nbits = corrupt([w], r, cells, rows, cols, off)
            if t["n_faults"] != nbits:
                fail("%s trial %d: %d bit errors, numpy %d" % (r, t["trial"], t["n_faults"], nbits))
            diff = (wc - golden[0]).astype(np.float64).reshape(-1)
            changed = np.nonzero(diff)[0]
            for f in t["faults"]:
                i = f["index"]
                if np.float32(f["old"]) != golden[0].reshape(-1)[i] or np.float32(f["new"]) != wc.reshape(-1)[i]:
                    fail("%s trial %d element %d: %r -> %r, numpy %r -> %r" % (
                        r, t["trial"], i, f["old"], f["new"], golden[0].reshape(-1)[i], wc.reshape(-1)[i]))
            listed = {f["index"] for f in t["faults"]}
            if len(t["faults"]) < 8 and not set(changed.tolist()) <= listed:
                fail("%s trial %d: numpy changes elements %s, bitflip lists %s" % (r, t["trial"], changed, listed))
            mse = float(np.mean(diff ** 2))
            if abs(t["metrics"]["mse"] - mse) > 1e-6 * max(1.0, mse):
                fail("%s trial %d: mse %r, numpy %r" % (r, t["trial"], t["metrics"]["mse"], mse))
        # 12 offsets in 20 cells: several, and the map wraps (48 or 36 bits > 20 cells)
        if len(offsets) < 4:
            fail("%s: only offsets %s over 12 trials" % (r, sorted(offsets)))
        print("map %s: %d trials at offsets %s equal numpy" % (r, len(recs), sorted(offsets)))


def part_torch(tmp):
    try:
        import onnx
        import torch
        from onnx import numpy_helper
    except ImportError as e:
        print("%s is not installed (scripts/install-deps.sh --test installs it): skipped" % e.name)
        sys.exit(77)
    sys.path.insert(0, FIX)
    from make_stutz_fixtures import Cnn
    model = onnx.load(os.path.join(FIX, "cnn.onnx"))
    init = {t.name: numpy_helper.to_array(t).astype(np.float32) for t in model.graph.initializer}
    data = os.path.join(FIX, "cnn.eval.safetensors")
    with open(data, "rb") as fh:
        raw = fh.read()
    hl = int.from_bytes(raw[:8], "little")
    hdr = json.loads(raw[8:8 + hl])

    def tensor(name, dt):
        a, b = hdr[name]["data_offsets"]
        return np.frombuffer(raw[8 + hl + a:8 + hl + b], dtype=dt).reshape(hdr[name]["shape"])
    x, labels = torch.from_numpy(tensor("x", "<f4").copy()), tensor("labels", "<i8")
    net = Cnn().eval()

    def accuracy(ws, names):
        sd = {n: torch.from_numpy(np.ascontiguousarray(v)) for n, v in zip(names, ws)}
        net.load_state_dict(sd)
        with torch.no_grad():
            y = net(x).numpy()
        top2 = np.sort(y, axis=1)[:, -2:]
        ties = int((top2[:, 1] - top2[:, 0] < 1e-4).sum())
        return int((y.argmax(1) == labels).sum()), ties

    rows, cols = 32, 64   # 2048 cells: smaller than the model's bits, so it wraps too
    cells = bfmap.generate(rows, cols, 0.02, "columns", seed=7)
    mp = os.path.join(tmp, "cnn.bfmap")
    bfmap.write(mp, rows, cols, cells)
    for r, w_max in (("int4", 0.3), ("uint3", 0.0)):
        faults = {"model": "profiled", "error_map": mp, "repeats": 10, "representation": r}
        if w_max:
            faults["w_max"] = w_max
        doc, recs = run_campaign(tmp, {"model": os.path.join(FIX, "cnn.onnx"), "dataset": data, "seed": 3,
                                       "metrics": ["accuracy"], "faults": faults}, "torch_" + r)
        names = [s["name"] for s in doc["campaign"]["sites"]]
        ws = [init[n] for n in names]
        n = len(labels)
        for t in recs:
            golden, bad, _ = corrupt(ws, r, cells, rows, cols, t["offset"], w_max)
            if t["trial"] == 0:
                g, ties = accuracy(golden, names)
                got = round(doc["golden"]["accuracy"] * n)
                if abs(got - g) > ties:
                    fail("%s golden: bitflip %d/%d correct, PyTorch %d" % (r, got, n, g))
            c, ties = accuracy(bad, names)
            got = round(t["metrics"]["accuracy"] * n)
            if abs(got - c) > ties:
                fail("%s trial %d: bitflip %d/%d correct, PyTorch %d (%d near ties)" % (r, t["trial"], got, n, c, ties))
        print("torch %s: golden %.3f; %d trials, accuracies %s equal PyTorch's" % (
            r, doc["golden"]["accuracy"], len(recs), [round(t["metrics"]["accuracy"], 3) for t in recs]))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        if PART == "quant":
            part_quant()
        elif PART == "ber":
            part_ber(tmp)
        elif PART == "map":
            part_map_real(tmp)
        elif PART == "torch":
            part_torch(tmp)
        else:
            sys.exit("unknown part %s" % PART)
    if fails:
        sys.exit("%d failures" % fails)


if __name__ == "__main__":
    main()
