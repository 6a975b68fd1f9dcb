#!/usr/bin/python3
"""clients/ci's pipeline templates, run here (docs/CI.md): each GitHub Actions
job and GitLab CI job is read from its YAML (python3-yaml), its bitflip
command lines are run as the CI would (sh -e, the job's variables, the
checkout as the working directory, `bitflip` on PATH) on a fixture
repository, and what the publishing steps pick up is checked: the JUnit file
at the path they name, one test case per gate, a failure when a gate does not
hold (and the job's exit 1 that fails the pipeline), the result document. The
jobs that call a lab's bitflipd run against a real one on loopback, with a
token.

    ci_check.py SOURCE_DIR BITFLIP BITFLIPD FIXTURES_DIR WORK_DIR
"""
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import yaml

src, bitflip, bitflipd, fixtures, work = (os.path.abspath(a) for a in sys.argv[1:6])
fails = []


def check(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok or not detail else "\n     " + detail.strip()[-800:]))
    if not ok:
        fails.append(what)


# --- a repository with a model, an eval set and ci/bitflip.json ------------------
shutil.rmtree(work, ignore_errors=True)
repo, bindir = os.path.join(work, "repo"), os.path.join(work, "bin")
os.makedirs(os.path.join(repo, "ci"))
os.makedirs(bindir)
os.symlink(bitflip, os.path.join(bindir, "bitflip"))
spec = json.load(open(os.path.join(fixtures, "specs/digits_weights.json")))
shutil.copy(os.path.join(fixtures, "specs", spec["model"]), os.path.join(repo, "ci/digits.onnx"))
shutil.copy(os.path.join(fixtures, "specs", spec["dataset"]), os.path.join(repo, "ci/digits.eval.safetensors"))
spec.update(model="digits.onnx", dataset="digits.eval.safetensors")
json.dump(spec, open(os.path.join(repo, "ci/bitflip.json"), "w"), indent=2)

# --- a lab's bitflipd, with a token --------------------------------------------------
token = "bft_" + "5" * 40
with open(os.path.join(work, "tokens"), "w") as f:
    f.write(f"ci:{token}\n")
port_file = os.path.join(work, "port")
daemon = subprocess.Popen([bitflipd, "--listen", "127.0.0.1:0", "--port-file", port_file, "--data-dir",
                           os.path.join(work, "data"), "--workers", "2", "--tokens-file", os.path.join(work, "tokens")],
                          stdout=open(os.path.join(work, "daemon.log"), "w"), stderr=subprocess.STDOUT)
atexit.register(daemon.kill)   # whatever fails below, no daemon is left running
for _ in range(200):
    if os.path.exists(port_file) and open(port_file).read().strip():
        break
    time.sleep(0.05)
server = "http://127.0.0.1:" + open(port_file).read().strip()
# what the CI would put into ${{ vars.X }}, ${{ secrets.X }} and $X
ci_values = {"BITFLIP_SERVER": server, "BITFLIP_TOKEN": token}


def github_value(v):
    return re.sub(r"\$\{\{\s*(?:vars|secrets)\.(\w+)\s*\}\}", lambda m: ci_values.get(m.group(1), ""), str(v))


