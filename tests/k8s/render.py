#!/usr/bin/python3
"""Renders a kustomization of deploy/k8s as `kubectl kustomize` would, for the
test (kustomize is not a Debian package): the subset deploy/k8s uses -
resources (files and directories), namespace, images and patches (strategic
merge patches: maps merged, the lists Kubernetes merges by key merged by that
key, other lists replaced). A kustomization with anything else is refused, so
a new feature in the manifests cannot be silently skipped here.

    render.py DIR > objects.json     (a JSON array of the objects)
"""
import copy
import json
import os
import sys

import yaml

KNOWN = {"apiVersion", "kind", "resources", "namespace", "images", "patches"}
# the merge keys of the lists deploy/k8s patches (Kubernetes' patchMergeKey)
MERGE_KEYS = {"containers": "name", "initContainers": "name", "env": "name", "volumes": "name",
              "volumeMounts": "mountPath", "ports": "containerPort"}


def fail(msg):
    sys.exit(f"render.py: {msg}")


def smp(base, patch, key=None):
    """A strategic merge patch of `patch` into `base` (in place)."""
    for k, v in patch.items():
        if v is None:
            base.pop(k, None)
        elif isinstance(v, dict) and isinstance(base.get(k), dict):
            smp(base[k], v)
        elif isinstance(v, list) and isinstance(base.get(k), list) and k in MERGE_KEYS:
            mk = MERGE_KEYS[k]
            for item in v:
                hit = [b for b in base[k] if b.get(mk) == item.get(mk)]
                if hit:
                    smp(hit[0], item)
                else:
                    base[k].append(copy.deepcopy(item))
        else:
            base[k] = copy.deepcopy(v)


def image_name(ref):
    """registry/repo:tag@digest -> registry/repo"""
    head, _, tail = ref.split("@")[0].rpartition("/")
    return (head + "/" if head else "") + tail.split(":")[0]


def pod_specs(obj):
    spec = obj.get("spec", {})
    if "template" in spec:
        yield spec["template"].get("spec", {})


def build(d):
    path = os.path.join(d, "kustomization.yaml")
    if not os.path.exists(path):
        fail(f"{d} has no kustomization.yaml")
    k = yaml.safe_load(open(path))
    unknown = set(k) - KNOWN
    if unknown:
        fail(f"{path}: {sorted(unknown)} are not rendered by this test; extend tests/k8s/render.py")
    objs = []
    for r in k.get("resources", []):
        p = os.path.normpath(os.path.join(d, r))
        if os.path.isdir(p):
            objs += build(p)
        else:
            objs += [o for o in yaml.safe_load_all(open(p)) if o]
    for p in k.get("patches", []):
        if set(p) != {"path"}:
            fail(f"{path}: a patch is {p}; only 'path:' patches are rendered")
        for patch in yaml.safe_load_all(open(os.path.join(d, p["path"]))):
            hits = [o for o in objs if o["kind"] == patch["kind"] and o["metadata"]["name"] == patch["metadata"]["name"]]
            if len(hits) != 1:
                fail(f"{p['path']}: patches {patch['kind']}/{patch['metadata']['name']}, which is not in {d}")
            smp(hits[0], {k2: v for k2, v in patch.items() if k2 not in ("apiVersion", "kind")})
    for img in k.get("images", []):
        for o in objs:
            for ps in pod_specs(o):
                for c in ps.get("containers", []) + ps.get("initContainers", []):
                    name = image_name(c["image"])
                    if name == img["name"]:
                        c["image"] = img.get("newName", name) + (":" + str(img["newTag"]) if "newTag" in img else "")
    if "namespace" in k:
        for o in objs:
            o["metadata"]["namespace"] = k["namespace"]
    return objs


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: render.py KUSTOMIZATION_DIR")
    json.dump(build(sys.argv[1]), sys.stdout, indent=1)
    print()
