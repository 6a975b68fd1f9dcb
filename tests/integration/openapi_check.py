#!/usr/bin/python3
"""The OpenAPI contract against the daemon's routes.

usage: openapi_check.py OPENAPI.yaml [ROUTES.c]

Every route of bitflipd must have its operation in api/openapi.yaml; given
server/http/routes.c, the routes are read from its table instead of the list
below, and the contract must also have no operation the daemon lacks. Every
local $ref must name a component that exists.

Standard library only (python3-yaml is not a build dependency): the YAML is
read by its layout, which api/openapi.yaml keeps: paths at two spaces of
indent under `paths:`, methods at four, components' names at four under
their section. Exit 0 when everything matches, 1 otherwise.
"""
import re
import sys

# What the daemon serves (server/http/routes.c has the same table).
ROUTES = [
    ("GET", "/v1"),
    ("GET", "/v1/openapi.yaml"),
    ("GET", "/v2/health/live"),
    ("GET", "/v2/health/ready"),
    ("GET", "/metrics"),
    ("POST", "/v1/models"),
    ("GET", "/v1/models"),
    ("GET", "/v1/models/{id}"),
    ("DELETE", "/v1/models/{id}"),
    ("POST", "/v1/datasets"),
    ("GET", "/v1/datasets"),
    ("GET", "/v1/datasets/{id}"),
    ("DELETE", "/v1/datasets/{id}"),
    ("POST", "/v1/campaigns"),
    ("GET", "/v1/campaigns"),
    ("GET", "/v1/campaigns/{id}"),
    ("DELETE", "/v1/campaigns/{id}"),
    ("GET", "/v1/campaigns/{id}/events"),
    ("GET", "/v1/campaigns/{id}/results"),
    ("POST", "/v1/campaigns/{id}/cancel"),
]

METHODS = "get|put|post|delete|patch|head|options|trace"


def top_level_block(lines, key):
    """The lines under a column-0 `key:` up to the next column-0 key."""
    out, inside = [], False
    for line in lines:
        if re.match(r"^[^\s#]", line):
            inside = line.rstrip() == key + ":"
            continue
        if inside:
            out.append(line)
    return out


def operations(lines):
    ops, path = set(), None
    for line in top_level_block(lines, "paths"):
        m = re.match(r"^  (/\S*):\s*$", line)
        if m:
            path = m.group(1)
            continue
        m = re.match(r"^    (%s):" % METHODS, line)
        if m and path:
            ops.add((m.group(1).upper(), path))
    return ops


def components(lines):
    names, section = set(), None
    for line in top_level_block(lines, "components"):
        m = re.match(r"^  (\w+):\s*$", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^    ([\w.-]+):", line)
        if m and section:
            names.add((section, m.group(1)))
    return names


def routes_from_c(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return set(re.findall(r'\{\s*"(GET|POST|PUT|PATCH|DELETE)",\s*"(/[^"]*)"', text))


def main(argv):
    if len(argv) not in (2, 3):
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        lines = f.read().splitlines()
    problems = []
    if not any(re.match(r"^openapi: 3\.0\.\d+\s*$", line) for line in lines):
        problems.append("no 'openapi: 3.0.x' line")

    ops = operations(lines)
    routes = routes_from_c(argv[2]) if len(argv) == 3 else set(ROUTES)
    if not routes:
        problems.append("no routes found in %s" % argv[2])
    for method, path in sorted(routes - ops, key=lambda r: (r[1], r[0])):
        problems.append("%s %s: served, but not in the contract" % (method, path))
    if len(argv) == 3:
        for method, path in sorted(ops - routes, key=lambda r: (r[1], r[0])):
            problems.append("%s %s: in the contract, but the daemon has no such route" % (method, path))

    defined = components(lines)
    for n, line in enumerate(lines, 1):
        for section, name in re.findall(r"\$ref: '#/components/(\w+)/([\w.-]+)", line):
            if (section, name) not in defined:
                problems.append("line %d: $ref to #/components/%s/%s, which is not defined" % (n, section, name))

    for p in problems:
        print("openapi_check: " + p)
    print("openapi_check: %d operations, %d routes, %d problems" % (len(ops), len(routes), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
