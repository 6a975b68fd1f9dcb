"""The web page's JSON Schema validator (server/ui/validate.js) against
python3-jsonschema, on the corpus of campaign specs that tests/api/check_schema.py
builds (the docs' examples and seeded mutations of them) plus schema-only cases.

    validate_check.py SOURCE_DIR

Both must give the same verdict on every document, and every error the page
shows must carry a JSON Pointer to a place in the document. A schema keyword
the page's validator does not know fails here (validate.js refuses it).
Exits 77 (ctest SKIP) without node or python3-jsonschema.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("validate_check: SKIP: python3-jsonschema is not installed (scripts/install-deps.sh installs it)")
    sys.exit(77)
NODE = shutil.which("node")
if not NODE:
    print("validate_check: SKIP: node is not installed, so the page's validator cannot be run outside a browser")
    sys.exit(77)

src = sys.argv[1]
sys.path.insert(0, os.path.join(src, "tests", "api"))
import check_schema as cs  # noqa: E402  the same corpus as the C validator's check

with open(os.path.join(src, "api", "campaign.schema.json")) as fh:
    schema = json.load(fh)
examples = cs.doc_examples(cs.doc_text(os.path.join(src, "docs", "CAMPAIGNS.md")))

bases = examples + [
    {"model": "m", "dataset": "d", "trials": 10, "faults": {}},
    {"model": "m", "dataset": "d", "faults": {"model": "ber", "rate": 1e-4}},
    {"model": "m", "dataset": "d", "trials": 10,
     "faults": {"representation": "int8", "bits": 2, "burst": True, "positions": [1, 2, 5]}},
    {"model": "m", "dataset": "d", "faults": {"target": "activations", "persistence": "transient"},
     "sampling": {"list": [dict(cs.ENTRY, sample=0)]}},
]
rng = random.Random(cs.SEED)
corpus = list(bases)
for base in bases:
    for p, values in cs.MUTATIONS:
        for v in values:
            corpus.append(cs.mutate(base, p, v))
for _ in range(cs.N_RANDOM):
    s = rng.choice(bases)
    for _ in range(rng.randint(1, 4)):
        p, values = rng.choice(cs.MUTATIONS)
        s = cs.mutate(s, p, rng.choice(values))
    corpus.append(s)
# what the corpus above reaches rarely: mitigations, types at the top, unicode
base = {"model": "m", "dataset": "d", "trials": 10, "faults": {}}
for mit in (["clip"], ["none", "clip"], ["x"], [], "clip", [{"name": "a"}], [{"name": "a", "clip": True}],
            [{"name": "a", "clip": {"bounds": [0, 1]}}], [{"name": "a", "clip": {"bounds": [0]}}],
            [{"name": "a", "range": {"bounds": "profile", "action": "flag"}}],
            [{"name": "a", "range": {"action": "nope"}}], [{"name": "none"}], [{"name": ""}],
            [{"name": "a", "sbp": {"bits": [30, 31]}}], [{"name": "a", "abft": True, "x": 1}]):
    corpus.append(dict(base, mitigations=mit))
    corpus.append(dict(base, mitigations=mit, stop={"margin": 0.01}))
corpus += [[], "spec", 3, None, True, {}, dict(base, model="\u00e9"), dict(base, trials=1e9), dict(base, trials=1.0),
           dict(base, seed=2**63 - 1), dict(base, critical={"metric": "auc", "delta": 1e-300})]

validator = jsonschema.Draft202012Validator(schema)
with tempfile.TemporaryDirectory() as tmp:
    cpath = os.path.join(tmp, "corpus.json")
    with open(cpath, "w") as fh:
        json.dump(corpus, fh)
    out = subprocess.run([NODE, os.path.join(src, "tests", "ui", "validate_run.js"),
                          os.path.join(src, "server", "ui", "validate.js"),
                          os.path.join(src, "api", "campaign.schema.json"), cpath], capture_output=True, text=True)
if out.returncode != 0:
    sys.exit("validate_check: the page's validator failed: %s" % out.stderr.strip())
page = json.loads(out.stdout)
assert len(page) == len(corpus)

mismatches = bad_pointers = 0
for doc, errs in zip(corpus, page):
    want = validator.is_valid(doc)
    if want != (not errs):
        mismatches += 1
        if mismatches <= 10:
            print("MISMATCH: jsonschema says %s, the page says %s: %s" % (
                "valid" if want else "invalid", "valid" if not errs else "invalid: %s" % errs[:2], json.dumps(doc)))
    for e in errs:
        ptr = e.get("pointer")
        node = doc
        ok = isinstance(ptr, str) and (ptr == "" or ptr.startswith("/")) and e.get("message")
        for part in (ptr.split("/")[1:] if ok else []):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                ok = False
                break
        if not ok:
            bad_pointers += 1
            if bad_pointers <= 5:
                print("BAD POINTER %r in %s" % (e, json.dumps(doc)))
valid = sum(1 for e in page if not e)
print("validate_check: %d documents (%d valid, %d invalid); %d mismatches with python3-jsonschema, "
      "%d errors without a pointer into the document" % (len(corpus), valid, len(corpus) - valid, mismatches, bad_pointers))
sys.exit(1 if mismatches or bad_pointers else 0)
