"""The campaign spec's JSON Schema against the C validator.

    check_schema.py SCHEMA.json CAMPAIGNS.md TEST_SPEC

1. The schema is a valid draft 2020-12 schema.
2. Every ```json block of docs/CAMPAIGNS.md is valid under it.
3. On a corpus of specs (the docs' examples and seeded random mutations of them),
   the schema and `TEST_SPEC --check` (the C validator) give the same verdict. The
   schema cannot express three rules the C validator checks; `extra_rules` applies
   them on top of the schema so that the verdicts can be compared exactly.
   "faults" as a list of fault groups (docs/CAMPAIGNS.md, "Fault groups"): the
   schema holds the list's shape only (1 to 4 objects) and the C validator judges
   the groups' fields; the corpus has lists of one group (which must be judged as
   their object is, by the schema and extra_rules) and malformed lists, and
   test_spec's fault_groups_hostile the rest.

Exits 77 (a skipped test for ctest) when python3-jsonschema is not installed.
"""
import copy
import json
import os
import random
import re
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("python3-jsonschema is not installed: skipped")
    sys.exit(77)

SEED = 20240613
N_RANDOM = 3000

ENTRY = {"tensor": "fc.weight", "index": 3, "bit": 7}

# (path, values): each value replaces the field; DELETE removes it.
DELETE = object()
MUTATIONS = [
    (("model",), ["x.onnx", "", 1, None, DELETE]),
    (("dataset",), ["d", "", [], DELETE]),
    (("seed",), [0, 5, -1, 1.5, "1", 2**63 - 1, 2.0, DELETE]),
    (("trials",), [1, 0, 10**9, 10**9 + 1, 2.0, 2.5, True, DELETE]),
    (("batch",), [1, 0, 2**24, 2**24 + 1, DELETE]),
    (("sampling",), ["uniform", "per_tensor", "per_bit", "list", "bogus", 3, None,
                     {"list": [ENTRY]}, {"list": []}, {}, {"list": [ENTRY], "x": 1},
                     {"list": [dict(ENTRY, sample=2)]}, {"list": [{"tensor": "w", "index": 0, "bit": 12}]},
                     {"list": [{"tensor": "w", "index": 0, "bit": 31}]},
                     {"list": [{"tensor": "w", "index": -1, "bit": 1}]},
                     {"list": [{"tensor": "w", "bit": 1}]}, {"list": [7]}, DELETE]),
    (("metrics",), [["auc"], [], ["auc", "auc"], ["nope"], "auc", ["ne", "mse", "max_abs"],
                    ["perplexity", "token_accuracy", "choice_accuracy"], ["perplexity", "perplexity"], DELETE]),
    (("critical",), [{"metric": "auc", "delta": 0.1}, {"metric": "perplexity", "delta": 2.5}, {"metric": "auc"}, {"metric": "auc", "delta": 0},
                     {"metric": "x", "delta": 1}, {"metric": "auc", "delta": 1, "x": 1}, [], DELETE,
                     {"pixels": 0.05}, {"pixels": 0}, {"pixels": 1}, {"pixels": -0.1}, {"metric": "miou", "delta": 0.02},
                     {"metric": "miou", "delta": 0.02, "pixels": 0.1}, {"delta": 0.1, "pixels": 0.1}, {}, {"score_threshold": 0.3},
                     {"score_threshold": -2, "pixels": 0.1}, {"score_threshold": "x"}]),
    (("generate",), [{"new_tokens": 8}, {"new_tokens": 0}, {"new_tokens": 256}, {"new_tokens": 257}, {"new_tokens": 2.5},
                     {}, {"new_tokens": 4, "x": 1}, 8, DELETE]),
    (("metrics",), [["generation_match", "edit_distance"], ["first_divergence"]]),
    (("critical",), [{"metric": "generation_match", "delta": 0.1}, {"metric": "edit_distance", "delta": 2}]),
    (("stop",), [{"margin": 0.01}, {"margin": 0.5}, {"margin": 0.01, "confidence": 0.5},
                 {"margin": 0.01, "confidence": 0.99}, {}, {"confidence": 0.9}, 0.01, DELETE]),
    (("extra",), [1]),
    (("faults",), [{}, [], None, DELETE, [{}], [{"model": "ber", "rate": 1e-3}], [{"bits": 40}], [[{}]], [{}, {}, {}, {}, {}], [3]]),
    (("faults", "target"), ["weights", "activations", "inputs", "x", DELETE]),
    (("faults", "tensors"), [["*"], [], ["op:"], ["op:Gemm", "a?"], [""], "*", DELETE]),
    (("faults", "model"), ["bitflip", "stuck_at_0", "stuck_at_1", "random_value", "ber", "profiled", "x",
                                DELETE]),
    (("faults", "bits"), [1, 2, 3, 8, 9, 16, 17, 32, 33, 0, DELETE]),
    (("faults", "positions"), [[0], [7], [8], [15], [16], [31], [32], [1, 1], [], [1, 2, 3], [3, 5, 6],
                               [-1], DELETE]),
    (("faults", "burst"), [True, False, 1, "word", "Word", DELETE]),
    (("faults", "words"), [2, 3, 64, 65, 1, 0, 2.5, "2", DELETE]),
    (("faults", "bits"), [40, 64, 65]),
    (("faults", "rate"), [1e-3, 0, 1, 1.5, "x", DELETE]),
    (("faults", "rates"), [[1e-3], [], [0], [1e-9, 1], DELETE]),
    (("faults", "repeats"), [1, 0, 10**6, 10**6 + 1, DELETE]),
    (("faults", "representation"), ["fp32", "fp16", "bf16", "int8", "int4", "int2", "uint8", "uint3", "x", DELETE]),
    (("faults", "w_max"), [0.1, 0, -1, "x", DELETE]),
    (("faults", "error_map"), ["chip.bfmap", "", 3, DELETE]),
    (("faults", "per_channel"), [True, False, DELETE]),
    (("faults", "group_size"), [32, 128, 0, -1, 1048577, 2.5, "x", DELETE]),
    (("faults", "fault_scales"), [True, False, 1, DELETE]),
    (("faults", "persistence"), ["permanent", "transient", "x", DELETE]),
    (("faults", "postions"), [[1]]),
    (("mitigations",), [["ecc"], ["ecc", "sbp"], [{"name": "e", "ecc": True}], [{"name": "e", "ecc": {}}],
                        [{"name": "e", "ecc": {"check_bits_faulty": True}}],
                        [{"name": "e", "ecc": {"check_bits_faulty": False, "tensors": ["w*"]}}],
                        [{"name": "e", "ecc": {"check_bits_faulty": 1}}], [{"name": "e", "ecc": False}],
                        [{"name": "e", "ecc": {"tensors": []}}], [{"name": "e", "ecc": {"x": 1}}], ["ecc", "ecc"],
                        [{"name": "e", "ecc": {"tensors": [""]}}], DELETE]),
]

