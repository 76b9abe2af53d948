#!/usr/bin/env python3
"""Drafts an expectations file (expectations/README.md) from run reports.

    scripts/expectations-from-reports.py LIBRARY REPORT.json... > expectations/LIBRARY.json
    scripts/expectations-from-reports.py --exact LIBRARY expectations/LIBRARY.json REPORT.json... [--seen REPORT.json...] > NEW.json
    scripts/expectations-from-reports.py --retrace LIBRARY expectations/LIBRARY.json REPORT.json... > NEW.json

Every rule that failed (MUST or SHOULD) becomes a rule expectation (`fail`).
Cases get exact expectations: every entry admits one outcome, and every
case a pattern claims in the reports ended with that outcome. A case the
default does not account for (a crash, an error, a failure its MUST rules do
not cover, or a case a later entry would claim with another outcome) gets an
entry; cases that share an outcome are grouped under the shortest ID prefix
(`side/path/.../*`) whose every reported case ended that way. A case the
reports mark flaky (`--repeat`: its verdict changed between runs) gets an
entry of its own that admits every outcome seen, with `"flaky": true`.

Traced causes (expectations/causes.json: library, `match`, a regex over a
case's message, output and violation evidence, optional `case`, a regex
over its ID, reason, link, the reproducing script) name the reason: an
entry whose failing cases all match one cause of the library gets that
cause's reason and link. A flaky entry gets a cause's link only when the
cause is traced for that case; otherwise its link is a FINDINGS section
that is not a traced cause's, so the committed files' test can count it as
untraced.

`--exact` rewrites an existing file so that it is exact: entries that admit
one outcome (or are flaky with a reason and a link) are kept, and so are
their reasons and links; every other entry is replaced by exact entries for
the cases it claimed in the reports, with its reason and link (a drafted
"cases here ended ..." reason is redrafted for the one outcome). A rule
entry admitting several outcomes becomes `fail` where the rule failed and
is dropped where it did not. Cases that no longer need an entry (the
default, pass, skip or limitation, accounts for them) get none.

`--seen REPORT...` (after the reports) adds other runs of the same library
(another seed, a filtered smoke run): they add no case, but a case of the
reports that ended otherwise in one of them is flaky too, with every
outcome seen (the built-in scenarios' data does not depend on the seed, so
a verdict that changes between such runs is the library's, or its
worker's, nondeterminism). A traced cause whose `match` finds the text of
any run of a flaky case explains it.

`--retrace` rewrites the entries of an existing file whose reason says they
are not traced yet ("reached by issue 38", "not traced", "not yet
reproduced"): patterns and outcomes are kept as they are. Reports may be
gzipped.
"""
import gzip
import json
import os
import re
import sys
from collections import Counter, defaultdict

FAILING = {"fail", "error", "crash", "timeout", "harness_error"}
CAUSES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "expectations", "causes.json")
UNTRACED = re.compile(r"reached by issue 38|not traced|not yet reproduced|not reproduced|^cases here ended", re.I)


