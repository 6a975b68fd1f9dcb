#!/usr/bin/python3
"""ctest cli_fault_group_rows: by_tensor and by_bit of a campaign whose faults
are fault groups (docs/CAMPAIGNS.md, "Fault groups"), recounted by hand from
its trial records.

Two campaigns on the digits fixture with `bitflip run --local`: (a) group 0 a
single bit flip in the weights, group 1 a transient bit flip in the
activations; (b) group 0 a weight BER, group 1 activation flips. From
--trials-out, for each group g the test counts every trial's outcome under
the tensor of group g's first fault (its record's first fault with
"group": g) and under that fault's bit, and checks:

- by_tensor holds group 0's rows (its sites, "group": 0) then group 1's
  ("group": 1, named from campaign.fault_groups[0].sites), each with the
  outcome counts recounted here; a BER group has no counts (its trials are
  its rate's, by_rate);
- by_bit's rows, keyed (group, bit), are the recounted ones;
- the CSV's rows are the same counts, group 1's under sections
  "tensor.group1" and "bit.group1";
- two --shard halves merged give the unsharded rows;
- the Python client's Result tables have the same rows with a `group`
  column, each group's tensor weights adding up to 1;
- `bitflip report` labels the rows of groups 1.. "[group G] ..." (in its figures' text).

A third campaign has four groups (a weight BER, a 2-bit burst in the weights,
transient activation flips, stuck-at-0 activation bits): every group's rows,
in order after group 0's, each group's sites from campaign.fault_groups.

usage: fault_group_rows.py BITFLIP FIXTURES_DIR WORKDIR
"""
import collections
import csv
import io
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from bitflip.result import Result  # noqa: E402

OUTCOMES = ["masked", "tolerable", "critical", "due"]
failures = []


def check(ok, msg):
    if not ok:
        failures.append(msg)
        print("FAIL:", msg)