REPR_BITS = {"fp32": 32, "fp16": 16, "bf16": 16}
REPR_BITS.update({"%sint%d" % (u, m): m for u in ("", "u") for m in range(2, 9)})


def doc_examples(md):
    return [json.loads(m) for m in re.findall(r"```json\n(.*?)```", md, re.S)]


def doc_text(md_path):
    """docs/CAMPAIGNS.md and, after it, the parts split from it by subject
    (docs/campaigns/*.md: the examples, the results): the page as it reads
    whole, so that its examples are all the docs' examples."""
    with open(md_path) as fh:
        text = fh.read()
    parts = os.path.join(os.path.dirname(md_path), os.path.basename(md_path)[:-3].lower())
    for name in sorted(os.listdir(parts)) if os.path.isdir(parts) else []:
        if name.endswith(".md"):
            with open(os.path.join(parts, name)) as fh:
                text += "\n" + fh.read()
    return text


def mutate(spec, path, value):
    s = copy.deepcopy(spec)
    obj = s
    for key in path[:-1]:
        if not isinstance(obj.get(key), dict):
            obj[key] = {}
        obj = obj[key]
    if value is DELETE:
        obj.pop(path[-1], None)
    else:
        obj[path[-1]] = copy.deepcopy(value)
    return s


PROTECTIONS = ("clip", "abft", "sbp", "range", "ecc")


