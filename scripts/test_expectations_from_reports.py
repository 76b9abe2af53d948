#!/usr/bin/env python3
"""Tests of scripts/expectations-from-reports.py's traced causes:

    python3 scripts/test_expectations_from_reports.py

A drafted entry whose failing cases all match a cause gets its reason and
link; one whose cases match two causes, or none, keeps the drafted reason;
--retrace rewrites only untraced entries and keeps patterns and outcomes.
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
        self.assertEqual(got["consumer/array/plain/*"]["reason"].split(" (")[0],
                         "cases here ended error, pass")  # lv, mixed and ok share the bucket: two causes
        nn = got["consumer/array/varied:null-names/p/*"]
        self.assertEqual(nn["reason"], "crashes on a NULL name (reproduced: reports/repro/b.py)")
        self.assertEqual(nn["link"], "../reports/FINDINGS.md#b")
        # The case regex keeps the same signal on another variation untraced.
        off = got["consumer/array/varied:offset/p/*"]
        self.assertEqual(off["reason"], "cases here ended crash")
        self.assertEqual(off["link"], "../reports/FINDINGS.md#lib")

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
