#!/usr/bin/env python3
"""The house's rules for the docs, checked (ctest doc_rules):

(a) no Markdown file over 900 lines (the house rule "no file over ~900
    lines"; size_check.py holds the C and the bench scripts to it): a doc too
    long is split by subject, and the original keeps an index of what moved
    (EXCEPTIONS lists a file allowed over, with its reason);
(b) every citation of a section, written `<file>.md, "<title>"` (or without
    the comma, or `<file>.md ("<title>")`, across a line break, in a code
    comment, a script or a doc),
    resolves: the title is a heading of that file, or a row of that file's
    index names it with the file it moved to, and that file has the heading.

A title matches a heading when the heading, with backticks and case set
aside, is the title or starts with it ("The eighteenth round" finds "The
eighteenth round (twenty-second session)"). An index row is a table row
one of whose cells is the moved heading and another links to its file (a
relative Markdown link). The path resolves from the source root,
then from the citing file's folder, then by its name where one Markdown file
of the tree has it. A citation whose file does not resolve is an error too.

With --self-test it first checks, in a temporary tree, that it catches a
planted long doc and a planted broken citation, and accepts a citation that
resolves through an index, so that a checker that stopped checking cannot pass.

usage: doc_check.py [--self-test] SOURCE_DIR
"""
import os
import re
import sys
import tempfile

MAX_LINES = 900
# path (from the source root) -> why it may be longer
EXCEPTIONS = {}
# (citing file, cited file, title) -> why a citation that does not resolve is
# let be: each was broken before this check, in a file this check's author
# may not edit; fix the citation and take its row out
KNOWN = {}
# the files read for citations: by ending, or by name
CITING_ENDINGS = (".c", ".h", ".py", ".sh", ".md", ".txt", ".yaml", ".yml", ".js", ".cmake", ".json", ".html")
CITING_NAMES = ("Makefile", "Dockerfile")
SELF = "tests/arch/doc_check.py"  # its self-test's planted citations
KEPT_DOT_DIRS = {".ci", ".github"}  # hidden folders that hold the project's own scripts
SKIP_DIRS = {"node_modules", "models", "out", "__pycache__"}
CITE = re.compile(r'(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)`?,?\s+\(?"([^"]{2,240})"')
LEADER = re.compile(r"^\s*(?:/\*+|\*+/?|//+|#+|--|;+|>)?\s?")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
# the docs name many passages by a bold span ("**NMS near-ties.** ...") or by
# a paragraph's or list item's first words ("Ties at the cut: where ..."),
# and code cites them as it cites headings
BOLD = re.compile(r"\*\*(.+?)\*\*")
LIST = re.compile(r"^\s*(?:[-*+]\s+|\d+\.\s+)?(?:\*\*)?")
LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")


def walk(src):
    """Every file below src but hidden folders (.ci and .github read),
    build folders at the top,
    generated bench folders, node_modules and links."""
    for root, dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        dirs[:] = sorted(d for d in dirs if (not d.startswith(".") or d in KEPT_DOT_DIRS) and d not in SKIP_DIRS
                         and not (rel == "." and d.startswith("build"))
                         and not os.path.islink(os.path.join(root, d)))
        for name in sorted(files):
            path = os.path.join(root, name)
            if not os.path.islink(path):
                yield os.path.relpath(path, src)


def read(src, rel):
    with open(os.path.join(src, rel), encoding="utf-8", errors="replace") as f:
        return f.read()


def norm(text):
    text = text.replace("`", "").replace("*", "")
    return re.sub(r"\s+", " ", text).strip().rstrip(".,;:").lower()


