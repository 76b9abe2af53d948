"""DuckDB through the Arrow PyCapsule interface (docs/PYTHON_ADAPTERS.md).

    arrowcert certify --producer py:adapters/duckdb.py --consumer py:adapters/duckdb.py

DuckDB's Python package reads a PyCapsule stream through pyarrow (a
pyarrow.dataset scanner) whenever pyarrow.dataset is importable, and through
its own importer otherwise: with that route open, a "duckdb" verdict would
be pyarrow's (Arrow C++'s) code. This adapter closes it, so what DuckDB
reads is read by its own C data interface importer and what it exports is
its own export of a table in its own storage.
"""
import sys

sys.modules["pyarrow.dataset"] = None  # see above

import duckdb  # noqa: E402

NAME = f"duckdb {duckdb.__version__} (PyCapsule)"


def _table(data):
    # A private connection: no other query invalidates the result. The data
    # is copied into a DuckDB table, so nothing refers to `data` afterwards.
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")  # it would print to stdout
    con.from_arrow(data).create("arrowcert_t")
    return con.table("arrowcert_t")


def load(data):
    return _table(data)


def read(data):
    return _table(data)
