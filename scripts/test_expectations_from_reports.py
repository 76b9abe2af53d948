#!/usr/bin/env python3
"""Tests of scripts/expectations-from-reports.py:

    python3 scripts/test_expectations_from_reports.py

A drafted entry whose failing cases all match a cause gets its reason and
link; one whose cases match two causes, or none, keeps the drafted reason;
--retrace rewrites only untraced entries and keeps patterns and outcomes.
Drafted and --exact entries admit one outcome each (several only for a
case the report marks flaky, as "flaky": true), group cases only where
every case under the pattern ended the same way, and expect every result
of the reports they come from.
"""
import contextlib
import importlib.util
import io
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("efr", os.path.join(HERE, "expectations-from-reports.py"))
efr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(efr)

CAUSES = [
    {"library": "lib", "match": r"datatype \"\+vl\"", "reason": "panics on list_view",
     "link": "../reports/FINDINGS.md#a", "reproduced": "reports/repro/a.py"},
    {"library": "lib", "match": r"SIGSEGV", "case": r"/varied:null-names/",
     "reason": "crashes on a NULL name", "link": "../reports/FINDINGS.md#b",
     "reproduced": "reports/repro/b.py"},
    {"library": "other", "match": r".", "reason": "never used", "link": "x", "reproduced": "x"},
]


def case(id_, verdict, message="", output=""):
    return {"id": id_, "path": "consume_array", "verdict": verdict, "message": message,
            "output": output}


REPORT = {"rules": [], "cases": [
    case("consumer/array/plain/lv/batch:0", "error", 'PanicException: The datatype "+vl" is'),
    case("consumer/array/plain/lv/batch:1", "error", 'PanicException: The datatype "+vl" is'),
    case("consumer/array/varied:null-names/p/batch:0", "crash", "killed by SIGSEGV (11)"),
    case("consumer/array/varied:offset/p/batch:0", "crash", "killed by SIGSEGV (11)"),
    case("consumer/array/plain/mixed/batch:0", "error", 'The datatype "+vl" is'),
    case("consumer/array/plain/mixed/batch:1", "error", "something else"),
    case("consumer/array/plain/ok/batch:0", "pass"),
]}


def write(path, value):
    with open(path, "w") as f:
        json.dump(value, f)


def read(path):
    with open(path) as f:
        return f.read()