def mitigation_rules(spec):
    """Mitigations: unique names ("none" without protections may repeat: it is
    the baseline), bounds [lo, hi] with lo <= hi, no percentile with fixed
    bounds, range and ecc only for weight faults, ecc's check_bits_faulty only
    with model ber."""
    seen = {"none"}
    if "mitigations" in spec and ("stop" in spec or spec["faults"].get("fault_scales") is True):
        return False   # every configuration runs every trial; they protect weights, not scales
    for m in spec.get("mitigations", []):
        if isinstance(m, str):
            m = {"name": m, m: True} if m != "none" else {"name": "none"}
        name = m["name"]
        if name == "none" and not any(k in m for k in PROTECTIONS):
            continue
        if name in seen:
            return False
        seen.add(name)
        for k in ("clip", "range"):
            o = m.get(k)
            if isinstance(o, dict) and isinstance(o.get("bounds"), list):
                lo, hi = o["bounds"]
                if not lo <= hi or (k == "clip" and "percentile" in o):
                    return False
        if ("range" in m or "ecc" in m) and spec["faults"].get("target", "weights") != "weights":
            return False
        ecc = m.get("ecc")
        if isinstance(ecc, dict) and ecc.get("check_bits_faulty") is True and spec["faults"].get("model", "bitflip") != "ber":
            return False
    return True


VALIDATOR = None   # main's, for a one-group list judged as its object


def extra_rules(spec):
    """The C validator's rules the schema cannot state; spec is schema-valid."""
    if isinstance(spec.get("faults"), list):
        if len(spec["faults"]) != 1:
            raise AssertionError("the corpus has lists of one group only: %s" % json.dumps(spec))
        one = dict(spec, faults=spec["faults"][0])
        return VALIDATOR.is_valid(one) and extra_rules(one)
    if not mitigation_rules(spec):
        return False
    f = spec["faults"]
    if isinstance(spec.get("sampling"), dict):
        return True
    model = f.get("model", "bitflip")
    if model == "ber":
        rates = f["rates"] if "rates" in f else [f["rate"]]
        return len(rates) * int(f.get("repeats", 1)) <= 10**9
    if model in ("random_value", "profiled"):
        return True
    if f.get("burst") == "word" or "words" in f:
        return True   # a multi-bit upset in 64-bit words: no per-value bit rules
    bits = int(f.get("bits", 1))
    width = 16 if f.get("fault_scales") is True else REPR_BITS[f.get("representation", "fp32")]
    allowed = sorted(int(p) for p in f["positions"]) if "positions" in f else list(range(width))
    if bits > len(allowed):
        return False
    if f.get("burst", False):
        run = longest = 1
        for a, b in zip(allowed, allowed[1:]):
            run = run + 1 if b == a + 1 else 1
            longest = max(longest, run)
        if longest < bits:
            return False
    return True


