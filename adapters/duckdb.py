"""DuckDB through the Arrow PyCapsule interface (docs/PYTHON_ADAPTERS.md).

    arrowcert certify --producer py:adapters/duckdb.py --consumer py:adapters/duckdb.py
    arrowcert certify --producer 'py:adapters/duckdb.py#string-view'   # a variant

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


def _table(data, settings=()):
    # A private connection: no other query invalidates the result. The data
    # is copied into a DuckDB table, so nothing refers to `data` afterwards.
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")  # it would print to stdout
    for s in settings:
        con.execute(s)
    con.from_arrow(data).create("arrowcert_t")
    return con.table("arrowcert_t")


def load(data):
    return _table(data)


def read(data):
    return _table(data)


def values(rel):
    # DuckDB's own conversion of its rows to Python objects (fetchall),
    # not its Arrow exporter; a list of columns.
    rows = rel.fetchall()
    return [[r[i] for r in rows] for i in range(len(rel.columns))]


def _with(*settings):
    def load(data):
        return _table(data, settings)
    return load


# Variants (docs/PYTHON_ADAPTERS.md, "Variants"): DuckDB's non-default
# Arrow export settings, each certified as a producer of its own (they
# change what DuckDB exports, not what it imports: no consumer side).
VARIANTS = {
    # Strings as Utf8View (needs the 1.4 output format).
    "string-view": {"load": _with("SET arrow_output_version = '1.4'",
                                  "SET produce_arrow_string_view = true"), "read": None},
    # Lists as ListView (likewise).
    "list-view": {"load": _with("SET arrow_output_version = '1.4'",
                                "SET arrow_output_list_view = true"), "read": None},
    # 64-bit offsets: LargeUtf8, LargeBinary.
    "large-buffers": {"load": _with("SET arrow_large_buffer_size = true"), "read": None},
    # Types Arrow has no exact match for kept as extension types.
    "lossless": {"load": _with("SET arrow_lossless_conversion = true"), "read": None},
}
