"""Unit tests of the arrowcert Python package that need neither the wheel
nor pytest (standard unittest; harness/tests/wheel.rs runs them with
PYTHONPATH=python): adapter files from callables, the failure message,
the launcher's interpreter and its one-line error, the wheel's glibc tag."""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "scripts" / "wheel"))

import arrowcert  # noqa: E402
from arrowcert import _adapter, _api  # noqa: E402


def top_level(data):
    return data


class Holder:
    @staticmethod
    def method(data):
        return data


def make_nested():
    def nested(data):
        return data

    return nested


class AdapterFiles(unittest.TestCase):
    def test_a_top_level_function_is_imported_back_by_name(self):
        module, qualname, folder = _adapter.spec_of(top_level)
        self.assertEqual((module, qualname), (__name__, "top_level"))
        self.assertEqual(folder, str(HERE))
        self.assertEqual(_adapter.spec_of(Holder.method)[1], "Holder.method")

    def test_lambdas_nested_and_main_functions_are_refused_with_the_reason(self):
        with self.assertRaisesRegex(ValueError, "top level of a module"):
            _adapter.spec_of(lambda d: d)
        with self.assertRaisesRegex(ValueError, "top level of a module"):
            _adapter.spec_of(make_nested())
        fn = top_level
        saved = fn.__module__
        try:
            fn.__module__ = "__main__"
            with self.assertRaisesRegex(ValueError, "__main__"):
                _adapter.spec_of(fn)
        finally:
            fn.__module__ = saved

    def test_the_written_adapter_runs_in_a_fresh_interpreter(self):
        with tempfile.TemporaryDirectory() as tmp:
            spec = arrowcert.adapter(load=top_level, read=Holder.method, path=Path(tmp) / "a.py")
            self.assertTrue(spec.startswith("py:"))
            path = spec[3:]
            # Another interpreter, elsewhere, with nothing of ours on its path.
            code = (
                "import runpy; ns = runpy.run_path(%r); "
                "print(ns['load'].__qualname__, ns['read'].__qualname__, ns['NAME'])" % path
            )
            out = subprocess.run(
                [sys.executable, "-I", "-c", code], cwd=tmp, capture_output=True, text=True
            )
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("top_level Holder.method", out.stdout)

    def test_dlpack_adapters_name_their_functions_as_dlpack_does(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = arrowcert.adapter(load=top_level, dlpack=True, path=Path(tmp) / "d.py")[3:]
            text = Path(path).read_text()
            self.assertIn("dlpack_load = _function(", text)
            self.assertNotIn("\nload = ", text)


class Results(unittest.TestCase):
    def report(self, tmp, body):
        path = Path(tmp) / "r.json"
        path.write_text(json.dumps(body))
        return _api.Result(["arrowcert", "certify"], 1, "", path, Path(tmp) / "none.xml")

    def test_a_failure_names_the_rule_its_evidence_first_case_and_replay(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = self.report(
                tmp,
                {
                    "outcome": {"outcome": "fail", "reasons": ["MUST rule(s) broken: array.values.roundtrip"]},
                    "rules": [
                        {"rule": "schema.name.utf8", "level": "INFO", "verdict": "fail", "failing_cases": ["b"], "evidence": "e2"},
                        {"rule": "array.values.roundtrip", "level": "MUST", "verdict": "fail", "failing_cases": ["a"], "evidence": "37 rows, expected 38"},
                        {"rule": "array.null-count", "level": "MUST", "verdict": "pass"},
                    ],
                    "cases": [{"id": "a", "verdict": "fail", "replay": "arrowcert replay 'a'"}],
                },
            )
            self.assertFalse(r.ok)
            self.assertEqual(r.outcome, "fail")
            self.assertEqual([b["rule"] for b in r.broken_rules()], ["array.values.roundtrip", "schema.name.utf8"])
            text = r.explain()
            for needle in (
                "arrowcert: fail (exit 1)",
                "MUST array.values.roundtrip: 37 rows, expected 38",
                "first case: a",
                "replay: arrowcert replay 'a'",
                "report: ",
            ):
                self.assertIn(needle, text)
            with self.assertRaises(arrowcert.CertificationFailed):
                r.check()

    def test_no_report_gives_arrowcerts_own_words(self):
        r = _api.Result(["arrowcert"], 2, "arrowcert: x.so: no such file\n", Path("/nonexistent.json"), Path("/n.xml"))
        self.assertEqual(r.outcome, "bad input")
        self.assertIn("x.so: no such file", r.explain())


class Launcher(unittest.TestCase):
    def test_py_adapters_default_to_this_interpreter_unless_set(self):
        saved = os.environ.pop("ARROWCERT_PYTHON", None)
        try:
            self.assertEqual(_api.environment()["ARROWCERT_PYTHON"], sys.executable)
            os.environ["ARROWCERT_PYTHON"] = "/other/python"
            self.assertEqual(_api.environment()["ARROWCERT_PYTHON"], "/other/python")
        finally:
            os.environ.pop("ARROWCERT_PYTHON", None)
            if saved is not None:
                os.environ["ARROWCERT_PYTHON"] = saved

    def test_a_missing_binary_is_one_line_and_exit_2(self):
        env = dict(os.environ, ARROWCERT_BINARY="/nonexistent/arrowcert", PYTHONPATH=str(HERE.parent))
        out = subprocess.run(
            [sys.executable, "-B", "-m", "arrowcert", "--version"], env=env, capture_output=True, text=True
        )
        self.assertEqual(out.returncode, 2)
        self.assertEqual(len(out.stderr.strip().splitlines()), 1, out.stderr)
        self.assertIn("no arrowcert binary at $ARROWCERT_BINARY=/nonexistent/arrowcert", out.stderr)

    def test_certify_needs_a_side(self):
        with self.assertRaisesRegex(ValueError, "a producer, a consumer or both"):
            arrowcert.certify()


class WheelTag(unittest.TestCase):
    def test_the_newest_glibc_version_referenced_is_the_tag(self):
        import make_wheel

        with tempfile.TemporaryDirectory() as tmp:
            a, b = Path(tmp) / "a", Path(tmp) / "b"
            a.write_bytes(b"\x7fELF..GLIBC_2.17\x00GLIBC_2.34\x00GLIBC_PRIVATE\x00")
            b.write_bytes(b"GLIBC_2.28\x00GLIBC_2.3.4\x00")
            self.assertEqual(make_wheel.glibc_needed([a, b]), (2, 34))
            self.assertEqual(make_wheel.glibc_needed([]), (2, 17))

    def make_wheel(self, bin_dir, out):
        script = HERE.parents[1] / "scripts" / "wheel" / "make_wheel.py"
        return subprocess.run(
            [sys.executable, "-B", str(script), "--bin-dir", str(bin_dir), "--out", str(out)],
            capture_output=True,
            text=True,
        )

    def test_a_missing_or_bridgeless_binary_is_one_line_and_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = self.make_wheel(Path(tmp) / "none", Path(tmp) / "out")
            self.assertEqual(out.returncode, 2)
            self.assertEqual(len(out.stderr.strip().splitlines()), 1, out.stderr)
            self.assertIn("arrowcert is missing", out.stderr)
            (Path(tmp) / "arrowcert").write_bytes(b"\x7fELF not the real thing")
            out = self.make_wheel(tmp, Path(tmp) / "out")
            self.assertEqual(out.returncode, 2)
            self.assertIn("carries no Python bridge", out.stderr)
            self.assertFalse((Path(tmp) / "out").exists())


if __name__ == "__main__":
    unittest.main()
