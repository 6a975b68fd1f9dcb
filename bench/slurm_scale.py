#!/usr/bin/python3
"""Wall time of one campaign against its number of Slurm array tasks, on the
single-node cluster tests/slurm/cluster.sh starts on this machine, and the
figure docs/SCALE.md shows (docs/img/slurm-scale.png).

For each shard count N it runs `bitflip slurm submit --shards N` and times
submission to merged result (the array, Slurm's scheduling and the merge job
included), checks every merged result equals the local unsharded run, and
times `bitflip run --local` with 1 and 2 threads on the same spec as the
single-machine reference. The dashed line is what more nodes would give,
one core per task: Slurm's own cost (the 1-task array against the same run
without Slurm: submission, scheduling, the merge job) plus the 1-thread run
divided by N. The load average during the runs goes into the figure: on a
shared machine it, not the shard count, decides the wall time.

Needs root, slurm-wlm and munge (scripts/install-deps.sh --slurm) and
matplotlib (python3-matplotlib). Standard library otherwise.

    sudo /usr/bin/python3 bench/slurm_scale.py --bitflip build/bitflip --png docs/img/slurm-scale.png
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLUSTER = os.path.join(ROOT, "tests", "slurm", "cluster.sh")
REAL = os.path.join(ROOT, "tests", "fixtures", "real")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def load_avg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def strip(doc, metrics=True):
    """The result without "shards" (how it was computed) and, with
    metrics=False, without the metric sums: outcomes and counts only."""
    if isinstance(doc, dict):
        return {k: strip(v, metrics) for k, v in doc.items()
                if k != "shards" and (metrics or k != "metrics")}
    if isinstance(doc, list):
        return [strip(v, metrics) for v in doc]
    return doc


# The tasks run bitflip through this, which writes the task's CPU seconds
# (user + system, from getrusage) next to its part: what a task costs
# whatever else shares the machine.
CPU_WRAPPER = """#!/usr/bin/python3
import os, resource, subprocess, sys
rc = subprocess.call([%r] + sys.argv[1:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(os.path.join(%r, "cpu-%%s.txt" %% os.environ.get("SLURM_ARRAY_TASK_ID", "x")), "w") as f:
    f.write("%%.3f\\n" %% (r.ru_utime + r.ru_stime))
sys.exit(rc)
"""


def timed_submit(bf, spec, n, workdir, env):
    out = os.path.join(workdir, "n%d" % n)
    os.makedirs(out)
    wrapper = os.path.join(out, "bitflip-cpu")
    with open(wrapper, "w") as f:
        f.write(CPU_WRAPPER % (bf, out))
    os.chmod(wrapper, 0o755)
    t0 = time.monotonic()
    p = run([bf, "slurm", "submit", "--shards", str(n), "--dir", out, "--bitflip", wrapper, spec], env=env)
    ids = dict(line.split(" ", 1) for line in p.stdout.splitlines())
    result = ids["result"]
    while not os.path.exists(result):
        state = subprocess.run(["scontrol", "-o", "show", "job", ids["merge_job"]], capture_output=True, text=True,
                               env=env).stdout
        if "JobState=CANCELLED" in state or "JobState=FAILED" in state:
            sys.exit("merge job %s ended: %s (logs in %s)" % (ids["merge_job"], state.strip()[:200], out))
        time.sleep(0.05)
    wall = time.monotonic() - t0
    cpu = []
    for i in range(n):
        with open(os.path.join(out, "cpu-%d.txt" % i)) as f:
            cpu.append(float(f.read()))
    return wall, result, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bitflip", required=True)
    ap.add_argument("--shards", default="1,2,4", help="shard counts, e.g. 1,2,4")
    ap.add_argument("--trials", type=int, default=16000)
    ap.add_argument("--repeats", type=int, default=3, help="runs per point; the fastest counts")
    ap.add_argument("--png", help="write the figure here")
    ap.add_argument("--json", help="write the measurements here")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("slurm_scale: needs root to start the local cluster (tests/slurm/cluster.sh)")
    bf = os.path.abspath(a.bitflip)
    shards = [int(s) for s in a.shards.split(",")]
    cores = os.cpu_count() or 1
    work = tempfile.mkdtemp(prefix="bitflip-slurm-bench.")
    spec = os.path.join(work, "mobilenet_v2.json")
    with open(spec, "w") as f:
        json.dump({"model": os.path.join(REAL, "mobilenet_v2.onnx"),
                   "dataset": os.path.join(REAL, "mobilenet_v2.eval.safetensors"),
                   "seed": 3, "trials": a.trials, "sampling": "uniform",
                   "faults": {"target": "weights", "tensors": ["*"], "model": "bitflip", "bits": 1,
                              "representation": "fp32"}}, f)
    local, local_cpu = {}, {}
    for th in (1, 2):
        best = None
        for _ in range(a.repeats):
            t0 = time.monotonic()
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            run([bf, "run", "--local", spec, "--threads", str(th), "--format", "json",
                 "--out", os.path.join(work, "local%d.json" % th)])
            t = time.monotonic() - t0
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            local_cpu[th] = min(local_cpu.get(th, 1e9), c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime)
            best = t if best is None else min(best, t)
        local[th] = best
        print("local, %d thread(s): %.2f s wall, %.2f s CPU" % (th, best, local_cpu[th]))
    with open(os.path.join(work, "local1.json")) as f:
        ref = json.load(f)

    cdir = os.path.join(work, "cluster")
    run([CLUSTER, "start", cdir])
    env = dict(os.environ, SLURM_CONF=os.path.join(cdir, "slurm.conf"))
    measured, loads, overhead, task_cpu = [], [], {}, {}
    try:
        for n in shards:
            # Slurm alone: an array of n tasks that do nothing, then a merge job
            best = None
            for _ in range(a.repeats):
                t0 = time.monotonic()
                arr = run(["sbatch", "--parsable", "--array=0-%d" % (n - 1), "-o", "/dev/null", "--wrap", "true"],
                          env=env).stdout.strip()
                mj = run(["sbatch", "--parsable", "--dependency=afterok:" + arr, "-o", "/dev/null", "--wrap", "true"],
                         env=env).stdout.strip()
                while "JobState=COMPLETED" not in run(["scontrol", "-o", "show", "job", mj], env=env).stdout:
                    time.sleep(0.05)
                t = time.monotonic() - t0
                best = t if best is None else min(best, t)
            overhead[n] = best
            print("slurm alone, %d empty task(s) and a merge: %.2f s" % (n, best))
        for n in shards:
            best = None
            for r in range(a.repeats):
                loads.append(load_avg())
                rdir = os.path.join(work, "r%d" % r)
                os.makedirs(rdir, exist_ok=True)
                t, result, cpu = timed_submit(bf, spec, n, rdir, env)
                if n not in task_cpu or max(cpu) < max(task_cpu[n]):
                    task_cpu[n] = cpu
                with open(result) as f:
                    got = json.load(f)
                # outcomes and counts must be the local run's; metric sums are
                # reported, since the engine's per-trial metrics can differ in
                # their last bits with what else ran in the process
                if strip(got, False) != strip(ref, False):
                    sys.exit("the merged outcomes of %d shards differ from the local run (files in %s)" % (n, work))
                if strip(got) != strip(ref):
                    print("  note: %d shards: metric sums differ from the local run in their last bits" % n)
                best = t if best is None else min(best, t)
            measured.append((n, best))
            print("slurm, %d task(s): %.2f s (merged outcomes = local run); task CPU s: max %.2f, sum %.2f"
                  % (n, best, max(task_cpu[n]), sum(task_cpu[n])))
    finally:
        run([CLUSTER, "stop", cdir])
    # more nodes: Slurm's own cost of an array and its merge job (measured
    # above with tasks that do nothing) plus the single-core work shared by N
    setup = min(overhead.values())
    per = local[1]
    print("expected with one core per task: %.2f s + %.2f s / N" % (setup, per))
    data = {"trials": a.trials, "model": "mobilenet_v2 (tests/fixtures/real)", "cores": cores,
            "local_seconds": local, "local_cpu_seconds": local_cpu, "slurm_seconds": dict(measured), "slurm_only_seconds": overhead, "task_cpu_seconds": task_cpu, "expected": {"slurm_seconds": setup, "work_seconds": per},
            "load_average": loads}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(data, f, indent=2)
    if a.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4.0), dpi=90)
        xs = [n for n, _ in measured]
        more = [1, 2, 4, 8, 16, 32, 64]
        ax.plot(xs, [t for _, t in measured], "o-", color="C0", label="Slurm array, measured")
        ax.plot(more, [setup + per / n for n in more], "--", color="C1",
                label="expected, a core per task:\n%.1f s Slurm + %.1f s / N" % (setup, per))
        ax.plot(xs, [overhead[n] for n in xs], "s:", color="C2", label="Slurm alone (empty tasks + merge)")
        ax.axhline(local[1], color="0.5", lw=0.8, ls=":", label="run --local, 1 thread (%.1f s)" % local[1])
        ax.set_title("wall time, submit to merged result\n(load average %.0f-%.0f on %d shared cores)"
                     % (min(loads), max(loads), cores), fontsize=9)
        ax.set_ylabel("seconds")
        bx.plot(xs, [max(task_cpu[n]) for n in xs], "o-", color="C0", label="longest task (the wall time with a core each)")
        bx.plot(xs, [sum(task_cpu[n]) for n in xs], "^-", color="C3", label="all tasks together")
        bx.plot(more, [local_cpu[1] / n for n in more], "--", color="C1", label="1-thread run / N (perfect split)")
        bx.axhline(local_cpu[1], color="0.5", lw=0.8, ls=":", label="run --local, 1 thread (%.1f s)" % local_cpu[1])
        bx.set_title("CPU seconds (user + system): what the load does not change", fontsize=9)
        for x in (ax, bx):
            x.set_xscale("log", base=2)
            x.set_xticks(more)
            x.set_xticklabels([str(n) for n in more])
            x.set_xlabel("array tasks (shards)")
            x.set_ylim(bottom=0)
            x.grid(alpha=0.3)
            x.legend(fontsize=7)
        fig.suptitle("%d-trial weight-fault campaign on mobilenet_v2, single-node Slurm" % a.trials, fontsize=10)
        fig.tight_layout()
        fig.savefig(a.png)
        print("wrote", a.png)
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()   # its temporary directory goes at the end; after an error it is kept, for the logs
