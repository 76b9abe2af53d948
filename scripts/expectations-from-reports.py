#!/usr/bin/env python3
"""Drafts an expectations file (expectations/README.md) from run reports.

    scripts/expectations-from-reports.py LIBRARY REPORT.json... > expectations/LIBRARY.json

Every rule that failed (MUST or SHOULD) becomes a rule expectation, every
crashed, hung, failed or erroring case a case expectation, each with the
evidence the report gives as its reason and a link to the library's
FINDINGS.md entry. Async cases (whose outcome depends on the library's
thread timing) are grouped per path with every outcome seen, pass
included. A draft: read it, and say why in each reason where the evidence
does not.
"""
import json
import sys
from collections import defaultdict

FAILING = {"fail", "error", "crash", "timeout", "harness_error"}


def anchor(library):
    return f"../reports/FINDINGS.md#{library}"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    library, paths = sys.argv[1], sys.argv[2:]
    out = []
    seen = set()
    for path in paths:
        r = json.load(open(path))
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
                out.append({
                    "pattern": key,
                    "outcome": "|".join(sorted(verdicts)),
                    "reason": "cases here ended " + ", ".join(sorted(verdicts))
                              + (" (async: the library's thread timing decides which)"
                                 if key.endswith("async/*") else ""),
                    "link": anchor(library),
                })
    json.dump({"library": library, "expectations": out}, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