def run_script(lines, env_vars, name, want_rc, junit):
    """Runs a job's bitflip lines with sh -e in the checkout; returns the exit code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BITFLIP_")}
    env["PATH"] = bindir + os.pathsep + env["PATH"]
    env.update(env_vars)
    for f in (junit, "bitflip-result.json"):
        if os.path.exists(os.path.join(repo, f)):
            os.remove(os.path.join(repo, f))
    r = subprocess.run(["sh", "-e", "-c", "\n".join(lines)], cwd=repo, env=env, capture_output=True, text=True)
    check(r.returncode == want_rc, f"{name}: exit {want_rc}", f"exit {r.returncode}\n{r.stdout[-400:]}\n{r.stderr}")
    return r


def check_junit(path, name, failing):
    p = os.path.join(repo, path)
    if not os.path.exists(p):
        check(False, f"{name}: {path} written")
        return
    suite = ET.parse(p).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    cases = suite.findall("testcase")
    check(len(cases) == 1 and (cases[0].find("failure") is not None) == failing,
          f"{name}: {path} has the gate as a test case{' with its failure' if failing else ', passing'}")
    check(suite.get("failures") == ("1" if failing else "0"), f"{name}: the suite counts {int(failing)} failure")


results = {}


def exercise(name, lines, env_vars, junit, result_paths):
    check(lines and all("bitflip " in line for line in lines), f"{name}: its script is bitflip command lines")
    r = run_script(lines, env_vars, name, 0, junit)
    check("gate critical_rate<=0.05" in r.stderr and "pass" in r.stderr, f"{name}: the gate is printed in the log")
    check_junit(junit, name, False)
    for p in result_paths:
        check(os.path.exists(os.path.join(repo, p)), f"{name}: {p} (published) is written")
    if os.path.exists(os.path.join(repo, "bitflip-result.json")):
        results[name] = json.load(open(os.path.join(repo, "bitflip-result.json")))
    # a model that misses the gate fails the job, and the report says which gate
    strict = dict(env_vars, BITFLIP_GATE="critical_rate<=0.01")
    r = run_script(lines, strict, name + " (a gate that fails)", 1, junit)
    check_junit(junit, name + " (a gate that fails)", True)


# --- GitHub Actions ---------------------------------------------------------------
gh = yaml.safe_load(open(os.path.join(src, "clients/ci/github/bitflip-gate.yml")))
on = gh.get("on", gh.get(True))   # YAML 1.1 reads a bare `on` as true
check(on is not None and "pull_request" in on and "push" in on, "github: runs on push and pull_request")
check(set(gh["jobs"]) == {"gate", "gate-on-server"}, "github: the jobs gate and gate-on-server")
for jname, job in gh["jobs"].items():
    check("runs-on" in job and job["steps"][0].get("uses", "").startswith("actions/checkout@"),
          f"github {jname}: a runner, and the checkout first")
    env = {k: github_value(v) for k, v in job.get("env", {}).items()}
    lines = [s["run"] for s in job["steps"] if "run" in s]
    publish = [s for s in job["steps"] if "uses" in s and "junit" in s["uses"]]
    check(len(publish) == 1 and publish[0].get("if") == "always()",
          f"github {jname}: the JUnit report is published, also when the gate fails")
    junit = publish[0]["with"]["report_paths"] if publish else "bitflip-junit.xml"
    uploads = [p for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")
               for p in s["with"]["path"].split()]
    exercise(f"github {jname}", lines, env, junit, uploads)
check(gh["jobs"]["gate-on-server"].get("if") == "vars.BITFLIP_SERVER != ''", "github: the server job runs only with a server")

# --- GitLab CI ------------------------------------------------------------------------
gl = yaml.safe_load(open(os.path.join(src, "clients/ci/gitlab/bitflip-gate.gitlab-ci.yml")))
top = {k: str(v) for k, v in gl.get("variables", {}).items()}
jobs = {k: v for k, v in gl.items() if isinstance(v, dict) and "script" in v}
check(set(jobs) == {"bitflip-gate", "bitflip-gate-on-server"}, "gitlab: the jobs bitflip-gate and bitflip-gate-on-server")
for jname, job in jobs.items():
    env = dict(top, **{k: str(v) for k, v in job.get("variables", {}).items()})
    if jname.endswith("on-server"):
        check(job.get("rules") == [{"if": "$BITFLIP_SERVER"}], f"gitlab {jname}: runs only with BITFLIP_SERVER set")
        env.update(ci_values)   # the project's CI/CD variables
    art = job.get("artifacts", {})
    check(art.get("when") == "always" and "junit" in art.get("reports", {}),
          f"gitlab {jname}: the JUnit report is kept, also when the gate fails")
    exercise(f"gitlab {jname}", job["script"], env, art["reports"]["junit"], art.get("paths", []))

# --- the daemon's result is the local one -------------------------------------------------
for a, b in (("github gate", "github gate-on-server"), ("gitlab bitflip-gate", "gitlab bitflip-gate-on-server")):
    if a in results and b in results:
        check(results[a]["summary"] == results[b]["summary"], f"{b} gives the summary {a} gives")
daemon.terminate()
daemon.wait()
print(f"{len(fails)} failed")
sys.exit(1 if fails else 0)