def places(text):
    """The places a citation may name: (the headings, the bold spans, and
    each line's lead: its text after a list marker), normalized."""
    heads, bolds, leads, fence = [], [], [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fence = not fence
            continue
        m = None if fence else HEADING.match(line)
        if m:
            heads.append(norm(m.group(1)))
            continue
        bolds += [norm(b) for b in BOLD.findall(line)]
        lead = LIST.sub("", line)
        if lead:
            leads.append(norm(lead.replace('"', "")))
    return heads, bolds, leads


def matches(title, where):
    """A heading starts with the title or holds it; a bold span or a line
    starts with it."""
    t = norm(title)
    heads, bolds, leads = where
    return any(t in h for h in heads) or any(b.startswith(t) for b in bolds) \
        or any(l.startswith(t) for l in leads)


def index_rows(text):
    """(the other cells, linked file) of each table row that links a .md
    file: an index row names a moved heading and the file it moved to."""
    rows = []
    for line in text.split("\n"):
        if not line.startswith("|"):
            continue
        cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
        links = [LINK.search(c) for c in cells]
        found = [m.group(1) for m in links if m]
        if found:
            rows.append(([c.replace("\\|", "|") for c, m in zip(cells, links) if not m], found[0]))
    return rows


class Tree:
    def __init__(self, src):
        self.src = src
        self.files = list(walk(src))
        self.mds = [f for f in self.files if f.endswith(".md")]
        self.cache = {}

    def heads(self, rel):
        if rel not in self.cache:
            self.cache[rel] = places(read(self.src, rel))
        return self.cache[rel]

    def resolve(self, cited, citing):
        for cand in (os.path.normpath(cited), os.path.normpath(os.path.join(os.path.dirname(citing), cited))):
            if cand in self.mds:
                return cand
        named = [m for m in self.mds if m == cited or m.endswith("/" + cited)]
        return named[0] if len(named) == 1 else None

    def resolves(self, title, target):
        """Whether title is a heading of target, or a row of its index sends
        the reader to a file that has it."""
        if matches(title, self.heads(target)):
            return True
        for cells, link in index_rows(read(self.src, target)):
            moved = os.path.normpath(os.path.join(os.path.dirname(target), link))
            if any(norm(c.strip().strip('"')).startswith(norm(title)) for c in cells) and moved in self.mds \
                    and matches(title, self.heads(moved)):
                return True
        return False


def flat(text):
    """The text with each line's comment leader taken off and the lines
    joined, so that a citation broken across comment lines reads whole."""
    out = ""
    for line in text.split("\n"):
        part = LEADER.sub("", line)
        out += part if out.endswith("/") else " " + part
    return out


def check(src):
    tree = Tree(src)
    errors = []
    for rel in tree.mds:
        n = read(src, rel).count("\n")
        if n > MAX_LINES and rel not in EXCEPTIONS:
            errors.append(f"{rel}: {n} lines, over {MAX_LINES}: split it by subject, the original keeping an index")
    for rel in tree.files:
        name = os.path.basename(rel)
        if rel == SELF or not (name.endswith(CITING_ENDINGS) or name in CITING_NAMES):
            continue
        text = read(src, rel)
        if ".md" not in text:
            continue
        for m in CITE.finditer(flat(text)):
            cited, title = m.group(1), m.group(2)
            if title.startswith("$"):
                continue  # a shell script's variable, not a title
            target = tree.resolve(cited, rel)
            if target is None:
                errors.append(f'{rel}: cites {cited}, "{title}": no such Markdown file')
            elif not tree.resolves(title, target) and (rel, target, title) not in KNOWN:
                errors.append(f'{rel}: cites {cited}, "{title}": not a heading of {target} nor in its index')
    return errors


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "docs", "x"))
        os.makedirs(os.path.join(tmp, "core"))

        def put(rel, text):
            with open(os.path.join(tmp, rel), "w") as f:
                f.write(text)
        put("docs/long.md", "# long\n" + "text\n" * MAX_LINES)
        put("docs/ok.md", "# ok\n" + "text\n" * (MAX_LINES - 1))
        put("docs/A.md", "# A\n\n## Kept here\n\n| heading | file |\n| --- | --- |\n"
            "| Moved away (h1) | [x/moved.md](x/moved.md) |\n| Lost | [x/moved.md](x/moved.md) |\n")
        put("docs/x/moved.md", "# Moved away (h1)\n\ntext\n")
        put("core/good.c", '/* as docs/A.md, "Kept here" and docs/A.md,\n * "Moved away" say */\n')
        put("core/bad.c", '/* docs/A.md, "Never written" */\n')
        put("core/lost.c", '# docs/A.md, "Lost"\n')
        put("core/nofile.c", '/* docs/B.md, "Kept here" */\n')
        errors = check(tmp)
        want = [("docs/long.md:", "lines"), ("core/bad.c:", "Never written"), ("core/lost.c:", "Lost"),
                ("core/nofile.c:", "no such")]
        for w, word in want:
            if not any(e.startswith(w) and word in e for e in errors):
                print(f"doc_check: self-test: the check missed the planted {w} ({word})", file=sys.stderr)
                return False
        for ok in ("docs/ok.md", "core/good.c"):
            if any(e.startswith(ok) for e in errors):
                print(f"doc_check: self-test: {ok} was refused: {errors}", file=sys.stderr)
                return False
    return True


def run_checker(argv, usage, self_tests, checks, name, ok_line):
    """The command line shared with size_check.py: one SOURCE_DIR, --self-test runs
    each of `self_tests` (each given the source dir) before `checks`; every problem
    printed, then a summary line; exit 1 on a problem, 2 on bad usage."""
    args = [a for a in argv[1:] if a != "--self-test"]
    if len(args) != 1:
        print(usage, file=sys.stderr)
        return 2
    if "--self-test" in argv and not all(t(args[0]) for t in self_tests):
        return 1
    errors = [e for c in checks for e in c(args[0])]
    for e in errors:
        print(e)
    print(f"{name}: {len(errors)} problems" if errors else f"{name}: {ok_line}")
    return 1 if errors else 0


def main(argv):
    return run_checker(argv, __doc__, [lambda _src: self_test()], [check], "doc_check",
                       f"no Markdown file over {MAX_LINES} lines, every cited section found")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
