"""Run the bundled arrowcert binary from Python and read its report.

Everything here uses the standard library only (the pytest plugin imports
it into every test session of the environment).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence, Union

from ._adapter import write_adapter

#: Set to a path: run that arrowcert binary instead of the bundled one
#: (a source checkout's ``target/debug/arrowcert``).
BINARY_ENV = "ARROWCERT_BINARY"

#: The command's exit codes (``arrowcert --help``).
OUTCOMES = {
    0: "pass",
    1: "fail",
    2: "bad input",
    3: "not certified",
    4: "harness error",
}

Side = Union[str, "os.PathLike[str]", Callable[..., Any], None]


class CertificationFailed(AssertionError):
    """A run that did not pass; its message names the broken rules, the
    first evidence and the replay command (:meth:`Result.explain`)."""

    def __init__(self, result: "Result"):
        super().__init__(result.explain())
        self.result = result


def binary() -> str:
    """The arrowcert binary: ``$ARROWCERT_BINARY``, else the one this
    package carries (``arrowcert/_bin/arrowcert``, the reference plugins
    beside it)."""
    given = os.environ.get(BINARY_ENV)
    exe = Path(given) if given else Path(__file__).resolve().parent / "_bin" / "arrowcert"
    if not exe.is_file():
        where = f"${BINARY_ENV}={given}" if given else str(exe)
        raise FileNotFoundError(
            f"arrowcert: no arrowcert binary at {where} (install the arrowcert wheel, "
            f"or set {BINARY_ENV} to a built one)"
        )
    return str(exe)


def environment() -> dict:
    """This process's environment, with ``py:`` adapters running in this
    interpreter unless ``ARROWCERT_PYTHON`` names another (``--python``
    still wins over both)."""
    env = dict(os.environ)
    if not env.get("ARROWCERT_PYTHON"):
        env["ARROWCERT_PYTHON"] = sys.executable
    return env


def adapter(
    load: Optional[Callable] = None,
    read: Optional[Callable] = None,
    *,
    values: Optional[Callable] = None,
    slice: Optional[Callable] = None,
    name: Optional[str] = None,
    dlpack: bool = False,
    path: Union[str, "os.PathLike[str]", None] = None,
) -> str:
    """An adapter file made of importable callables (``load``, ``read``,
    ...; docs/PYTHON_ADAPTERS.md), as a ``py:`` plugin argument. Each must
    be importable by ``module:qualname`` from the interpreter the adapter
    runs in: a function at the top level of a module (a test module too),
    not a lambda, a nested function or one defined in ``__main__``.
    ``dlpack``: the functions are DLPack's ``dlpack_load`` / ``dlpack_read``."""
    if path is None:
        path = Path(tempfile.mkdtemp(prefix="arrowcert-adapter-")) / "arrowcert_adapter.py"
    functions = {"load": load, "read": read, "values": values, "slice": slice}
    if dlpack:
        if values is not None or slice is not None:
            raise ValueError("arrowcert: a DLPack adapter has only load and read")
        functions = {"dlpack_load": load, "dlpack_read": read}
    return "py:" + str(write_adapter(Path(path), functions, name))


def _side(arg: Side, role: str, out: Path, stem: str, dlpack: bool) -> Optional[str]:
    """One side as arrowcert's argument: a callable becomes an adapter file
    (``load`` for the producer, ``read`` for the consumer); a ``.py`` path
    becomes ``py:PATH``; anything else (``py:...``, a bundled name such as
    ``reference``, a plugin ``.so``) is passed on as it is."""
    if arg is None:
        return None
    if callable(arg):
        fn = {"producer": "load", "consumer": "read"}[role]
        return adapter(
            **{fn: arg},
            dlpack=dlpack,
            path=out / f"{stem}_{role}_adapter.py",
        )
    text = os.fspath(arg)
    if text.endswith(".py") and not text.startswith("py:"):
        return "py:" + str(Path(text).resolve())
    return text