def load_report(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def load_causes(library, path=None):
    path = path or CAUSES
    if not os.path.exists(path):
        return []
    with open(path) as f:
        causes = json.load(f)
    return [dict(c, _match=re.compile(c["match"]), _case=re.compile(c.get("case", "")))
            for c in causes if c["library"] == library]


def case_text(case):
    evidence = [v.get("evidence") or "" for v in case.get("violations", [])]
    return "\n".join([case.get("message") or "", case.get("output") or ""] + evidence)


def pattern_regex(pattern):
    return re.compile("^" + re.escape(pattern).replace(r"\*", ".*") + "$")


def traced(pattern, cases, causes):
    """The one cause every failing case under `pattern` matches, or None."""
    rx = pattern_regex(pattern)
    hits = [c for c in cases if c["verdict"] in FAILING and rx.match(c["id"])]
    if not hits or not causes:
        return None
    for cause in causes:
        if all(cause["_match"].search(case_text(c)) and cause["_case"].search(c["id"]) for c in hits):
            return cause
    return None


def with_cause(entry, cause):
    entry["reason"] = f"{cause['reason']} (reproduced: {cause['reproduced']})"
    entry["link"] = cause["link"]
    return entry


def retrace(library, path, reports):
    causes = load_causes(library)
    cases = [c for p in reports for c in load_report(p).get("cases", [])]
    with open(path) as f:
        doc = json.load(f)
    for entry in doc["expectations"]:
        if "/" not in entry["pattern"] or not UNTRACED.search(entry.get("reason", "")):
            continue
        cause = traced(entry["pattern"], cases, causes)
        if cause:
            with_cause(entry, cause)
    json.dump(doc, sys.stdout, indent=2)
    sys.stdout.write("\n")

def anchor(library):
    return f"../reports/FINDINGS.md#{library}"


DEFAULT_OK = {"pass", "skip", "limitation"}
DRAFTED = "cases here ended"


def outcomes(entry):
    return set(w.strip() for w in entry["outcome"].split("|"))


def exact_or_flaky(entry):
    """An entry the committed files' test accepts: one outcome, or several
    as `flaky` with a reason and a link."""
    if len(outcomes(entry)) == 1:
        return True
    return entry.get("flaky") is True and bool(entry.get("reason")) and bool(entry.get("link"))


class Resolver:
    """The harness's matching (harness/src/report/expectations.rs): the
    first entry whose pattern matches wins; without one a case may pass,
    be skipped or be a limitation, or fail when every MUST rule it broke is
    expected to fail."""

    def __init__(self, rule_entries):
        self.rules = [(pattern_regex(x["pattern"]), x) for x in rule_entries]

    def rule_fails(self, rule):
        for rx, x in self.rules:
            if rx.match(rule):
                return "fail" in outcomes(x)
        return False

    def default_ok(self, case):
        v = case["verdict"]
        if v in DEFAULT_OK:
            return True
        if v != "fail":
            return False
        musts = [x["rule"] for x in case.get("violations", []) if x.get("level") == "MUST"]
        return bool(musts) and all(self.rule_fails(r) for r in musts)

    def accepts(self, case, entries):
        for rx, x in entries:
            if rx.match(case["id"]):
                return case["verdict"] in outcomes(x)
        return self.default_ok(case)


def seen(case):
    """Every outcome a case had: its verdict and, if flaky, the others."""
    return {case["verdict"], *case.get("flaky", [])}


def exact_rules(entry, rules):
    """A rule entry, exact: one that admits several outcomes becomes `fail`
    for each rule it claimed that failed, and goes where none did."""
    if exact_or_flaky(entry):
        return [entry]
    rx = pattern_regex(entry["pattern"])
    failed = sorted({r["rule"] for r in rules if r["verdict"] == "fail" and rx.match(r["rule"])})
    return [dict(entry, pattern=rule, outcome="fail") for rule in failed]


def cause_of_flaky(case, old, causes):
    """The traced cause of a flaky case: the cause its old entry already
    named, if that cause's `case` regex takes its ID; else a cause whose
    `case` regex takes its ID and whose `match` regex finds the text of
    one of its runs."""
    for c in causes:
        if old.get("link") == c["link"] and c["_case"].search(case["id"]):
            return c
    texts = [case_text(case)] + case.get("_seen_texts", [])
    for c in causes:
        if c["_case"].search(case["id"]) and any(c["_match"].search(t) for t in texts):
            return c
    return None


def flaky_entry(case, old, causes, library, untraced_link):
    both = sorted(seen(case))
    entry = {"pattern": case["id"], "outcome": "|".join(both), "flaky": True}
    cause = cause_of_flaky(case, old, causes)
    if cause:
        return with_cause(entry, cause)
    entry["reason"] = (f"flaky: ended {', '.join(both)} in repeated runs of the same data; "
                       f"not traced yet")
    entry["link"] = untraced_link
    return entry


def with_seen(cases, seen_reports):
    """The reports' cases, a case that ended otherwise in one of the
    `seen_reports` marked flaky with every outcome seen."""
    others = defaultdict(list)
    for r in seen_reports:
        for c in r.get("cases", []):
            others[c["id"]].append(c)
    out = []
    for c in cases:
        runs = others.get(c["id"], [])
        verdicts = seen(c) | {d["verdict"] for d in runs}
        if len(verdicts) > 1:
            c = dict(c, flaky=sorted(verdicts), _seen_texts=[case_text(d) for d in runs])
        out.append(c)
    return out


def rewrite(library, entries, reports, causes, seen_reports=()):
    """`entries` made exact over the reports' cases (see the module's doc)."""
    cases = with_seen([c for r in reports for c in r.get("cases", [])], seen_reports)
    rules = [r for r in reports for r in r.get("rules", [])]
    rule_old = [x for x in entries if "/" not in x["pattern"]]
    case_old = [x for x in entries if "/" in x["pattern"]]
    # The end of the list stands for the default (an entry to replace).
    end = {"pattern": "*/*", "outcome": "pass|fail", "reason": DRAFTED, "link": anchor(library)}
    case_old.append(end)
    rule_blocks = [exact_rules(x, rules) for x in rule_old]
    rule_new = [y for b in rule_blocks for y in b]
    resolver = Resolver(rule_new)
    cause_links = {c["link"] for c in causes}
    rxs = [pattern_regex(x["pattern"]) for x in case_old]
    owner, claims = {}, defaultdict(list)
    for c in cases:
        owner[c["id"]] = next(i for i, rx in enumerate(rxs) if rx.match(c["id"]))
        claims[owner[c["id"]]].append(c)
    kept = [exact_or_flaky(x) and x is not end for x in case_old]
    by_prefix = defaultdict(list)
    for c in cases:
        parts = c["id"].split("/")
        for k in range(2, len(parts)):
            by_prefix["/".join(parts[:k])].append(c)

    def may_claim(prefix, i, v):
        """`prefix/*` with outcome v, placed in entry i's block, claims
        only cases that ended v: those an earlier kept entry claims, and
        flaky ones of this or an earlier block (their own entries come
        first), excepted."""
        for c in by_prefix[prefix]:
            j = owner[c["id"]]
            if j < i and kept[j]:
                continue
            if j <= i and c.get("flaky"):
                continue
            if c["verdict"] != v or c.get("flaky"):
                return False
        return True

    # An untraced flaky entry links a FINDINGS section that is no traced
    # cause's: its old entry's, else the one the file links most.
    others = Counter(x.get("link") for x in entries if x.get("link") not in cause_links)
    others.pop(None, None)
    fallback = others.most_common(1)[0][0] if others else anchor(library)

    def untraced_link(old):
        link = old.get("link")
        return fallback if old is end or not link or link in cause_links else link

    def block(i, tail):
        old = case_old[i]
        mine = claims[i]
        out = [flaky_entry(c, old, causes, library, untraced_link(old))
               for c in mine if c.get("flaky") and not (kept[i] and seen(c) <= outcomes(old))]
        if kept[i]:
            needed = [c for c in mine if not c.get("flaky") and c["verdict"] not in outcomes(old)]
        else:
            needed = [c for c in mine if not c.get("flaky") and not resolver.accepts(c, tail)]
        done = set()
        for c in needed:
            if c["id"] in done:
                continue
            parts = c["id"].split("/")
            pattern = c["id"]
            for k in range(2, len(parts)):
                prefix = "/".join(parts[:k])
                if may_claim(prefix, i, c["verdict"]):
                    pattern = prefix + "/*"
                    break
            rx = pattern_regex(pattern)
            claimed = [d for d in needed if rx.match(d["id"])]
            done.update(d["id"] for d in claimed)
            out.append(grouped(pattern, c["verdict"], claimed, old))
        # An exact entry a flaky entry of its one case now shadows goes.
        if kept[i] and not any(x["pattern"] == old["pattern"] for x in out):
            out.append(old)
        return out

    def grouped(pattern, v, claimed, old):
        entry = {"pattern": pattern, "outcome": v}
        cause = traced(pattern, claimed, causes)
        if cause:
            return with_cause(entry, cause)
        if old.get("reason", "").startswith(DRAFTED):
            entry["reason"] = f"{DRAFTED} {v}"
        else:
            entry["reason"] = old["reason"]
        entry["link"] = old.get("link") or anchor(library)
        return entry

    blocks = [None] * len(case_old)
    tail = []
    for i in reversed(range(len(case_old))):
        blocks[i] = block(i, tail)
        tail = [(pattern_regex(x["pattern"]), x) for x in blocks[i]] + tail
    # Back in the file's order: each block where its entry was.
    out, rule_at, case_at = [], iter(rule_blocks), iter(blocks)
    for x in entries:
        out.extend(next(case_at) if "/" in x["pattern"] else next(rule_at))
    out.extend(blocks[-1])
    return out


def draft_rules(library, reports):
    out, seen_rules = [], set()
    for r in reports:
        for rule in r.get("rules", []):
            if rule["verdict"] != "fail" or rule["level"] == "INFO" or rule["rule"] in seen_rules:
                continue
            seen_rules.add(rule["rule"])
            evidence = (rule.get("evidence") or "").replace("\n", " ")[:300]
            out.append({
                "pattern": rule["rule"],
                "outcome": "fail",
                "reason": f"{rule['level']} {rule['rule']} broken in {rule['failed']} of "
                          f"{rule['checked']} cases; first: {evidence}",
                "link": anchor(library),
            })
    return out


def dump(doc):
    json.dump(doc, sys.stdout, indent=2)
    sys.stdout.write("\n")


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("--retrace", "--exact"):
        if len(sys.argv) < 5:
            sys.exit(__doc__)
        if sys.argv[1] == "--retrace":
            return retrace(sys.argv[2], sys.argv[3], sys.argv[4:])
        library, path = sys.argv[2], sys.argv[3]
        with open(path) as f:
            doc = json.load(f)
        args = sys.argv[4:]
        at = args.index("--seen") if "--seen" in args else len(args)
        reports = [load_report(p) for p in args[:at]]
        seen_reports = [load_report(p) for p in args[at + 1:]]
        if not reports:
            sys.exit(__doc__)
        doc["expectations"] = rewrite(library, doc["expectations"], reports,
                                      load_causes(library), seen_reports)
        return dump(doc)
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    library = sys.argv[1]
    reports = [load_report(p) for p in sys.argv[2:]]
    entries = rewrite(library, draft_rules(library, reports), reports, load_causes(library))
    dump({"library": library, "expectations": entries})


if __name__ == "__main__":
    main()
