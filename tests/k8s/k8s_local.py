#!/usr/bin/python3
"""deploy/k8s without a cluster: renders the base and the example overlay
(render.py), checks what the manifests promise (probes, non-root read-only
pods, the tokens Secret, the Indexed Job's shard count agreeing with its
completions), then runs the overlay's Indexed Job here as Kubernetes would:
its command and args with $(VAR) expanded from the container's env, once per
index with JOB_COMPLETION_INDEX set, the campaign volume a local directory
(the fixture spec, model and eval set copied in); a retried index; the merge
Job's command before every shard is done (exit 3, which its podFailurePolicy
retries) and after; and compares the merged result with `bitflip run --local`
on the same spec.

    k8s_local.py SOURCE_DIR BITFLIP FIXTURES_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import render  # noqa: E402

src, bitflip, fixtures, work = (os.path.abspath(a) for a in sys.argv[1:5])
fails = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)


def find(objs, kind, name):
    hits = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(hits) == 1, f"{kind}/{name}: {len(hits)} objects"
    return hits[0]


def container(obj):
    return obj["spec"]["template"]["spec"]["containers"][0]


def env_of(c):
    return {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}


# --- what the manifests promise -------------------------------------------------
base = render.build(os.path.join(src, "deploy/k8s/base"))
overlay = render.build(os.path.join(src, "deploy/k8s/overlays/example"))
for label, objs in (("base", base), ("overlay", overlay)):
    d = find(objs, "Deployment", "bitflipd")
    c = container(d)
    pod = d["spec"]["template"]["spec"]
    check(c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready", f"{label}: readiness probe on /v2/health/ready")
    check(c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live", f"{label}: liveness probe on /v2/health/live")
    check(all(k in c["resources"].get(r, {}) for r in ("requests", "limits") for k in ("cpu", "memory")),
          f"{label}: bitflipd has CPU and memory requests and limits")
    for o in (d, find(objs, "Job", "bitflip-campaign"), find(objs, "Job", "bitflip-merge")):
        p, cc = o["spec"]["template"]["spec"], container(o)
        check(p["securityContext"].get("runAsNonRoot") is True and p["securityContext"].get("runAsUser", 0) != 0
              and cc["securityContext"].get("readOnlyRootFilesystem") is True
              and cc["securityContext"].get("allowPrivilegeEscalation") is False,
              f"{label}: {o['metadata']['name']} runs as non-root on a read-only root file system")
    vols = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    check("emptyDir" in vols[mounts["/tmp"]], f"{label}: /tmp is an emptyDir")
    data = vols[mounts["/var/lib/bitflip"]]
    check("--data-dir=/var/lib/bitflip" in c["args"] and find(objs, "PersistentVolumeClaim",
          data["persistentVolumeClaim"]["claimName"]) is not None, f"{label}: the data dir is a PersistentVolumeClaim")
    tok = [a for a in c["args"] if a.startswith("--tokens-file=")]
    tdir = os.path.dirname(tok[0].split("=", 1)[1]) if tok else None
    check(tdir in mounts and "secret" in vols[mounts[tdir]], f"{label}: the tokens file comes from a Secret")
    check(d["spec"]["strategy"]["type"] == "Recreate" and d["spec"]["replicas"] == 1,
          f"{label}: one bitflipd at a time (SQLite, a ReadWriteOnce volume)")
    svc = find(objs, "Service", "bitflipd")
    check(svc["spec"]["selector"].items() <= d["spec"]["template"]["metadata"]["labels"].items(),
          f"{label}: the Service selects bitflipd's pods")
    job = find(objs, "Job", "bitflip-campaign")
    js = job["spec"]
    check(js["completionMode"] == "Indexed" and "backoffLimitPerIndex" in js and js["parallelism"] >= 1,
          f"{label}: the campaign is an Indexed Job with a back-off per index")
    check(js.get("suspend") is True and find(objs, "Job", "bitflip-merge")["spec"].get("suspend") is True,
          f"{label}: both Jobs are applied suspended (resumed once the campaign volume is filled)")
    check(int(env_of(container(job))["BITFLIP_SHARDS"]) == js["completions"],
          f"{label}: BITFLIP_SHARDS equals the Job's completions ({js['completions']})")
    check(find(objs, "PersistentVolumeClaim", "bitflip-campaign")["spec"]["accessModes"] == ["ReadWriteMany"],
          f"{label}: the campaign volume is ReadWriteMany (shards on several nodes)")
check(all(o["metadata"].get("namespace") == "fault-injection" for o in overlay), "overlay: every object in its namespace")
check({container(o)["image"] for o in overlay if o["kind"] in ("Deployment", "Job")} == {"registry.example.org/lab/bitflip:0.1.0"},
      "overlay: every pod runs the lab's image")
check(find(overlay, "Job", "bitflip-campaign")["spec"]["completions"] == 8, "overlay: 8 shards")
# where kubectl is installed, its kustomize renders the same objects as render.py
if shutil.which("kubectl"):
    for d, objs in (("base", base), ("overlays/example", overlay)):
        r = subprocess.run(["kubectl", "kustomize", os.path.join(src, "deploy/k8s", d)], capture_output=True, text=True)
        theirs = [o for o in render.yaml.safe_load_all(r.stdout) if o] if r.returncode == 0 else None
        key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
        check(theirs is not None and sorted(theirs, key=key) == sorted(objs, key=key),
              f"kubectl kustomize {d} renders what render.py does" + (f": {r.stderr[-300:]}" if r.returncode else ""))
else:
    print("skip kubectl is not installed: render.py is not cross-checked against kubectl kustomize")

# --- the overlay's Jobs, run here -------------------------------------------------
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
volumes_root = os.path.join(work, "volumes")


def local_argv(obj):
    """The container's command line as the kubelet runs it, with its volumes' mount paths
    mapped to directories under WORK_DIR/volumes (one per claim, shared by the Jobs)."""
    c = container(obj)
    env = env_of(c)
    # $(VAR) from the container's env, $$ for a '$' (the kubelet's expansion)
    argv = [re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                   lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), a)
            for a in c["command"] + c.get("args", [])]
    vols = {v["name"]: v for v in obj["spec"]["template"]["spec"]["volumes"]}
    for m in c.get("volumeMounts", []):
        v = vols[m["name"]]
        if "persistentVolumeClaim" not in v:
            continue
        local = os.path.join(volumes_root, v["persistentVolumeClaim"]["claimName"])
        os.makedirs(local, exist_ok=True)
        argv = [re.sub(r"(^|=)" + re.escape(m["mountPath"]) + r"(?=/|$)", lambda x: x.group(1) + local, a) for a in argv]
    assert argv[0] == "bitflip", argv
    return [bitflip] + argv[1:], env


def run(argv, env, index=None):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("SLURM_ARRAY", "AWS_BATCH", "JOB_COMPLETION", "BITFLIP_"))}
    e.update(env)
    if index is not None:
        e["JOB_COMPLETION_INDEX"] = str(index)
    return subprocess.run(argv, env=e, cwd=work, capture_output=True, text=True)


campaign_dir = os.path.join(volumes_root, "bitflip-campaign")
os.makedirs(campaign_dir)
spec = json.load(open(os.path.join(fixtures, "specs/digits_weights.json")))
shutil.copy(os.path.join(fixtures, "specs", spec["model"]), os.path.join(campaign_dir, "model.onnx"))
shutil.copy(os.path.join(fixtures, "specs", spec["dataset"]), os.path.join(campaign_dir, "eval.safetensors"))
spec.update(model="model.onnx", dataset="eval.safetensors")
with open(os.path.join(campaign_dir, "campaign.json"), "w") as f:
    json.dump(spec, f, indent=2)

job = find(overlay, "Job", "bitflip-campaign")
merge = find(overlay, "Job", "bitflip-merge")
shard_argv, shard_env = local_argv(job)
merge_argv, merge_env = local_argv(merge)
n = job["spec"]["completions"]
print("shard:", " ".join(shard_argv))
print("merge:", " ".join(merge_argv))

# every index but the last, then the merge: it names the missing shard, exit 3
for i in range(n - 1):
    r = run(shard_argv, shard_env, i)
    check(r.returncode == 0 and f"shard {i}/{n} (Kubernetes: JOB_COMPLETION_INDEX {i})" in r.stderr,
          f"index {i} runs as shard {i}/{n}" + ("" if r.returncode == 0 else ": " + r.stderr[-500:]))
r = run(merge_argv, merge_env)
rules = merge["spec"]["podFailurePolicy"]["rules"]
fail_job = {v for rule in rules if rule["action"] == "FailJob" for v in rule["onExitCodes"]["values"]}
check(r.returncode == 3 and f"missing: {n - 1} " in r.stderr and 3 not in fail_job,
      "the merge before the last shard exits 3 naming it, and the merge Job retries exit 3")
r = run(shard_argv, shard_env, n - 1)
check(r.returncode == 0, f"index {n - 1} runs" + ("" if r.returncode == 0 else ": " + r.stderr[-500:]))
parts = os.path.join(campaign_dir, "parts")
check(sorted(os.listdir(parts)) == sorted(f"campaign.part-{i}-of-{n}.json" for i in range(n)),
      f"{n} parts in the campaign volume, nothing else")
# a retried pod of index 2 writes the same bytes
first = open(os.path.join(parts, f"campaign.part-2-of-{n}.json"), "rb").read()
r = run(shard_argv, shard_env, 2)
check(r.returncode == 0 and open(os.path.join(parts, f"campaign.part-2-of-{n}.json"), "rb").read() == first,
      "a retried index writes the same bytes")
# an index past the completions is refused as a spec error (exit 2: the Job fails at once)
r = run(shard_argv, shard_env, n)
check(r.returncode == 2 and 2 in {v for rule in job["spec"]["podFailurePolicy"]["rules"]
                                  if rule["action"] == "FailJob" for v in rule["onExitCodes"]["values"]},
      "an index past BITFLIP_SHARDS exits 2, which fails the Job")
r = run(merge_argv, merge_env)
check(r.returncode == 0, "the merge Job's command merges" + ("" if r.returncode == 0 else ": " + r.stderr[-500:]))

ref = os.path.join(work, "unsharded.json")
r = subprocess.run([bitflip, "run", "--local", os.path.join(campaign_dir, "campaign.json"), "--out", ref,
                    "--format", "json", "--progress", "none"], capture_output=True, text=True)
check(r.returncode == 0, "the unsharded run")
a, b = json.load(open(ref)), json.load(open(os.path.join(campaign_dir, "result.json")))
check((a.pop("shards"), b.pop("shards")) == (1, n) and a == b, "the merged result equals the unsharded run's")

print(f"{len(fails)} failed")
sys.exit(1 if fails else 0)