class Traced(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.causes = os.path.join(self.dir.name, "causes.json")
        write(self.causes, CAUSES)
        self.report = os.path.join(self.dir.name, "report.json")
        write(self.report, REPORT)
        self.saved = efr.CAUSES
        efr.CAUSES = self.causes

    def tearDown(self):
        efr.CAUSES = self.saved
        self.dir.cleanup()

    def run_main(self, *args):
        out = io.StringIO()
        argv, sys.argv = sys.argv, ["efr", *args]
        try:
            with contextlib.redirect_stdout(out):
                efr.main()
        finally:
            sys.argv = argv
        return json.loads(out.getvalue())

    def test_draft_takes_the_cause_every_failing_case_matches(self):
        got = {e["pattern"]: e for e in self.run_main("lib", self.report)["expectations"]}
        # lv's errors share a cause; mixed's two errors do not.
        lv = got["consumer/array/plain/lv/*"]
        self.assertEqual(lv["reason"], "panics on list_view (reproduced: reports/repro/a.py)")
        self.assertEqual(got["consumer/array/plain/mixed/*"]["reason"], "cases here ended error")
        # The only case under varied:null-names: the group is the encoding.
        nn = got["consumer/array/varied:null-names/*"]
        self.assertEqual(nn["reason"], "crashes on a NULL name (reproduced: reports/repro/b.py)")
        self.assertEqual(nn["link"], "../reports/FINDINGS.md#b")
        # The case regex keeps the same signal on another variation untraced.
        off = got["consumer/array/varied:offset/*"]
        self.assertEqual(off["reason"], "cases here ended crash")
        self.assertEqual(off["link"], "../reports/FINDINGS.md#lib")
        # A passing case needs no entry: the default expects it.
        self.assertNotIn("consumer/array/plain/ok/*", got)

    def test_traced_needs_all_failing_cases(self):
        causes = efr.load_causes("lib", self.causes)
        self.assertEqual(len(causes), 2)
        cases = REPORT["cases"]
        self.assertEqual(efr.traced("consumer/array/plain/lv/*", cases, causes)["link"],
                         "../reports/FINDINGS.md#a")
        self.assertIsNone(efr.traced("consumer/array/plain/mixed/*", cases, causes))
        self.assertIsNone(efr.traced("consumer/array/plain/ok/*", cases, causes))

    def test_retrace_changes_only_untraced_reasons(self):
        doc = {"library": "lib", "expectations": [
            {"pattern": "consumer/array/plain/lv/*", "outcome": "error",
             "reason": "reached by issue 38's new scenarios; not yet reproduced", "link": "old"},
            {"pattern": "consumer/array/plain/lv/batch:0", "outcome": "error",
             "reason": "already explained", "link": "kept"},
            {"pattern": "consumer/array/plain/mixed/*", "outcome": "error",
             "reason": "not traced", "link": "old"},
            # A drafted reason names no cause: retraced too.
            {"pattern": "consumer/array/plain/lv/batch:1", "outcome": "error",
             "reason": "cases here ended error", "link": "generic"},
        ]}
        path = os.path.join(self.dir.name, "lib.json")
        write(path, doc)
        got = self.run_main("--retrace", "lib", path, self.report)["expectations"]
        self.assertEqual([(e["pattern"], e["outcome"]) for e in got],
                         [(e["pattern"], e["outcome"]) for e in doc["expectations"]])
        self.assertEqual(got[0]["reason"], "panics on list_view (reproduced: reports/repro/a.py)")
        self.assertEqual(got[0]["link"], "../reports/FINDINGS.md#a")
        self.assertEqual(got[1], doc["expectations"][1])
        self.assertEqual(got[2], doc["expectations"][2])
        self.assertEqual(got[3]["link"], "../reports/FINDINGS.md#a")


def expected(entries, report):
    """The harness's check (harness/src/report/expectations.rs), for cases:
    the results of `report` that `entries` do not expect."""
    resolver = efr.Resolver([x for x in entries if "/" not in x["pattern"]])
    table = [(efr.pattern_regex(x["pattern"]), x) for x in entries if "/" in x["pattern"]]
    return [c["id"] for c in report["cases"] if not resolver.accepts(c, table)]


MIXED = {"rules": [{"rule": "array.x", "level": "MUST", "verdict": "fail", "failed": 1,
                    "checked": 9, "evidence": "x"}], "cases": [
    case("consumer/array/plain/a/batch:0", "crash"),
    case("consumer/array/plain/a/batch:1", "crash"),
    case("consumer/array/plain/b/batch:0", "crash"),
    case("consumer/array/plain/b/batch:1", "pass"),
    case("consumer/array/plain/c/batch:0", "error"),
    case("consumer/array/plain/c/batch:1", "limitation"),
    dict(case("consumer/array/plain/d/batch:0", "fail"),
         violations=[{"rule": "array.x", "level": "MUST", "evidence": "x"}]),
    dict(case("consumer/array/plain/e/batch:0", "crash"), flaky=["crash", "pass"]),
    case("consumer/array/plain/f/batch:0", "pass"),
    case("consumer/array/varied:null-names/q/batch:0", "pass"),
]}


class Exact(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.causes = os.path.join(self.dir.name, "causes.json")
        write(self.causes, CAUSES)
        self.report = os.path.join(self.dir.name, "report.json")
        write(self.report, MIXED)
        self.saved = efr.CAUSES
        efr.CAUSES = self.causes

    def tearDown(self):
        efr.CAUSES = self.saved
        self.dir.cleanup()

    run_main = Traced.run_main

    def check_exact(self, entries):
        for e in entries:
            if "|" in e["outcome"]:
                self.assertTrue(e.get("flaky") and e["reason"] and e["link"], e)
        self.assertEqual(expected(entries, MIXED), [])

    def test_draft_entries_admit_one_outcome_and_group_only_alike_cases(self):
        got = self.run_main("lib", self.report)["expectations"]
        self.check_exact(got)
        table = {e["pattern"]: e["outcome"] for e in got}
        self.assertEqual(table["array.x"], "fail")
        self.assertEqual(table["consumer/array/plain/a/*"], "crash")  # both batches crashed
        # b's batches differ: only the crash has an entry, by its ID.
        self.assertEqual(table["consumer/array/plain/b/batch:0"], "crash")
        self.assertNotIn("consumer/array/plain/b/*", table)
        self.assertEqual(table["consumer/array/plain/c/batch:0"], "error")
        # d's failure is covered by its rule's entry; f passed.
        self.assertFalse([p for p in table if "/d/" in p or "/f/" in p])
        e = [x for x in got if x["pattern"] == "consumer/array/plain/e/batch:0"][0]
        self.assertEqual((e["outcome"], e["flaky"]), ("crash|pass", True))
        self.assertIn("not traced", e["reason"])

    def test_exact_replaces_a_several_outcome_entry_and_keeps_exact_ones(self):
        doc = {"library": "lib", "expectations": [
            {"pattern": "consumer/array/plain/a/batch:1", "outcome": "crash",
             "reason": "a finding", "link": "../reports/FINDINGS.md#kept"},
            {"pattern": "array.x", "outcome": "fail|pass", "reason": "timing", "link": "l"},
            {"pattern": "consumer/*", "outcome": "crash|error|fail|limitation|pass",
             "reason": "any outcome at all", "link": "../reports/FINDINGS.md#old"},
        ]}
        path = os.path.join(self.dir.name, "lib.json")
        write(path, doc)
        got = self.run_main("--exact", "lib", path, self.report)["expectations"]
        self.check_exact(got)
        self.assertEqual(got[0], doc["expectations"][0])
        self.assertEqual(got[1], dict(doc["expectations"][1], outcome="fail"))
        patterns = [e["pattern"] for e in got]
        self.assertNotIn("consumer/*", patterns)
        # The replaced entry's reason and link go with the exact entries.
        b = [e for e in got if e["pattern"] == "consumer/array/plain/b/batch:0"][0]
        self.assertEqual((b["outcome"], b["reason"], b["link"]),
                         ("crash", "any outcome at all", "../reports/FINDINGS.md#old"))
        # a's batch:1 keeps its entry, and both batches crashed: a/* may
        # follow it.
        self.assertLess(patterns.index("consumer/array/plain/a/batch:1"),
                        patterns.index("consumer/array/plain/a/*"))

    def test_a_pattern_never_claims_a_case_of_another_outcome_after_it(self):
        # x/1 crashed and x/2 passed under the replaced catch-all; a later
        # entry expects x/2 to crash, so x/2 needs an entry of its own
        # before it, and x/* may not group x/1 with a case that ended
        # otherwise.
        report = {"rules": [], "cases": [case("consumer/array/x/1", "crash"),
                                         case("consumer/array/x/2", "pass")]}
        doc = {"library": "lib", "expectations": [
            {"pattern": "consumer/*", "outcome": "crash|pass", "reason": "r", "link": "l"},
            {"pattern": "consumer/array/x/2", "outcome": "crash", "reason": "r", "link": "l"},
        ]}
        path = os.path.join(self.dir.name, "lib.json")
        write(path, doc)
        write(self.report, report)
        got = self.run_main("--exact", "lib", path, self.report)["expectations"]
        self.assertEqual([(e["pattern"], e["outcome"]) for e in got],
                         [("consumer/array/x/1", "crash"), ("consumer/array/x/2", "pass"),
                          ("consumer/array/x/2", "crash")])
        self.assertEqual(expected(got, report), [])


    def test_a_case_another_run_saw_end_otherwise_is_flaky(self):
        # f passed here and crashed in another run; a's batch:0 crashed in
        # both: not flaky.
        other = {"rules": [], "cases": [
            case("consumer/array/plain/f/batch:0", "crash", "killed by SIGSEGV (11)"),
            case("consumer/array/plain/a/batch:0", "crash"),
            case("consumer/array/plain/new/batch:0", "crash"),
            case("consumer/array/varied:null-names/q/batch:0", "crash", "killed by SIGSEGV (11)"),
        ]}
        seen_path = os.path.join(self.dir.name, "seen.json")
        write(seen_path, other)
        doc = {"library": "lib", "expectations": []}
        path = os.path.join(self.dir.name, "lib.json")
        write(path, doc)
        got = self.run_main("--exact", "lib", path, self.report, "--seen", seen_path)["expectations"]
        self.check_exact(got)
        self.assertEqual(expected(got, other), ["consumer/array/plain/new/batch:0"])
        f = [x for x in got if x["pattern"] == "consumer/array/plain/f/batch:0"][0]
        self.assertEqual((f["outcome"], f["flaky"]), ("crash|pass", True))
        # SIGSEGV is traced on varied:null-names only.
        self.assertIn("not traced", f["reason"])
        # The other run's crash text is what a cause traces.
        q = [x for x in got if x["pattern"] == "consumer/array/varied:null-names/q/batch:0"][0]
        self.assertEqual((q["outcome"], q["link"]), ("crash|pass", "../reports/FINDINGS.md#b"))
        self.assertFalse([x for x in got if "/new/" in x["pattern"]])  # adds no case
        self.assertIn("consumer/array/plain/a/*", [x["pattern"] for x in got])


class CommittedCauses(unittest.TestCase):
    def test_every_cause_is_well_formed(self):
        causes = json.loads(read(os.path.join(HERE, "..", "expectations", "causes.json")))
        findings = read(os.path.join(HERE, "..", "reports", "FINDINGS.md"))
        for c in causes:
            self.assertEqual(set(c) - {"case"}, {"library", "match", "reason", "link", "reproduced"})
            efr.re.compile(c["match"])
            efr.re.compile(c.get("case", ""))
            anchor = c["link"].split("#", 1)[1]
            self.assertIn(f'<a id="{anchor}"></a>', findings, anchor)
            self.assertTrue(os.path.exists(os.path.join(HERE, "..", c["reproduced"])), c["reproduced"])


if __name__ == "__main__":
    unittest.main()
