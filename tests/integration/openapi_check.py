#!/usr/bin/python3
"""The OpenAPI contract against the daemon's code.

usage: openapi_check.py OPENAPI.yaml ROUTES.c

OPENAPI.yaml is read with a strict YAML parser (PyYAML's safe loader, with
duplicate keys refused, and the two slips around quoted strings that PyYAML
lets through refused as stricter parsers do); ROUTES.c is server/http/routes.c, and the other .c
files beside it are read too. Checked:

- the document is OpenAPI 3.0.x and every $ref in it resolves (local JSON
  Pointers only: the contract is one file);
- both ways, every route of the ROUTES table is an operation of the contract
  with that method and path, and every operation of the contract is a route;
- a route without authentication has `security: []`, one with it does not
  (then the document's bearer scheme applies) and documents 401;
- every status code a route can answer is documented on its operation, with
  the media type the code answers it with (application/problem+json for
  bfd_reply_problem, application/json for bfd_reply_json, the literal type
  given to bfd_reply_data and bfd_reply_static, none for a NULL type), and
  with the headers the code sets just before that reply (Location,
  Retry-After, WWW-Authenticate, ...); and, the other way, every code and
  media type documented is one the code can answer. 500 (a bug, never an
  expected answer) is left out; so are 404 and 405 for an unknown path or
  method, and 503 for too many connections, which info.description states
  once for every path.

What a route can answer is read from the C source: the codes of the reply
calls in its handler and in every function of these files that the handler
names (a call, or a callback handed on such as uv_queue_work's), transitively;
plus what http.c answers before the handler runs: authenticate()'s codes on a
route with authentication, and, on a route that takes a body, the codes of
begin(), consume() and on_request() (an empty body, a Content-Length that is
not a byte count, a body too large, the wrong Content-Type, shutting down).

Exit 0 when everything matches, 1 otherwise (each problem on its own line),
2 on a usage error.
"""
import glob
import os
import re
import sys

try:
    import yaml
except ImportError:  # python3-yaml: scripts/install-deps.sh installs it
    sys.stderr.write("openapi_check: python3-yaml is not installed (scripts/install-deps.sh)\n")
    sys.exit(2)

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
NOT_PER_OPERATION = {500}          # a bug; info.description says so
ROUTE_MISS = {404, 405}            # what begin() answers when no route matches
# http.c's reply functions: their callers' arguments are what is read
REPLY_HELPERS = {"set_reply", "bfd_reply_data", "bfd_reply_static", "bfd_reply_json", "bfd_reply_problem",
                 "bfd_reply_problem_typed", "problem", "bfd_reply_internal", "bfd_reply_header"}
PROBLEM = "application/problem+json"


# --- the contract ------------------------------------------------------------

class StrictLoader(yaml.SafeLoader):
    """safe_load, but a mapping with a key twice is an error, not the last one."""