def run(bitflip, spec_path, work, tag, extra=()):
    out = os.path.join(work, tag + ".json")
    trials = os.path.join(work, tag + ".jsonl")
    subprocess.run([bitflip, "run", "--local", "--threads", "2", "--out", out, "--trials-out", trials, "--format", "json",
                    *extra, spec_path], check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        doc = json.load(f)
    with open(trials) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    return doc, recs


def recount(recs, ber_groups):
    """(group, tensor) -> outcome counts, (group, bit) -> outcome counts."""
    by_t = collections.defaultdict(lambda: [0, 0, 0, 0])
    by_b = collections.defaultdict(lambda: [0, 0, 0, 0])
    for r in recs:
        o = OUTCOMES.index(r["outcome"])
        seen = set()
        for f in r["faults"]:
            g = f["group"]
            if g in seen or g in ber_groups:
                continue
            seen.add(g)
            by_t[(g, f["tensor"])][o] += 1
            by_b[(g, min(f["bits"]))][o] += 1
    return by_t, by_b


def rows(doc, key):
    """The document's rows with trials: (group, tensor or bit) -> outcome counts."""
    arr = doc["by_tensor"] if key == "tensor" else doc["by_bit"]
    return {(row.get("group", 0), row[key]): [row["outcomes"][o] for o in OUTCOMES] for row in arr if row["trials"] > 0}


def check_campaign(bitflip, fixtures, work, tag, spec, ber_groups):
    spec = dict(spec, model=os.path.join(fixtures, "conformance", "demo_digits.onnx"),
                dataset=os.path.join(fixtures, "conformance", "demo_digits.eval.safetensors"))
    spec_path = os.path.join(work, tag + ".spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    doc, recs = run(bitflip, spec_path, work, tag)
    n = doc["summary"]["trials"]
    check(len(recs) == n and n > 0, f"{tag}: {len(recs)} records for {n} trials")
    by_t, by_b = recount(recs, ber_groups)
    check(dict(by_t) == rows(doc, "tensor"), f"{tag}: by_tensor {rows(doc, 'tensor')} vs recounted {dict(by_t)}")
    check(dict(by_b) == rows(doc, "bit"), f"{tag}: by_bit {rows(doc, 'bit')} vs recounted {dict(by_b)}")
    # the rows' order and names: group 0's sites, then group 1's, ...
    bt = doc["by_tensor"]
    want = [(0, s["name"]) for s in doc["campaign"]["sites"]]
    for g, fg in enumerate(doc["campaign"]["fault_groups"], 1):
        want += [(g, s["name"]) for s in fg["sites"]]
    check([(r["group"], r["tensor"]) for r in bt] == want, f"{tag}: by_tensor's rows are not the groups' sites in order")
    check(all(g not in ber_groups for g, _ in by_t), f"{tag}: a BER group has tensor rows")
    # each group's tensor rows count each trial once when the group faulted it
    for g in range(len(doc["campaign"]["fault_groups"]) + 1):
        if g in ber_groups:
            continue
        k = sum(sum(v) for (gg, _), v in by_t.items() if gg == g)
        check(k == n, f"{tag}: group {g}'s tensor rows count {k} trials of {n}")
    # the Python client's tables: a group column; each group's weights add up to 1
    res = Result(doc)
    py = {(r["group"], r["tensor"]): [r[o] for o in OUTCOMES] for r in res.rows("tensors") if r["trials"] > 0}
    check(py == dict(by_t), f"{tag}: Result.rows('tensors') {py}")
    for g in range(len(doc["campaign"]["fault_groups"]) + 1):
        w = sum(r["weight"] for r in res.rows("tensors") if r["group"] == g)
        check(abs(w - 1) < 1e-9, f"{tag}: group {g}'s tensor weights add up to {w}")
    pyb = {(r["group"], r["bit"]): [r[o] for o in OUTCOMES] for r in res.rows("bits")}
    check(pyb == dict(by_b), f"{tag}: Result.rows('bits') {pyb}")
    # CSV: the same counts, group 1's under their own sections
    csv_out = subprocess.run([bitflip, "run", "--local", "--threads", "1", "--format", "csv", spec_path], check=True,
                             capture_output=True, text=True).stdout
    got_t, got_b = {}, {}
    for row in csv.DictReader(io.StringIO(csv_out)):
        sec = row["section"]
        base, _, grp = sec.partition(".group")
        g = int(grp) if grp else 0
        counts = [int(row[o]) for o in OUTCOMES]
        if base == "tensor":
            got_t[(g, row["key"])] = counts
        elif base == "bit":
            got_b[(g, int(row["key"]))] = counts
    check(got_t == dict(by_t), f"{tag}: CSV tensor rows {got_t}")
    check(got_b == dict(by_b), f"{tag}: CSV bit rows {got_b}")
    # shards merged: the unsharded rows
    parts = []
    for i in range(2):
        p = os.path.join(work, f"{tag}.part{i}.json")
        subprocess.run([bitflip, "run", "--local", "--threads", "1", "--shard", f"{i}/2", "--out", p, "--format", "json",
                        spec_path], check=True, stdout=subprocess.DEVNULL)
        parts.append(p)
    merged = os.path.join(work, tag + ".merged.json")
    subprocess.run([bitflip, "merge", "--out", merged, *parts], check=True, stdout=subprocess.DEVNULL)
    with open(merged) as f:
        m = json.load(f)
    check(m["by_tensor"] == doc["by_tensor"] and m["by_bit"] == doc["by_bit"], f"{tag}: merged shards' rows differ")
    # the report names a group's tensors "[group G] name"
    md = os.path.join(work, tag + ".report.md")
    subprocess.run([bitflip, "report", "-o", md, "--format", "md", os.path.join(work, tag + ".json")], check=True,
                   stdout=subprocess.DEVNULL)
    with open(md) as f:
        text = f.read().replace("\\", "")
    labels = {int(x) for x in re.findall(r"\[group (\d+)\] ", text)}
    check(labels and labels <= {g for g, _ in by_t if g > 0}, f"{tag}: the report labels groups {labels}")


def main():
    bitflip, fixtures, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    act = {"target": "activations", "persistence": "transient", "tensors": ["*"], "positions": [23, 30]}
    check_campaign(bitflip, fixtures, work, "flip_flip",
                   {"seed": 11, "trials": 60, "faults": [{"model": "bitflip", "positions": [22, 29, 30]}, act]}, set())
    check_campaign(bitflip, fixtures, work, "ber_flip",
                   {"seed": 5, "faults": [{"model": "ber", "rates": [1e-5, 1e-4], "repeats": 20}, act]}, {0})
    # four groups: a weight BER, a 2-bit burst in weights, transient flips and stuck-at-0 bits in activations
    check_campaign(bitflip, fixtures, work, "four",
                   {"seed": 9, "faults": [{"model": "ber", "rates": [1e-5], "repeats": 30},
                                          {"target": "weights", "tensors": ["fc.weight"], "bits": 2, "burst": True},
                                          act, {"target": "activations", "model": "stuck_at_0", "tensors": ["/Relu*"]}]},
                   {0})
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("fault group rows: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
