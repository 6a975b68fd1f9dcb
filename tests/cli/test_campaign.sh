#!/usr/bin/env bash
# Campaigns from the CLI as a CI pipeline uses them: exit codes, gates and
# JUnit, spec errors with JSON Pointers, and determinism: the same result for
# any thread count, and shards that merge into exactly the unsharded result.
# usage: test_campaign.sh BITFLIP FIXTURES_DIR
set -u
BF=$1
SP=$2/specs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"
# Under ThreadSanitizer (BF_TSAN=1: build-tsan's ctest) the steps whose
# threads another step here already runs are left out (tests/README.md):
# the gates' runs (the campaign of run_t2, or of mit_json, on the machine's
# workers, then the gates on the finished result, on the main thread) and
# the one-byte cache on one
# worker (the engine never beside itself; the fold thread as in run). They
# run in the release build and under ASan.
not_tsan() { [ -z "${BF_TSAN:-}" ]; }

same() {    # same NAME FILE1 FILE2
  if cmp -s "$2" "$3"; then passes=$((passes+1)); else
    echo "FAIL $1: $2 and $3 differ"; diff "$2" "$3" | head -10; fails=$((fails+1)); fi
}

spec=$SP/digits_weights.json
check help 0 "$BF" help run;                        contains help "--gate"
check no_local 2 "$BF" run "$spec";                 contains no_local "--local"
check bad_spec 2 "$BF" run --local "$SP/bad.json";  contains bad_spec "/faults/bits"
contains bad_spec_suggest "positions"
not_tsan && { check bad_gate 2 "$BF" run --local "$spec" --gate 'frobs<=1';  contains bad_gate "unknown metric 'frobs'"; }
check bad_shard 2 "$BF" run --local "$spec" --shard 3/2

check run 0 "$BF" run --local "$spec" --threads 1 --format csv --out "$tmp/full.json" --trials-out "$tmp/trials.jsonl"
cp "$tmp/stdout" "$tmp/t1.csv"
contains run_csv "section,key,trials"
lines=$(wc -l <"$tmp/trials.jsonl")
[ "$lines" -eq 240 ] && passes=$((passes+1)) || { echo "FAIL trials-out has $lines lines, wanted 240"; fails=$((fails+1)); }
grep -q '"tensor"' "$tmp/trials.jsonl" && passes=$((passes+1)) || { echo "FAIL trials-out names no tensor"; fails=$((fails+1)); }

# the full re-execution engine classifies every trial the same way
check run_exact 0 "$BF" run --local "$spec" --threads 2 --exact --stats --format json --out "$tmp/exact.json" \
      --trials-out "$tmp/exact.jsonl"
contains run_exact_stats "exact engine"
contains run_exact_line "bitflip run: exact engine: every trial ran the whole pass;"
# the spec gives no "batch": --stats says the default it ran at (64 for demo_digits'
# few KiB a sample: core/src/campaign/campaign_batch.c)
contains run_exact_batch ", 2 threads, batch 64, golden cache"
outcomes() { sed 's/.*"outcome": *"\([a-z]*\)".*/\1/' "$1"; }
outcomes "$tmp/trials.jsonl" >"$tmp/o_fast"; outcomes "$tmp/exact.jsonl" >"$tmp/o_exact"
same exact_outcomes "$tmp/o_fast" "$tmp/o_exact"
# ... and the same record, byte for byte (docs/ENGINE.md, "How exact it is")
same exact_records "$tmp/trials.jsonl" "$tmp/exact.jsonl"
# the near-exact engine (updates) runs the same trials
check run_near 0 "$BF" run --local "$spec" --threads 1 --near-exact --format json --trials-out "$tmp/near.jsonl"
lines=$(wc -l <"$tmp/near.jsonl")
[ "$lines" -eq 240 ] && passes=$((passes+1)) || { echo "FAIL near-exact trials-out has $lines lines, wanted 240"; fails=$((fails+1)); }
check near_server 2 "$BF" run --server http://127.0.0.1:9 "$spec" --near-exact;  contains near_server "--near-exact"
# image-major (a detector's sweep) is a --local choice too
check imaj_server 2 "$BF" run --server http://127.0.0.1:9 "$spec" --image-major;  contains imaj_server "--image-major"
check tmaj_server 2 "$BF" run --server http://127.0.0.1:9 "$spec" --trial-major;  contains tmaj_server "--trial-major"
check order_both 2 "$BF" run --local "$spec" --image-major --trial-major;  contains order_both "opposite orders"
check blk_server 2 "$BF" run --server http://127.0.0.1:9 "$spec" --image-block 2;  contains blk_server "--image-block"
check blk_zero 2 "$BF" run --local "$spec" --image-block 0;  contains blk_zero "--image-block"
check blk_tmaj 2 "$BF" run --local "$spec" --image-block 2 --trial-major;  contains blk_tmaj "--trial-major"
# which order by default: image-major from 2 threads, trial-major at 1, each
# flag overriding; the same records in every order (a detector fixture).
# Under TSan the two 2-thread runs alone (the sweep's threads and the
# workers'), compared with each other
det=$(dirname "$SP")/det
cat >"$tmp/det.json" <<JSON
{"model": "$det/ssdlite.onnx", "dataset": "$det/ssdlite.eval.safetensors", "seed": 3, "trials": 6,
 "faults": {"target": "weights", "tensors": ["*"], "model": "bitflip", "bits": 1, "representation": "fp32"},
 "sampling": "uniform"}
