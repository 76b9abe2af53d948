#!/usr/bin/env python3
"""Prints the shape of the harness's code (issue 41, "One harness").

    scripts/metrics/shape.py [--root DIR] [--json]

Figures, over harness/src with tests left out (files under a tests/
directory, files a `#[cfg(test)] mod NAME;` names, and every item a
`#[cfg(test)]` attribute marks):

- code lines in cli/ against engine/ (a code line is a line that is not
  blank once comments are removed);
- the ten longest functions, in code lines from the `fn` line to its
  closing brace;
- files over 1,000 code lines;
- string literals outside harness/src/rules/ that equal a rule ID of the
  catalogue (the IDs are the `id: "..."` fields of harness/src/rules/**/*.rs);
- the files touched by the last commits that added a rule to the
  catalogue (`git log`, so the figure is history, not the working tree).

Python 3 standard library only; it reads the tree and `git`, never builds.
"""

import argparse
import json
import os
import re
import subprocess
import sys

LONG_FILE = 1000
TOP_FUNCTIONS = 10
RULE_COMMITS = 5


def strip(src):
    """The source with comments blanked and every string or char literal's
    contents replaced by `x` (newlines kept, so lines and columns stay put),
    and the literals themselves, as (line, text)."""
    out = []
    literals = []
    i, n, line = 0, len(src), 1

    def blank(text, keep="x"):
        return "".join("\n" if c == "\n" else keep for c in text)

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(src[i:j], " "))
            line += src.count("\n", i, j)
            i = j
        elif (m := re.compile(r'b?r(#*)"').match(src, i)) and (
            i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")
        ):
            end = '"' + m.group(1)
            j = src.find(end, m.end())
            j = n if j < 0 else j
            literals.append((line, src[m.end() : j]))
            out.append(src[i : m.end()] + blank(src[m.end() : j]) + end)
            line += src.count("\n", i, j)
            i = j + len(end)
        elif c == '"' or (c == "b" and src.startswith('b"', i) and not (i and (src[i - 1].isalnum() or src[i - 1] == "_"))):
            start = i + (2 if c == "b" else 1)
            j, text = start, []
            while j < n and src[j] != '"':
                if src[j] == "\\":
                    nxt = src[j + 1] if j + 1 < n else ""
                    if nxt == "\n":
                        # A line continuation: the newline and the
                        # indentation after it are not part of the string.
                        k = j + 2
                        while k < n and src[k] in " \t\n":
                            k += 1
                        j = k
                        continue
                    text.append({"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "0": "\0"}.get(nxt, "\\" + nxt))
                    j += 2
                else:
                    text.append(src[j])
                    j += 1
            literals.append((line, "".join(text)))
            out.append(src[i:start] + blank(src[start:j]) + '"')
            line += src.count("\n", i, j)
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}') or a lifetime ('a).
            m = re.compile(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'").match(src, i)
            if m:
                out.append("'" + "x" * (m.end() - i - 2) + "'")
                i = m.end()
            else:
                out.append(c)
                i += 1
        else:
            if c == "\n":
                line += 1
            out.append(c)
            i += 1
    return "".join(out), literals


def match_brace(code, open_at):
    """The index of the `}` closing the `{` at `open_at`."""
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def item_end(code, start):
    """Where the item starting at `start` ends: its matching `}` or `;`."""
    for j in range(start, len(code)):
        if code[j] == ";":
            return j
        if code[j] == "{":
            return match_brace(code, j)
    return len(code) - 1


CFG_TEST = re.compile(r"#\[cfg\(test\)\]")


def without_tests(code):
    """`code` with every `#[cfg(test)]` item blanked, the names of
    out-of-line test modules (`#[cfg(test)] mod NAME;`), and the lines
    (first, last; from 1) of each item blanked."""
    out, files, spans, pos = [], [], [], 0
    for m in CFG_TEST.finditer(code):
        if m.start() < pos:
            continue
        end = item_end(code, m.end())
        item = code[m.end() : end + 1]
        d = re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", item)
        if d:
            files.append(d.group(1))
        spans.append((code.count("\n", 0, m.start()) + 1, code.count("\n", 0, end) + 1))
        out.append(code[pos : m.start()])
        out.append("".join("\n" if ch == "\n" else " " for ch in code[m.start() : end + 1]))
        pos = end + 1
    out.append(code[pos:])
    return "".join(out), files, spans


def code_lines(lines):
    return sum(1 for l in lines if l.strip())


class Source:
    def __init__(self, rel, text):
        self.rel = rel
        code, literals = strip(text)
        self.code, self.test_mods, spans = without_tests(code)
        raw = text.split("\n")
        # A literal named through `rule!(...)` is a rule ID the compiler
        # checked, not a bare string.
        self.literals = [
            (n, t)
            for n, t in literals
            if not any(a <= n <= b for a, b in spans) and f'rule!("{t}")' not in raw[n - 1]
        ]
        self.lines = self.code.split("\n")
        self.code_lines = code_lines(self.lines)


def sources(src_dir):
    """Every non-test .rs file under `src_dir`, keyed by path relative to it."""
    found, excluded = {}, set()
    for dirpath, dirnames, filenames in os.walk(src_dir):
        dirnames[:] = sorted(d for d in dirnames if d != "tests")
        for f in sorted(filenames):
            if f.endswith(".rs"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, src_dir)
                with open(path, encoding="utf-8") as fh:
                    s = Source(rel, fh.read())
                found[rel] = s
                here = os.path.dirname(rel)
                # `mod NAME;` in foo/mod.rs or lib.rs names foo/NAME.rs;
                # in foo.rs it names foo/NAME.rs too (2018 layout).
                base = here if f in ("mod.rs", "lib.rs", "main.rs") else os.path.join(here, f[:-3])
                for m in s.test_mods:
                    excluded.add(os.path.normpath(os.path.join(base, m + ".rs")))
                    excluded.add(os.path.normpath(os.path.join(base, m, "mod.rs")))
    return {k: v for k, v in found.items() if k not in excluded}


FN = re.compile(r"\bfn\s+(\w+)")


def functions(s):
    """(code lines, name, file:line) of every function with a body."""
    out = []
    for m in FN.finditer(s.code):
        j = m.end()
        depth = 0
        while j < len(s.code):
            ch = s.code[j]
            if ch in "(<[":
                depth += 1
            elif ch in ")>]":
                # `->` is not a closing angle bracket.
                if not (ch == ">" and s.code[j - 1] == "-"):
                    depth -= 1
            elif ch == ";" and depth <= 0:
                j = -1
                break
            elif ch == "{" and depth <= 0:
                break
            j += 1
        if j < 0 or j >= len(s.code):
            continue
        end = match_brace(s.code, j)
        first = s.code.count("\n", 0, m.start())
        last = s.code.count("\n", 0, end)
        out.append((code_lines(s.lines[first : last + 1]), m.group(1), f"{s.rel}:{first + 1}"))
    return out


def rule_ids(rules_dir):
    ids = set()
    for d, _, files in sorted(os.walk(rules_dir)):
        for f in sorted(files):
            if f.endswith(".rs"):
                with open(os.path.join(d, f), encoding="utf-8") as fh:
                    ids.update(re.findall(r'\bid:\s*"([^"]+)"', fh.read()))
    return ids


def rule_commits(root, count):
    """The last `count` commits that added an `id: "..."` line to the rule
    catalogue, each with the files it touched."""
    try:
        log = subprocess.run(
            ["git", "-C", root, "log", "--format=%h", "-G", r'id: "', "--", "harness/src/rules"],
            capture_output=True, text=True, check=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None
    out = []
    for h in log:
        diff = subprocess.run(
            ["git", "-C", root, "show", "--format=", "-U0", h, "--", "harness/src/rules"],
            capture_output=True, text=True, check=True,
        ).stdout
        added = {i for i in re.findall(r'^\+\s*id:\s*"([^"]+)"', diff, re.M)}
        removed = {i for i in re.findall(r'^-\s*id:\s*"([^"]+)"', diff, re.M)}
        if not added - removed:
            continue  # a move or a rename, not a new rule
        files = subprocess.run(
            ["git", "-C", root, "show", "--format=", "--name-only", h],
            capture_output=True, text=True, check=True,
        ).stdout.split()
        out.append({"commit": h, "rules": sorted(added - removed), "files": len(files)})
        if len(out) == count:
            break
    return out


def measure(root):
    src = os.path.join(root, "harness", "src")
    if not os.path.isdir(src):
        raise SystemExit(f"shape.py: {src}: no such directory (give --root the repository root)")
    files = sources(src)
    area = lambda prefix: sum(s.code_lines for k, s in files.items() if k.startswith(prefix + os.sep))
    fns = sorted((f for s in files.values() for f in functions(s)), key=lambda f: (-f[0], f[2]))
    ids = rule_ids(os.path.join(src, "rules"))
    literals = [
        (f"{s.rel}:{line}", text)
        for s in sorted(files.values(), key=lambda s: s.rel)
        if not s.rel.startswith("rules" + os.sep)
        for line, text in sorted(s.literals)
        if text in ids
    ]
    return {
        "code_lines": sum(s.code_lines for s in files.values()),
        "cli_lines": area("cli"),
        "engine_lines": area("engine"),
        "longest_functions": [{"lines": n, "name": name, "at": at} for n, name, at in fns[:TOP_FUNCTIONS]],
        "long_files": sorted(
            ({"file": k, "lines": s.code_lines} for k, s in files.items() if s.code_lines > LONG_FILE),
            key=lambda f: -f["lines"],
        ),
        "rule_ids": len(ids),
        "rule_id_literals": [{"at": at, "id": text} for at, text in literals],
        "rule_commits": rule_commits(root, RULE_COMMITS),
    }


def show(m):
    p = print
    p(f"harness/src code lines (tests left out): {m['code_lines']}")
    p(f"cli/: {m['cli_lines']} code lines; engine/: {m['engine_lines']}")
    p(f"ten longest functions (code lines):")
    for f in m["longest_functions"]:
        p(f"  {f['lines']:5}  {f['name']}  ({f['at']})")
    p(f"files over {LONG_FILE} code lines: {len(m['long_files'])}")
    for f in m["long_files"]:
        p(f"  {f['lines']:5}  {f['file']}")
    lits = m["rule_id_literals"]
    p(f"rule-ID string literals outside rules/: {len(lits)} (of {m['rule_ids']} IDs)")
    by_file = {}
    for l in lits:
        by_file.setdefault(l["at"].rsplit(":", 1)[0], []).append(l["id"])
    for f, got in sorted(by_file.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        p(f"  {len(got):5}  {f}")
    commits = m["rule_commits"]
    if commits is None:
        p("files touched to add a rule: no git history here")
    else:
        p(f"files touched to add a rule (last {len(commits)} commits that added one):")
        for c in commits:
            p(f"  {c['files']:5}  {c['commit']}  {', '.join(c['rules'])}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args()
    m = measure(os.path.abspath(a.root))
    if a.json:
        json.dump(m, sys.stdout, indent=1)
        print()
    else:
        show(m)


if __name__ == "__main__":
    main()
