#!/usr/bin/env python3
"""Drafts an expectations file (expectations/README.md) from run reports.

    scripts/expectations-from-reports.py LIBRARY REPORT.json... > expectations/LIBRARY.json
    scripts/expectations-from-reports.py --retrace LIBRARY expectations/LIBRARY.json REPORT.json... > NEW.json

Every rule that failed (MUST or SHOULD) becomes a rule expectation, every
crashed, hung, failed or erroring case a case expectation, each with the
evidence the report gives as its reason and a link to the library's
FINDINGS.md entry. Async cases (whose outcome depends on the library's
thread timing) are grouped per path with every outcome seen, pass
included. A draft: read it, and say why in each reason where the evidence
does not.

Traced causes (expectations/causes.json: library, `match`, a regex over a
case's message, output and violation evidence, optional `case`, a regex
over its ID, reason, link, the reproducing script) name the reason: a
drafted case entry whose failing cases all match one cause of the library
gets that cause's reason and link. `--retrace` rewrites an existing file
the same way, only the entries whose reason says they are not traced yet
("reached by issue 38", "not traced", "not yet reproduced"): patterns and
outcomes are kept as they are. Reports may be gzipped.
"""
import gzip
import json
import os
import re
import sys
from collections import defaultdict

FAILING = {"fail", "error", "crash", "timeout", "harness_error"}
CAUSES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "expectations", "causes.json")
UNTRACED = re.compile(r"reached by issue 38|not traced|not yet reproduced|not reproduced", re.I)


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


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--retrace":
        if len(sys.argv) < 5:
            sys.exit(__doc__)
        return retrace(sys.argv[2], sys.argv[3], sys.argv[4:])
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    library, paths = sys.argv[1], sys.argv[2:]
    causes = load_causes(library)
    out = []
    seen = set()
    for path in paths:
        r = load_report(path)
        for rule in r.get("rules", []):
            if rule["verdict"] != "fail" or rule["level"] == "INFO" or rule["rule"] in seen:
                continue
            seen.add(rule["rule"])
            evidence = (rule.get("evidence") or "").replace("\n", " ")[:300]
            out.append({
                "pattern": rule["rule"],
                "outcome": "fail",
                "reason": f"{rule['level']} {rule['rule']} broken in {rule['failed']} of "
                          f"{rule['checked']} cases; first: {evidence}",
                "link": anchor(library),
            })
        # Cases. A crash or a hang is expected by its own group (the ID
        # without its batch and slice); other outcomes by their bucket
        # (side, path and encoding or scenario: the first three parts of
        # the ID), async cases per side (their outcome is the library's
        # thread timing's). A pattern expects every outcome its cases had,
        # so a new kind of failure, or a bucket that now passes
        # throughout, is noticed. Exact patterns come first: the first
        # pattern that matches a case is the one that counts.
        exact, coarse = defaultdict(set), defaultdict(set)
        exact_failing, coarse_failing = set(), set()
        rows = []
        for c in r.get("cases", []):
            parts = c["id"].split("/")
            v = c["verdict"]
            # A failed case whose MUST rules are expected is covered by them.
            if v == "fail" and any(x.get("level") == "MUST" for x in c.get("violations", [])):
                v = "covered"
            if c["path"] in ("async", "consume_async"):
                rows.append((None, "/".join(parts[:2]) + "/*", v))
                continue
            kept = [p for p in parts if not p.startswith(("batch:", "slice:"))]
            fine = "/".join(kept) + ("/*" if len(kept) < len(parts) else "")
            bucket = "/".join(parts[:3]) + ("/*" if len(parts) > 3 else "")
            rows.append((fine, bucket, v))
        hard = {fine for fine, _, v in rows if fine and v in ("crash", "timeout", "harness_error")}
        for fine, bucket, v in rows:
            if fine in hard:
                exact[fine].add(v)
                exact_failing.add(fine)
            else:
                coarse[bucket].add(v)
                if v in FAILING:
                    coarse_failing.add(bucket)
        for table, keys in ((exact, exact_failing), (coarse, coarse_failing)):
            for key in sorted(keys):
                if key in seen:
                    continue
                seen.add(key)
                verdicts = table[key] - {"covered"}
                if "covered" in table[key]:
                    verdicts.add("fail")
                entry = {
                    "pattern": key,
                    "outcome": "|".join(sorted(verdicts)),
                    "reason": "cases here ended " + ", ".join(sorted(verdicts))
                              + (" (async: the library's thread timing decides which)"
                                 if key.endswith("async/*") else ""),
                    "link": anchor(library),
                }
                cause = traced(key, r.get("cases", []), causes)
                out.append(with_cause(entry, cause) if cause else entry)
    json.dump({"library": library, "expectations": out}, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