JSON
check order_t2 0 "$BF" run --local "$tmp/det.json" --threads 2 --stats --trials-out "$tmp/o_t2.jsonl"
contains order_t2_imaj "checkpoints (one image per call)"; contains order_t2_imaj2 "image-major: each image's golden run"
check order_t2_tmaj 0 "$BF" run --local "$tmp/det.json" --threads 2 --trial-major --stats --trials-out "$tmp/o_t2t.jsonl"
contains order_t2_tmaj2 "trial-major: not asked for"
for f in o_t2 o_t2t; do sort "$tmp/$f.jsonl" >"$tmp/$f.sorted"; done
same order_records_t2 "$tmp/o_t2t.sorted" "$tmp/o_t2.sorted"
if not_tsan; then
check order_t1 0 "$BF" run --local "$tmp/det.json" --threads 1 --stats --trials-out "$tmp/o_t1.jsonl"
contains order_t1_tmaj "trial-major: not asked for"
check order_t1_imaj 0 "$BF" run --local "$tmp/det.json" --threads 1 --image-major --stats --trials-out "$tmp/o_t1i.jsonl"
contains order_t1_imaj2 "image-major: each image's golden run"
for f in o_t1 o_t1i; do sort "$tmp/$f.jsonl" >"$tmp/$f.sorted"; done
same order_records_t1 "$tmp/o_t1.sorted" "$tmp/o_t2.sorted"
same order_records_t1i "$tmp/o_t1.sorted" "$tmp/o_t1i.sorted"
# blocks of images (--image-block, image-major at 1 thread too): 4 of the
# fixture's 6 images, then the last 2; --stats says so; the same records
check order_t1_blk 0 "$BF" run --local "$tmp/det.json" --threads 1 --image-block 4 --stats --trials-out "$tmp/o_t1b.jsonl"
contains order_t1_blk2 "4 images a thread at a time"
sort "$tmp/o_t1b.jsonl" >"$tmp/o_t1b.sorted"
same order_records_t1b "$tmp/o_t1.sorted" "$tmp/o_t1b.sorted"
fi
if not_tsan; then
check run_tiny_cache 0 "$BF" run --local "$spec" --threads 1 --cache-budget 1 --stats --format json --trials-out "$tmp/tiny.jsonl"
contains run_tiny_stats "differential engine"
# --stats: the run on one line, then a line of its own for each part of the engine
contains run_tiny_diff_line "bitflip run: differential engine: "
contains run_tiny_chan_line "bitflip run: channel-local: "
outcomes "$tmp/tiny.jsonl" >"$tmp/o_tiny"
same tiny_cache_outcomes "$tmp/o_fast" "$tmp/o_tiny"
fi
check bad_budget 2 "$BF" run --local "$spec" --cache-budget 12Q;  contains bad_budget "64M"

check run_t2 0 "$BF" run --local "$spec" --threads 2 --format csv --trials-out "$tmp/t2.jsonl" --stats
cp "$tmp/stdout" "$tmp/t2.csv"
same threads_identical "$tmp/t1.csv" "$tmp/t2.csv"
# the golden pass runs on the run's threads: every trial record the same
# bytes on 1, 2 and 3 threads, and again on a second run
same threads_records_identical "$tmp/trials.jsonl" "$tmp/t2.jsonl"
contains run_t2_setup " of CPU) on 2 threads; golden cache "
contains run_t2_setup_detail "workers' own plans"
# the workers' own accounting: both ran, and between them computed each of the 240 trials once
contains run_t2_workers "bitflip run: workers: 2 computed 240 trials in "
check run_t3 0 "$BF" run --local "$spec" --threads 3 --format csv --trials-out "$tmp/t3.jsonl"
same threads3_records_identical "$tmp/trials.jsonl" "$tmp/t3.jsonl"
check run_t2_again 0 "$BF" run --local "$spec" --threads 2 --format csv --trials-out "$tmp/t2b.jsonl"
same rerun_records_identical "$tmp/t2.jsonl" "$tmp/t2b.jsonl"

for i in 0 1 2; do
  check "shard$i" 0 "$BF" run --local "$spec" --shard $i/3 --threads 2 --format json --out "$tmp/part$i.json"
done
check merge 0 "$BF" merge "$tmp/part2.json" "$tmp/part0.json" "$tmp/part1.json" --format csv
cp "$tmp/stdout" "$tmp/merged.csv"
same merge_equals_unsharded "$tmp/t1.csv" "$tmp/merged.csv"
check merge_missing 3 "$BF" merge "$tmp/part0.json" "$tmp/part1.json";  contains merge_missing "1 of 3 shards missing: 2 "
check merge_twice 2 "$BF" merge "$tmp/part0.json" "$tmp/part0.json" "$tmp/part1.json"; contains merge_twice "given twice"