class Result:
    """One arrowcert run: its exit code, outcome and report."""

    def __init__(self, command: list, code: int, output: str, report: Path, junit: Path):
        self.command = command
        self.exit_code = code
        self.outcome = OUTCOMES.get(code, f"exit {code}")
        self.output = output
        self.report_path = report if report.is_file() else None
        self.junit_path = junit if junit.is_file() else None
        self.report: dict = {}
        if self.report_path:
            try:
                self.report = json.loads(self.report_path.read_text())
            except (OSError, ValueError):
                self.report = {}

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def broken_rules(self) -> list:
        """The rules that failed: dicts with ``rule``, ``level``,
        ``evidence``, ``first_case`` and ``replay``, MUST ones first."""
        cases = {c.get("id"): c for c in self.report.get("cases", [])}
        order = {"MUST": 0, "SHOULD": 1, "MAY": 2, "INFO": 3}
        broken = []
        for r in self.report.get("rules", []):
            if r.get("verdict") != "fail":
                continue
            first = (r.get("failing_cases") or [None])[0]
            broken.append(
                {
                    "rule": r.get("rule"),
                    "level": r.get("level"),
                    "evidence": r.get("evidence", ""),
                    "first_case": first,
                    "replay": cases.get(first, {}).get("replay"),
                }
            )
        broken.sort(key=lambda b: order.get(b["level"], 9))
        return broken

    def unsound_cases(self) -> list:
        """Cases that crashed, hung or errored (no rule names those)."""
        return [
            c
            for c in self.report.get("cases", [])
            if c.get("verdict") in ("crash", "timeout", "error", "harness_error")
        ]

    def explain(self) -> str:
        """What a failing test prints: the outcome and its reasons, each
        broken rule with its first evidence, case and replay command, and
        where the report and JUnit are."""
        lines = [f"arrowcert: {self.outcome} (exit {self.exit_code})"]
        for reason in self.report.get("outcome", {}).get("reasons", []):
            lines.append(f"  {reason}")
        for b in self.broken_rules():
            lines.append(f"  {b['level']} {b['rule']}: {b['evidence']}")
            if b["first_case"]:
                lines.append(f"    first case: {b['first_case']}")
            if b["replay"]:
                lines.append(f"    replay: {b['replay']}")
        for c in self.unsound_cases()[:3]:
            lines.append(f"  {c.get('verdict')} {c.get('id')}: {c.get('message', '')}")
            if c.get("replay"):
                lines.append(f"    replay: {c['replay']}")
        if not self.report:
            # No report (bad input, a harness error): arrowcert's own words.
            tail = [l for l in self.output.splitlines() if l.strip()][-5:]
            lines.extend(f"  {l}" for l in tail)
        if self.report_path:
            lines.append(f"  report: {self.report_path}")
        if self.junit_path:
            lines.append(f"  junit: {self.junit_path}")
        lines.append("  command: " + " ".join(_quote(a) for a in self.command))
        return "\n".join(lines)

    def check(self) -> "Result":
        """This result, or :class:`CertificationFailed` if it did not pass."""
        if not self.ok:
            raise CertificationFailed(self)
        return self

    def __repr__(self) -> str:
        return f"<arrowcert.Result {self.outcome} report={self.report_path}>"


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(str(arg))


def certify(
    producer: Side = None,
    consumer: Side = None,
    *,
    dlpack: bool = False,
    cases: Optional[int] = None,
    seed: Optional[int] = None,
    expectations: Union[str, "os.PathLike[str]", None] = None,
    filters: Iterable[str] = (),
    out_dir: Union[str, "os.PathLike[str]", None] = None,
    name: str = "arrowcert",
    python: Union[str, "os.PathLike[str]", None] = None,
    args: Sequence[str] = (),
    timeout: Optional[float] = None,
) -> Result:
    """Runs ``arrowcert certify`` (``--dlpack`` with ``dlpack``) on a
    producer and/or a consumer and returns its :class:`Result` (call
    ``.check()`` to raise on anything but a pass).

    ``producer`` / ``consumer``: a callable (``load(data)`` returning an
    object with ``__arrow_c_stream__``..., ``read(obj)``; DLPack's
    ``dlpack_load`` / ``dlpack_read`` with ``dlpack``), importable by name
    (see :func:`adapter`); an adapter file (``.py``); or any plugin
    argument arrowcert takes (``py:pyarrow``, ``reference``, a ``.so``).
    ``filters``: case-ID substrings to run (``producer/stream/``).
    ``args``: more ``certify`` options, as they are. The report
    (``NAME.json``) and JUnit (``NAME.junit.xml``) go to ``out_dir`` (a
    fresh temporary folder when not given)."""
    if producer is None and consumer is None:
        raise ValueError("arrowcert.certify: give a producer, a consumer or both")
    out = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="arrowcert-"))
    out.mkdir(parents=True, exist_ok=True)
    out = out.resolve()
    report, junit = out / f"{name}.json", out / f"{name}.junit.xml"
    command = [binary()]
    if python is not None:
        command += ["--python", os.fspath(python)]
    command.append("certify")
    if callable(producer) and callable(consumer):
        # One adapter holding both functions: one library on both sides
        # (what --dlpack requires, and what pairs of py: files are).
        both = adapter(producer, consumer, dlpack=dlpack, path=out / f"{name}_adapter.py")
        command += ["--producer", both, "--consumer", both]
    else:
        for role, arg in (("producer", producer), ("consumer", consumer)):
            plugin = _side(arg, role, out, name, dlpack)
            if plugin is not None:
                command += [f"--{role}", plugin]
    if dlpack:
        command.append("--dlpack")
    if cases is not None:
        command += ["--cases", str(cases)]
    if seed is not None:
        command += ["--seed", str(seed)]
    if expectations is not None:
        command += ["--expectations", str(Path(expectations).resolve())]
    command += ["--report", str(report), "--junit", str(junit), *args]
    filters = list(filters)
    if filters:
        command += ["--", *filters]
    # Stale files from an earlier run in the same folder must not be read
    # as this run's.
    for f in (report, junit):
        if f.exists():
            f.unlink()
    # In the caller's working directory: relative paths in the arguments
    # mean what they mean to the caller (every output has its own path).
    done = subprocess.run(
        command,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        timeout=timeout,
    )
    (out / f"{name}.log").write_text(done.stdout)
    return Result(command, done.returncode, done.stdout, report, junit)