def main():
    schema_path, md_path, test_spec = sys.argv[1:4]
    with open(schema_path) as fh:
        schema = json.load(fh)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    global VALIDATOR
    VALIDATOR = validator

    examples = doc_examples(doc_text(md_path))
    assert len(examples) >= 3, "expected at least 3 examples in %s" % md_path
    for i, ex in enumerate(examples):
        errs = list(validator.iter_errors(ex))
        assert not errs, "docs example %d is invalid under the schema: %s" % (i + 1, errs[0].message)

    bases = examples + [
        {"model": "m", "dataset": "d", "trials": 10, "faults": {}},
        {"model": "m", "dataset": "d", "faults": {"model": "profiled", "error_map": "c.bfmap", "repeats": 3,
                                                  "representation": "uint4", "w_max": 0.1}},
        {"model": "m", "dataset": "d", "faults": {"model": "ber", "rates": [1e-4, 1e-2], "representation": "int3"}},
        {"model": "m", "dataset": "d", "faults": {"model": "ber", "rate": 1e-4}},
        {"model": "m", "dataset": "d", "trials": 10,
         "faults": {"representation": "int4", "group_size": 32, "fault_scales": True, "positions": [14, 10]}},
        {"model": "m", "dataset": "d", "trials": 10,
         "faults": {"representation": "int8", "bits": 2, "burst": True, "positions": [1, 2, 5]}},
        {"model": "m", "dataset": "d", "trials": 10, "faults": {"burst": "word", "bits": 40}},
        {"model": "m", "dataset": "d", "trials": 10, "faults": {"words": 4, "representation": "int8", "positions": [7]}},
        {"model": "m", "dataset": "d", "faults": {"model": "ber", "rates": [1e-3, 1e-2], "burst": "word", "bits": 3}},
        {"model": "m", "dataset": "d", "faults": {"model": "ber", "rate": 1e-3, "words": 2, "representation": "bf16"}},
        {"model": "m", "dataset": "d", "faults": {"target": "activations", "persistence": "transient"},
         "sampling": {"list": [dict(ENTRY, sample=0)]}},
        {"model": "m", "dataset": "d", "trials": 10, "faults": {}, "generate": {"new_tokens": 8},
         "metrics": ["generation_match", "first_divergence", "edit_distance", "perplexity"],
         "critical": {"metric": "edit_distance", "delta": 1.5}},
    ]
    rng = random.Random(SEED)
    corpus = list(bases)
    for base in bases:
        for path, values in MUTATIONS:
            for v in values:
                corpus.append(mutate(base, path, v))
    for _ in range(N_RANDOM):
        s = rng.choice(bases)
        for _ in range(rng.randint(1, 4)):
            path, values = rng.choice(MUTATIONS)
            s = mutate(s, path, rng.choice(values))
        corpus.append(s)

    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, spec in enumerate(corpus):
            name = os.path.join(tmp, "%05d.json" % i)
            with open(name, "w") as fh:
                json.dump(spec, fh)
            files.append(name)
        out = subprocess.run([test_spec, "--check"] + files, capture_output=True, text=True)
        if out.returncode not in (0, 1):
            sys.exit("test_spec --check failed (%d): %s" % (out.returncode, out.stderr))
    c_verdict, details, current = {}, {}, None
    for line in out.stdout.splitlines():
        if line.startswith("  "):
            details[current].append(line.strip())
        else:
            verdict, name = line.split(" ", 1)
            current = int(os.path.basename(name).split(".")[0])
            c_verdict[current] = verdict == "valid"
            details[current] = []

    mismatches = 0
    for i, spec in enumerate(corpus):
        # is_valid stops at the first error (the verdict is the same as an empty
        # iter_errors'); the errors themselves are listed only for a mismatch
        schema_ok = validator.is_valid(spec) and extra_rules(spec)
        if schema_ok != c_verdict[i]:
            errs = list(validator.iter_errors(spec))
            mismatches += 1
            if mismatches <= 10:
                print("MISMATCH: schema says %s, C says %s:\n  %s" % (
                    "valid" if schema_ok else "invalid", "valid" if c_verdict[i] else "invalid",
                    json.dumps(spec)))
                for e in errs[:3]:
                    print("  schema: %s: %s" % ("/" + "/".join(map(str, e.absolute_path)), e.message))
                for d in details[i]:
                    print("  C: " + d)
    valid = sum(c_verdict.values())
    print("%d specs (%d valid, %d invalid), %d docs examples; %d mismatches" % (
        len(corpus), valid, len(corpus) - valid, len(examples), mismatches))
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