# gates: an always-true one passes (0), an impossible one fails (1), JUnit has both
if not_tsan; then
check gate_pass 0 "$BF" run --local "$spec" --gate 'critical_rate<=1' --gate 'golden_accuracy>=0.9' --junit "$tmp/j1.xml"
check gate_fail 1 "$BF" run --local "$spec" --gate 'critical_rate<=1' --gate 'masked_rate>=1.01' --junit "$tmp/j2.xml"
contains gate_fail_msg "FAIL"
grep -c '<testcase' "$tmp/j2.xml" | grep -qx 2 && passes=$((passes+1)) || { echo "FAIL junit lacks 2 test cases"; fails=$((fails+1)); }
grep -q '<failure' "$tmp/j2.xml" && passes=$((passes+1)) || { echo "FAIL junit lacks the failure"; fails=$((fails+1)); }
check gate_wrong_task 2 "$BF" run --local "$spec" --gate 'auc>=0.5';  contains gate_wrong_task "has no 'auc'"
fi

check plan 0 "$BF" plan "$spec";                    contains plan "Leveugle"

check ber 0 "$BF" run --local "$SP/dlrm_ber.json" --format table
contains ber_table "by bit error rate"

# a paired comparison of protections: every configuration sees the same faults
mspec=$SP/dlrm_mitigations.json
check mit_table 0 "$BF" run --local "$mspec" --format table
contains mit_table "mitigations (each on the same faults"
contains mit_table_rates "recovery by bit error rate"
check mit_json 0 "$BF" run --local "$mspec" --format json --out "$tmp/mit.json" --trials-out "$tmp/mit.jsonl"
/usr/bin/python3 - "$tmp/mit.json" "$tmp/mit.jsonl" <<'PY' && passes=$((passes+1)) || { echo "FAIL paired mitigation result"; fails=$((fails+1)); }
import json, sys
doc = json.load(open(sys.argv[1]))
recs = [json.loads(l) for l in open(sys.argv[2])]
names = [m["name"] for m in doc["mitigations"]]
assert names == ["none", "clip", "sbp", "abft-correct"], names
by = {}
for r in recs:
    by.setdefault(r["mitigation"], []).append(r)
assert sorted(by) == sorted(names) and all(len(v) == 10 for v in by.values()), {k: len(v) for k, v in by.items()}
key = lambda r: [(f["tensor"], f["index"], f["bits"], f["old"]) for f in r["faults"]]
for n in names[1:]:   # paired: trial t has the same faults in every configuration
    for a, b in zip(by["none"], by[n]):
        assert a["trial"] == b["trial"] and a["n_faults"] == b["n_faults"] and key(a) == key(b), (n, a["trial"])
m = {x["name"]: x for x in doc["mitigations"]}
assert m["none"]["recovery"]["value"] is None
# the unprotected entry is the top-level result
assert m["none"]["summary"]["outcomes"] == doc["summary"]["outcomes"]
# sign and exponent of every fp32 weight: 9 of 32 bits, by hand
assert abs(m["sbp"]["cost"]["storage_overhead"] - 9 / 32) < 1e-12, m["sbp"]["cost"]
assert m["none"]["cost"]["time_ratio"] == 1 and m["abft-correct"]["cost"]["storage_overhead"] > 0
# recovery = (mitigated - faulty) / (golden - faulty), from the entry's own numbers
for n in names[1:]:
    r = m[n]["recovery"]
    if r["golden"] - r["faulty"] <= 1e-12:   # no loss: no share of it
        assert r["value"] is None, r
    if r["value"] is not None:
        want = (r["mitigated"] - r["faulty"]) / (r["golden"] - r["faulty"])
        assert abs(r["value"] - want) < 1e-9 and r["ci"][0] <= r["value"] <= r["ci"][1], r
    for br in m[n]["by_rate"]:
        rr = br["recovery"]
        assert rr["value"] is None or rr["golden"] - rr["faulty"] > 1e-12, rr
    # coverage, recounted from the paired records
    eff = [i for i, r in enumerate(by["none"]) if r["outcome"] != "masked"]
    cov = m[n]["coverage"]
    assert cov["effective"] == len(eff) and cov["fault_model"] == "ber", cov
    assert cov["detected"]["count"] == sum(by[n][i]["outcome"] == "due" for i in eff), cov
    assert cov["harmless"]["count"] == sum(by[n][i]["outcome"] in ("masked", "tolerable") for i in eff), cov
PY
if not_tsan; then
check mit_gate 0 "$BF" run --local "$mspec" --gate 'mitigation.sbp.critical_rate<=1' --gate 'mitigation.abft-correct.storage_overhead>0'
check mit_gate_unknown 2 "$BF" run --local "$mspec" --gate 'mitigation.nope.recovery>=0'
contains mit_gate_unknown "has no 'mitigation.nope.recovery'"
fi
check mit_shard 2 "$BF" run --local "$mspec" --shard 0/2
contains mit_shard "does not combine with mitigations"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