def _mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, "duplicate key %r" % (key,), key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_contract(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return text, yaml.load(text, Loader=StrictLoader)


def lenient_spots(text):
    """What YAML refuses but PyYAML (and libyaml) let through, around quoted
    strings, where a quote left open swallows the lines after it: a '#' right
    after a closing quote (a comment needs a space before it: PyYAML drops the
    rest of the line), and a string's next lines not indented deeper than the
    line it began on (js-yaml, behind Redocly: "deficient indentation")."""
    spots, lines = [], text.split("\n")
    for tok in yaml.scan(text, Loader=yaml.SafeLoader):
        if not (isinstance(tok, yaml.ScalarToken) and tok.style in ("'", '"')):
            continue
        start, end = tok.start_mark, tok.end_mark
        after = text[end.index:end.index + 1]
        if after and after not in " \t\r\n,]}:":
            spots.append("line %d, column %d: %r right after a quoted string that began on line %d"
                         % (end.line + 1, end.column + 1, after, start.line + 1))
        first = lines[start.line]
        base = len(first) - len(first.lstrip(" "))
        for n in range(start.line + 1, end.line + 1):
            line = lines[n]
            if line.strip() and len(line) - len(line.lstrip(" ")) <= base:
                spots.append("line %d: a quoted string that began on line %d goes on at indentation %d, "
                             "not deeper than its first line's %d (a quote left open?)"
                             % (n + 1, start.line + 1, len(line) - len(line.lstrip(" ")), base))
                break
    return spots


def resolve(doc, ref):
    """The object a local $ref names, or None."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node = doc
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def all_refs(node, where="#"):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                yield where, v
            else:
                yield from all_refs(v, "%s/%s" % (where, str(k).replace("~", "~0").replace("/", "~1")))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from all_refs(v, "%s/%d" % (where, i))


def deref(doc, node):
    """Follows $ref until an object that is not one (at most 20 steps)."""
    for _ in range(20):
        if not (isinstance(node, dict) and "$ref" in node):
            return node
        node = resolve(doc, node["$ref"])
    return None


def operations(doc):
    """{(METHOD, path): operation object}"""
    ops = {}
    for path, item in (doc.get("paths") or {}).items():
        item = deref(doc, item) or {}
        for method, op in item.items():
            if method in METHODS and isinstance(op, dict):
                ops[(method.upper(), path)] = op
    return ops


# --- the code ----------------------------------------------------------------

FUNC_RE = re.compile(r"^[A-Za-z_][\w \t\*]*?\b(\w+)\s*\([^;{}]*\)\s*\n\{\n(.*?)^\}", re.M | re.S)
ROUTE_RE = re.compile(r'\{\s*"([A-Z]+)",\s*"(/[^"]*)",\s*(BFD_BODY_\w+),\s*([01]),\s*(\w+)\s*\}')
# what a function answers, in source order
REPLY_RE = re.compile(
    r"bfd_reply_(problem_typed|problem|json|data|static|internal|header)\s*\(\s*[^,()]+,\s*"
    r"|\w+->reply_status\s*=\s*([^;]+);"
    r"|MHD_add_response_header\s*\(\s*\w+\s*,\s*MHD_HTTP_HEADER_CONTENT_TYPE\s*,\s*\"([^\"]+)\"")
CODE_RE = re.compile(r"\b([1-5][0-9][0-9])\b")


def header_name(token):
    """"Retry-After" or MHD_HTTP_HEADER_RETRY_AFTER -> "retry-after"."""
    token = token.strip()
    if token.startswith('"'):
        return token.strip('"').lower()
    if token.startswith("MHD_HTTP_HEADER_"):
        return token[len("MHD_HTTP_HEADER_"):].replace("_", "-").lower()
    return None


def split_args(text, start):
    """The arguments of a call whose '(' has been consumed, up to its ')'."""
    args, depth, cur, i, quote = [], 0, "", start, None
    while i < len(text):
        c = text[i]
        if quote:
            cur += c
            if c == "\\":
                cur += text[i + 1]
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
            cur += c
        elif c in "([{":
            depth += 1
            cur += c
        elif c in ")]}":
            if depth == 0:
                args.append(cur.strip())
                return args
            depth -= 1
            cur += c
        elif c == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    return args


class Code:
    """The functions of the daemon's HTTP layer and what each answers."""

    def __init__(self, files):
        self.bodies = {}
        self.problems = []
        for path in files:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            # comments out: a word in one is no call (a comment saying "checked"
            # is not the function checked())
            text = re.sub(r"/\*.*?\*/", lambda c: "\n" * c.group(0).count("\n"), text, flags=re.S)
            text = re.sub(r"//[^\n]*", "", text)
            for m in FUNC_RE.finditer(text):
                if m.group(1) not in REPLY_HELPERS:
                    self.bodies[m.group(1)] = (os.path.basename(path), m.group(2))
        self.direct = {name: self._replies(name, body) for name, (_, body) in self.bodies.items()}

    def _replies(self, name, body):
        """[(code, media type or None, frozenset of header names)] answered in this body."""
        out, headers = [], set()
        media_of_callback = None
        m = re.search(r'MHD_HTTP_HEADER_CONTENT_TYPE\s*,\s*"([^"]+)"', body)
        if m:
            media_of_callback = m.group(1)
        for m in REPLY_RE.finditer(body):
            kind, status_expr = m.group(1), m.group(2)
            if m.group(3):
                continue
            if status_expr is not None:          # r->reply_status = N: a response built by hand
                codes = CODE_RE.findall(status_expr)
                if not codes:
                    self.problems.append("%s(): reply_status set from '%s', which this check cannot read"
                                         % (name, status_expr.strip()))
                for c in codes:
                    out.append((int(c), media_of_callback, frozenset(headers)))
                headers = set()
                continue
            args = split_args(body, m.end())
            if kind == "header":
                h = header_name(args[0]) if args else None
                if h:
                    headers.add(h)
                continue
            if kind == "internal":   # a failure of ours (500), or the disk full (507, Retry-After)
                out.append((500, PROBLEM, frozenset(headers)))
                out.append((507, PROBLEM, frozenset(headers | {"retry-after"})))
                headers = set()
                continue
            codes = CODE_RE.findall(args[0]) if args else []
            if not codes:
                self.problems.append("%s(): bfd_reply_%s with status '%s', which this check cannot read"
                                     % (name, kind, args[0] if args else "?"))
            if kind in ("problem", "problem_typed"):
                media = PROBLEM
            elif kind == "json":
                media = "application/json"
            else:
                lit = args[1] if len(args) > 1 else "NULL"
                if lit == "NULL":
                    media = None
                elif lit.startswith('"'):
                    media = lit.strip('"').split(";")[0].strip()
                else:
                    self.problems.append("%s(): bfd_reply_%s with content type '%s', which this check cannot read"
                                         % (name, kind, lit))
                    media = None
            for c in codes:
                out.append((int(c), media, frozenset(headers)))
            headers = set()
        return out

    def reach(self, roots, exclude=()):
        """Every (code, media, headers) answered by roots and the functions they name."""
        seen, todo, out = set(), list(roots), set()
        while todo:
            f = todo.pop()
            if f in seen or f in exclude or f not in self.bodies:
                continue
            seen.add(f)
            out.update(self.direct[f])
            body = self.bodies[f][1]
            for ident in set(re.findall(r"\b[A-Za-z_]\w*\b", body)):
                if ident in self.bodies and ident not in seen:
                    todo.append(ident)
        return out


def read_routes(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [dict(method=m, path=p, body=b, auth=a == "1", handler=h) for m, p, b, a, h in ROUTE_RE.findall(text)]


# --- the checks --------------------------------------------------------------

def media_types(doc, response):
    response = deref(doc, response) or {}
    return set((response.get("content") or {}).keys())


def response_headers(doc, response):
    response = deref(doc, response) or {}
    return {h.lower() for h in (response.get("headers") or {})}


def check(doc, routes, code):
    problems = list(code.problems)
    if not re.fullmatch(r"3\.0\.\d+", str(doc.get("openapi", ""))):
        problems.append("openapi: '%s', expected 3.0.x" % doc.get("openapi"))

    for where, ref in all_refs(doc):
        if resolve(doc, ref) is None:
            problems.append("%s: $ref '%s' does not resolve" % (where, ref))

    ops = operations(doc)
    served = {(r["method"], r["path"]) for r in routes}
    if not routes:
        problems.append("no routes found in the ROUTES table")
    for key in sorted(served - set(ops), key=lambda k: (k[1], k[0])):
        problems.append("%s %s: served, but not in the contract" % key)
    for key in sorted(set(ops) - served, key=lambda k: (k[1], k[0])):
        problems.append("%s %s: in the contract, but the daemon has no such route" % key)

    # what http.c answers before a handler runs
    auth_codes = code.reach(["authenticate"])
    body_codes = {x for x in code.reach(["begin", "consume", "on_request"], exclude={"authenticate"})
                  if x[0] not in ROUTE_MISS}
    for needed in ("authenticate", "begin", "consume", "on_request"):
        if needed not in code.bodies:
            problems.append("http.c has no %s(): this check's model of the request's life is out of date" % needed)

    for r in routes:
        key = (r["method"], r["path"])
        op = ops.get(key)
        name = "%s %s" % key
        if op is None:
            continue
        if r["handler"] not in code.bodies:
            problems.append("%s: handler %s() not found in the source" % (name, r["handler"]))
            continue
        answers = code.reach([r["handler"]])
        if r["auth"]:
            answers |= auth_codes
        if r["body"] != "BFD_BODY_NONE":
            answers |= body_codes

        open_op = op.get("security") == []
        if r["auth"] and open_op:
            problems.append("%s: the daemon asks for a token, but the operation has 'security: []'" % name)
        if not r["auth"] and not open_op:
            problems.append("%s: the daemon asks for no token, but the operation does not say 'security: []'" % name)

        documented = {str(k): v for k, v in (op.get("responses") or {}).items()}
        by_code = {}
        for status, media, headers in answers:
            if status in NOT_PER_OPERATION:
                continue
            if status == 507 and r["method"] == "GET":   # reads store nothing; info.description covers it
                continue
            media_set, header_set = by_code.setdefault(status, (set(), set()))
            media_set.add(media)
            header_set.update(headers)
        for status in sorted(by_code):
            media_set, header_set = by_code[status]
            resp = documented.get(str(status))
            if resp is None:
                problems.append("%s: the daemon can answer %d, which the contract does not document" % (name, status))
                continue
            have = media_types(doc, resp)
            for media in sorted(m for m in media_set if m):
                if media not in have:
                    problems.append("%s: %d is answered as %s, documented as %s"
                                    % (name, status, media, ", ".join(sorted(have)) or "no content"))
            if None in media_set and not any(media_set - {None}) and have:
                problems.append("%s: %d has no body, but the contract gives it %s" % (name, status, ", ".join(sorted(have))))
            for media in sorted(have):
                if media not in media_set:
                    problems.append("%s: %d documents %s, which the daemon never answers it with" % (name, status, media))
            missing = header_set - response_headers(doc, resp)
            for h in sorted(missing):
                problems.append("%s: %d carries the header %s, which the contract does not document" % (name, status, h))
        for status in sorted(documented):
            if not status.isdigit():
                problems.append("%s: response '%s': only explicit status codes are used here" % (name, status))
            elif int(status) not in by_code and int(status) not in NOT_PER_OPERATION and \
                    not (status == "507" and r["method"] == "GET"):
                problems.append("%s: documents %s, which the daemon never answers here" % (name, status))
    return problems


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    try:
        text, doc = load_contract(argv[1])
    except (OSError, yaml.YAMLError) as e:
        print("openapi_check: %s does not load as YAML: %s" % (argv[1], e))
        return 1
    if not isinstance(doc, dict):
        print("openapi_check: %s is not a YAML mapping" % argv[1])
        return 1
    routes = read_routes(argv[2])
    files = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(argv[2])), "*.c")))
    problems = ["YAML: " + p for p in lenient_spots(text)] + check(doc, routes, Code(files))
    for p in problems:
        print("openapi_check: " + p)
    print("openapi_check: %d operations, %d routes, %d problems" % (len(operations(doc)), len(routes), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
