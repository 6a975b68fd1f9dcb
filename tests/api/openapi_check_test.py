#!/usr/bin/python3
"""tests/integration/openapi_check.py catches what it is there to catch.

usage: openapi_check_test.py SOURCE_DIR

Each case copies api/openapi.yaml and server/http/*.c into a scratch folder,
breaks one thing in one of them, and expects the check to fail naming it;
the copies as they are must pass. Exit 0 when every case behaves, 1 otherwise.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

# (what, file, old text, new text, what the check must say)
CASES = [
    ("a single-quoted string left open",
     "openapi.yaml", "a `name` longer than 256 bytes.'\n", "a `name` longer than 256 bytes.\n",
     "YAML: line"),
    ("a key twice",
     "openapi.yaml", "  /v1/openapi.yaml:\n", "  /v1/models:\n    get: {}\n  /v1/openapi.yaml:\n",
     "duplicate key '/v1/models'"),
    ("a $ref to nothing",
     "openapi.yaml", "{$ref: '#/components/schemas/Version'}", "{$ref: '#/components/schemas/Versio'}",
     "$ref '#/components/schemas/Versio' does not resolve"),
    ("an operation the daemon lacks",
     "openapi.yaml", "  /metrics:\n    get:\n", "  /metrics:\n    put:\n      responses: {'200': {description: x}}\n    get:\n",
     "PUT /metrics: in the contract, but the daemon has no such route"),
    ("a route the contract lacks",
     "routes.c", '{"GET", "/metrics", BFD_BODY_NONE, 0, bfd_h_metrics},',
     '{"GET", "/metrics", BFD_BODY_NONE, 0, bfd_h_metrics},\n    {"GET", "/v1/tenants", BFD_BODY_NONE, 1, bfd_h_root},',
     "GET /v1/tenants: served, but not in the contract"),
    ("a 429 the handler returns, not documented",
     "openapi.yaml", "        '429':\n          description: The tenant already",
     "        '430':\n          description: The tenant already",
     "POST /v1/campaigns: the daemon can answer 429"),
    ("a new status code in a handler",
     "routes_items.c", 'bfd_reply_problem(r, 409, NULL, "%lld queued', 'bfd_reply_problem(r, 423, NULL, "%lld queued',
     "DELETE /v1/datasets/{id}: the daemon can answer 423"),
    ("a code documented that never comes",
     "openapi.yaml", "        '401': {$ref: '#/components/responses/Unauthorized'}\n        '404': {$ref: '#/components/responses/NotFound'}\n    delete:\n      tags: [models]",
     "        '401': {$ref: '#/components/responses/Unauthorized'}\n        '404': {$ref: '#/components/responses/NotFound'}\n        '418': {$ref: '#/components/responses/NotFound'}\n    delete:\n      tags: [models]",
     "GET /v1/models/{id}: documents 418, which the daemon never answers here"),
    ("a problem documented as plain JSON",
     "openapi.yaml", "          description: The campaign is queued or running; cancel it first.\n          content:\n            application/problem+json:",
     "          description: The campaign is queued or running; cancel it first.\n          content:\n            application/json:",
     "DELETE /v1/campaigns/{id}: 409 is answered as application/problem+json"),
    ("a header the code sets, not documented",
     "openapi.yaml", "          headers:\n            Retry-After: {$ref: '#/components/headers/RetryAfter'}\n          content:\n            application/problem+json:\n              schema: {$ref: '#/components/schemas/Problem'}\n        '503'",
     "          content:\n            application/problem+json:\n              schema: {$ref: '#/components/schemas/Problem'}\n        '503'",
     "POST /v1/campaigns: 429 carries the header retry-after"),
    ("an open operation that the contract says needs a token",
     "openapi.yaml", "      operationId: getVersion\n      summary: Name and version of the daemon and of the API\n      security: []\n",
     "      operationId: getVersion\n      summary: Name and version of the daemon and of the API\n",
     "GET /v1: the daemon asks for no token"),
    ("a route that needs a token, open in the contract",
     "routes.c", '{"GET", "/v1/models", BFD_BODY_NONE, 1, bfd_h_item_list}', '{"GET", "/v1/models", BFD_BODY_NONE, 0, bfd_h_item_list}',
     "GET /v1/models: the daemon asks for no token, but the operation does not say"),
]


def run(scratch):
    p = subprocess.run([sys.executable, CHECK, os.path.join(scratch, "openapi.yaml"),
                        os.path.join(scratch, "routes.c")], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def fresh(scratch, src):
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    shutil.copy(os.path.join(src, "api", "openapi.yaml"), scratch)
    for c in glob.glob(os.path.join(src, "server", "http", "*.c")):
        shutil.copy(c, scratch)


def main(argv):
    global CHECK
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    src = argv[1]
    CHECK = os.path.join(src, "tests", "integration", "openapi_check.py")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        scratch = os.path.join(tmp, "c")
        fresh(scratch, src)
        rc, out = run(scratch)
        if rc != 0:
            print("FAIL the contract and code as they are: exit %d\n%s" % (rc, out))
            failed += 1
        for what, name, old, new, expect in CASES:
            fresh(scratch, src)
            path = os.path.join(scratch, name)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if text.count(old) != 1:
                print("FAIL %s: the text to break is in %s %d times, not once (update this test)"
                      % (what, name, text.count(old)))
                failed += 1
                continue
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.replace(old, new))
            rc, out = run(scratch)
            if rc != 1 or expect not in out:
                print("FAIL %s: exit %d, expected 1 and %r in:\n%s" % (what, rc, expect, out))
                failed += 1
            else:
                print("ok   %s" % what)
    print("%d passed, %d failed" % (len(CASES) + 1 - failed, failed))
    return 1 if failed else 0


CHECK = None

if __name__ == "__main__":
    sys.exit(main(sys.argv))
