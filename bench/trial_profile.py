#!/usr/bin/python3
"""Where a campaign's trials spend their CPU, from a `perf record -g` of `bitflip run --local`.

  perf record -F 2000 -g -o perf.data build/bitflip run --local SPEC --threads 1
  /usr/bin/python3 bench/trial_profile.py perf.data [ROOT]
  /usr/bin/python3 bench/trial_profile.py perf.data --parts

--parts splits the whole process instead: the golden pass (stacks through fill_main, gcache.c),
the trials (bf__run_trial) and the rest (loading, plans, page faults the kernel took without a
user stack, exit), each by its own function: where setup and trials go, and whether the golden
pass runs the eval pass's kernels (profile `bitflip eval --repeat 1` the same way: its samples
are all "rest").

Keeps the samples whose stack holds ROOT (default bf__run_trial: the trials, not the golden
pass or the setup) and sums them by the innermost frame of the differential engine they fall
in (the re-run steps' kernels under bf__plan_run_step / bf__plan_run_fused, derive, run_batch's
own copies and compares, ...), by their own function, and by both. A build with frame
pointers (-fno-omit-frame-pointer) gives whole stacks; static functions may be inlined into
their callers, whose frame then takes their samples (docs/BENCHMARKS.md, "Where a trial's
time goes").
"""
import collections
import subprocess
import sys

FRAMES = ["differs", "golden_output", "bf__chan_fill", "bf__chan_settle", "fetch_writable", "derive",
          "bf__gcache_block", "bf__chan_try", "try_conv", "try_gemm", "try_matmul", "run_fused", "bf__out_defer",
          "bf__out_flush", "bf__plan_run_fused", "bf__plan_run_step", "fetch", "tiny_change", "check_steps",
          "rows_ensure", "run_batch", "bf__rows_all", "bf__rows_batch", "bf__chain_run", "bf__dx_run", "bf__score",
          "bf__classify", "bf__campaign_draw", "bf_evaluator_write_param", "bf__evaluator_param_golden",
          "run_weight_trial", "bf__run_trial"]


def stacks(data):
    out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym"], capture_output=True, text=True,
                         check=True).stdout
    for block in out.split("\n\n"):
        syms = [(line.split(None, 1) + ["?"])[1].strip() for line in block.strip().split("\n") if line.strip()]
        if syms:
            yield syms


def parts(data):
    """The golden pass, the trials and the rest, each by its own function."""
    part, own = collections.Counter(), collections.defaultdict(collections.Counter)
    for syms in stacks(data):
        names = {s.split(".")[0] for s in syms}
        p = "golden pass" if "fill_main" in names else "trials" if "bf__run_trial" in names else "rest"
        part[p] += 1
        own[p][syms[0]] += 1
    total = sum(part.values())
    print(f"samples {total}: " + ", ".join(f"{p} {part[p]} ({100 * part[p] / max(total, 1):.1f}%)"
                                           for p in ("golden pass", "trials", "rest")))
    for p in ("golden pass", "trials", "rest"):
        print(f"{p}, by own function:")
        for k, v in own[p].most_common(15):
            print(f"  {v:6d} {100 * v / max(part[p], 1):5.1f}%  {k}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if len(sys.argv) > 2 and sys.argv[2] == "--parts":
        parts(sys.argv[1])
        return
    data, root = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "bf__run_trial"
    total = kept = 0
    frame, own, pair = collections.Counter(), collections.Counter(), collections.Counter()
    for syms in stacks(data):
        total += 1
        if not any(s.split(".")[0] == root for s in syms):
            continue
        kept += 1
        f = next((s.split(".")[0] for s in syms if s.split(".")[0] in FRAMES), "other")
        frame[f] += 1
        own[syms[0]] += 1
        pair[(f, syms[0])] += 1
    print(f"samples {total}, under {root} {kept}")
    for title, counter, n in (("by engine frame", frame, 30), ("by own function", own, 25),
                              ("by frame and own function", pair, 40)):
        print(title + ":")
        for k, v in counter.most_common(n):
            print(f"  {v:6d} {100 * v / max(kept, 1):5.1f}%  {k}")


if __name__ == "__main__":
    main()
