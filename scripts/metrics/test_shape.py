#!/usr/bin/env python3
"""Tests of scripts/metrics/shape.py:

    python3 scripts/metrics/test_shape.py

On a small tree written here: code lines leave out comments, blank lines,
`#[cfg(test)]` items and the files `#[cfg(test)] mod NAME;` names; a
function's length runs from its `fn` line to its closing brace; rule-ID
literals are counted outside rules/ only, never in comments or tests; a
tree that is not there is one line and a non-zero exit.
"""
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("shape", os.path.join(HERE, "shape.py"))
shape = importlib.util.module_from_spec(spec)
spec.loader.exec_module(shape)

RULES = '''pub static RULES: &[Rule] = &[
    Rule { id: "array.length.valid", level: Must },
    Rule { id: "schema.format.valid", level: Must },
];
'''

CLI = '''//! The command line.

// A comment naming "array.length.valid" is no literal.
pub fn run() -> i32 {
    let s = "array.length.valid";
    /* a block
       comment */
    let t = r#"schema.format.valid"#;

    if s.len() > 1 { 1 } else { 0 }
}

#[cfg(test)]
mod tests {
    #[test]
    fn t() { assert_eq!("array.length.valid", "array.length.valid"); }
}
'''

ENGINE = '''pub fn a() {
    let c = '{';
    let l: &'static str = "}";
}
#[cfg(test)]
mod tests;
'''

ENGINE_TESTS = '''fn long_test() {
    let x = "schema.format.valid";
}
'''


def tree(root):
    files = {
        "harness/src/rules/mod.rs": RULES,
        "harness/src/cli/mod.rs": CLI,
        "harness/src/engine/mod.rs": ENGINE,
        "harness/src/engine/tests.rs": ENGINE_TESTS,
        "harness/src/big.rs": "".join(f"fn f{i}() {{}}\n" for i in range(1001)),
    }
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)


class Shape(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        tree(cls.dir.name)
        cls.m = shape.measure(cls.dir.name)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_code_lines_leave_out_comments_blanks_and_tests(self):
        # cli/mod.rs: fn run .. its closing brace, less the comment lines
        # and the blank one: 5 lines.
        self.assertEqual(self.m["cli_lines"], 5)
        # engine/mod.rs: fn a (4 lines); its tests.rs is left out.
        self.assertEqual(self.m["engine_lines"], 4)

    def test_function_lengths_run_to_the_closing_brace(self):
        longest = self.m["longest_functions"][:2]
        self.assertEqual([(f["name"], f["lines"], f["at"]) for f in longest],
                         [("run", 5, "cli/mod.rs:4"), ("a", 4, "engine/mod.rs:1")])
        self.assertNotIn("t", [f["name"] for f in self.m["longest_functions"]])
        self.assertNotIn("long_test", [f["name"] for f in self.m["longest_functions"]])

    def test_long_files(self):
        self.assertEqual(self.m["long_files"], [{"file": "big.rs", "lines": 1001}])

    def test_rule_id_literals_outside_the_catalogue(self):
        self.assertEqual(self.m["rule_ids"], 2)
        self.assertEqual(self.m["rule_id_literals"], [
            {"at": "cli/mod.rs:5", "id": "array.length.valid"},
            {"at": "cli/mod.rs:8", "id": "schema.format.valid"},
        ])

    def test_no_history_is_said_not_guessed(self):
        self.assertIsNone(self.m["rule_commits"])

    def test_a_missing_tree_is_one_line_and_a_failure(self):
        with tempfile.TemporaryDirectory() as empty:
            out = subprocess.run([sys.executable, os.path.join(HERE, "shape.py"), "--root", empty],
                                 capture_output=True, text=True)
        self.assertNotEqual(out.returncode, 0)
        self.assertEqual(out.stdout, "")
        self.assertEqual(len(out.stderr.strip().splitlines()), 1, out.stderr)
        self.assertIn("no such directory", out.stderr)


if __name__ == "__main__":
    unittest.main()
