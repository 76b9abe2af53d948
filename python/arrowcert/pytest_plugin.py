"""arrowcert's pytest plugin (the ``pytest11`` entry point ``arrowcert``).

The ``arrowcert`` fixture certifies a producer and/or a consumer (Python
callables, an adapter file, or any plugin arrowcert takes) and fails the
test, with the broken rules, their first evidence and the replay
commands, unless the run passes::

    def load(data):
        return pyarrow.table(data)

    def test_producer(arrowcert):
        arrowcert.certify(producer=load, cases=20, seed=1)

Each run's JSON report and JUnit go to the test's ``tmp_path`` (under
pytest's ``--basetemp``), or to ``--arrowcert-dir``/<test>/ when given;
their paths are also recorded as the test's properties (``--junitxml``
carries them).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ._api import Result, certify


def pytest_addoption(parser):
    group = parser.getgroup("arrowcert", "Arrow C interface certification")
    group.addoption(
        "--arrowcert-dir",
        default=None,
        help="write arrowcert's reports and JUnit here, one folder per test "
        "(default: each test's tmp_path)",
    )


class Certifier:
    """What the ``arrowcert`` fixture gives a test."""

    def __init__(self, out_dir: Path, node):
        self.out_dir = out_dir
        self._node = node
        self._runs = 0

    def run(self, producer=None, consumer=None, **options) -> Result:
        """Runs arrowcert (:func:`arrowcert.certify`'s arguments) and returns
        its result, passing or not."""
        self._runs += 1
        name = options.pop("name", None) or f"arrowcert-{self._runs}"
        options.setdefault("out_dir", self.out_dir)
        result = certify(producer, consumer, name=name, **options)
        for key, path in (("arrowcert_report", result.report_path), ("arrowcert_junit", result.junit_path)):
            if path is not None:
                self._node.user_properties.append((key, str(path)))
        return result

    def certify(self, producer=None, consumer=None, **options) -> Result:
        """Like :meth:`run`, and fails the test unless the run passed."""
        result = self.run(producer, consumer, **options)
        if not result.ok:
            pytest.fail(result.explain(), pytrace=False)
        return result

    def dlpack(self, producer=None, consumer=None, **options) -> Result:
        """:meth:`certify` of DLPack exchange (``dlpack_load`` /
        ``dlpack_read`` callables or a DLPack adapter)."""
        return self.certify(producer, consumer, dlpack=True, **options)


@pytest.fixture
def arrowcert(request, tmp_path) -> Certifier:
    """Certifies Arrow producers and consumers (see ``Certifier``)."""
    base = request.config.getoption("--arrowcert-dir")
    if base:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid).strip("_")
        out = Path(base).resolve() / safe
    else:
        out = tmp_path / "arrowcert"
    out.mkdir(parents=True, exist_ok=True)
    return Certifier(out, request.node)
