#!/usr/bin/env bash
# Validates every manifest of deploy/k8s (the base, and the example overlay as
# kustomize renders it) against the Kubernetes API schemas of the npm package
# kubernetes-models, pinned by tests/k8s/package.json and package-lock.json,
# strictly (unknown fields are errors: tests/k8s/validate.mjs); and first
# checks that the validator rejects a broken manifest of each kind of mistake.
#   k8s_schema.sh SOURCE_DIR WORK_DIR
# The package is installed into WORK_DIR (a build folder, never the source
# tree) when missing or when the lock file changed. Exit 0 valid, 1 invalid
# (or the install failed), 77 (ctest SKIP) when node or npm is not installed
# or the npm registry cannot be reached.
set -uo pipefail
src=${1:?usage: k8s_schema.sh SOURCE_DIR WORK_DIR}
work=${2:?usage: k8s_schema.sh SOURCE_DIR WORK_DIR}
here=$src/tests/k8s
PY=/usr/bin/python3

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "k8s_schema: SKIP: $tool is not installed, so deploy/k8s is not validated against the Kubernetes" \
         "API schemas (k8s_jobs_local still renders the manifests and runs the Jobs' commands)"
    exit 77
  fi
done
mkdir -p "$work" || exit 1
if [ ! -d "$work/node_modules/kubernetes-models" ] || ! cmp -s "$here/package-lock.json" "$work/package-lock.json"; then
  if ! timeout 60 npm ping --loglevel=error >/dev/null 2>&1; then
    echo "k8s_schema: SKIP: the npm registry cannot be reached, so kubernetes-models (the Kubernetes API" \
         "schemas) cannot be installed and deploy/k8s is not validated against them"
    exit 77
  fi
  cp "$here/package.json" "$here/package-lock.json" "$work/" || exit 1
  echo "k8s_schema: installing kubernetes-models into $work (npm ci)"
  if ! (cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
    echo "k8s_schema: FAIL: npm ci could not install kubernetes-models from the npm registry" >&2
    exit 1
  fi
fi
export BF_K8S_MODULES=$work/node_modules
fails=0

$PY "$here/render.py" "$src/deploy/k8s/base" >"$work/base.json" || exit 1
$PY "$here/render.py" "$src/deploy/k8s/overlays/example" >"$work/overlay.json" || exit 1

# the validator catches each kind of mistake: a misspelt field, a wrong type,
# a missing required field, a bad enum value, in a Job, a Deployment, a Service
$PY - "$work/base.json" "$work" <<'PY' || exit 1
import copy, json, os, sys
objs = json.load(open(sys.argv[1]))
get = lambda kind, name: copy.deepcopy(next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name))
bad = []
j = get("Job", "bitflip-campaign"); j["spec"]["backoffLimitPerIdx"] = 1; bad.append(j)
j = get("Job", "bitflip-campaign"); j["spec"]["completions"] = "four"; bad.append(j)
j = get("Job", "bitflip-campaign"); j["spec"]["completionMode"] = "Indexd"; bad.append(j)
d = get("Deployment", "bitflipd"); del d["spec"]["template"]["spec"]["containers"][0]["name"]; bad.append(d)
d = get("Deployment", "bitflipd"); d["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/"; bad.append(d)
s = get("Service", "bitflipd"); s["spec"]["ports"][0]["port"] = "http"; bad.append(s)
for i, o in enumerate(bad):
    json.dump([o], open(os.path.join(sys.argv[2], f"broken{i}.json"), "w"))
PY
for f in "$work"/broken*.json; do
  if node "$here/validate.mjs" "$f" >"$work/out" 2>&1; then
    echo "FAIL the validator accepts $(basename "$f"), which is broken:"; cat "$work/out"; fails=$((fails+1))
  else
    echo "ok   rejected $(basename "$f"): $(sed -n 2p "$work/out" | cut -c1-150)"
  fi
done

for f in base overlay; do
  echo "--- deploy/k8s/$([ $f = base ] && echo base || echo overlays/example)"
  node "$here/validate.mjs" "$work/$f.json" || fails=$((fails+1))
done
[ "$fails" -eq 0 ] && echo "k8s_schema: every manifest is valid" || echo "k8s_schema: $fails failed"
[ "$fails" -eq 0 ]
