#!/usr/bin/env python3
"""Checks a smoke matrix (scripts/matrix/smoke.sh) against the committed
baseline: every unit's status (pass, partial, fail, error, n/a) must be the
one the baseline records, so a verdict that moves (a pair that passed and now
fails, or the reverse), a unit that appears or goes, fails CI. Expectations
files judge the certification units' cases inside the matrix run itself.

    smoke-check.py MATRIX_JSON BASELINE_JSON
    ARROWCERT_BLESS=1 smoke-check.py ...   # rewrite the baseline (review it)
"""
import json
import os
import sys


def main():
    matrix_path, baseline_path = sys.argv[1:3]
    m = json.load(open(matrix_path))
    got = {u["id"]: u["status"] for u in m["units"]}
    filters = m["data"].get("filters", [])
    if os.environ.get("ARROWCERT_BLESS") == "1":
        with open(baseline_path, "w") as f:
            json.dump({"filters": filters, "units": got}, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"smoke-check: wrote {baseline_path} ({len(got)} units)")
        return 0
    base = json.load(open(baseline_path))
    problems = []
    if base["filters"] != filters:
        problems.append(f"filters {filters} differ from the baseline's {base['filters']}")
    want = base["units"]
    for uid in sorted(set(want) | set(got)):
        w, g = want.get(uid), got.get(uid)
        if w != g:
            msg = next((u.get("message") for u in m["units"] if u["id"] == uid), None)
            problems.append(
                f"{uid}: {g or 'not run'} (baseline: {w or 'not in the baseline'})"
                + (f": {msg}" if msg else "")
            )
    if problems:
        print(f"smoke-check: {len(problems)} unit(s) moved from {baseline_path}:")
        for p in problems:
            print(f"  {p}")
        print("(a real change: review it, then ARROWCERT_BLESS=1 bash scripts/matrix/smoke.sh)")
        return 1
    print(f"smoke-check: all {len(got)} units as in {baseline_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
