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
import itertools
import sys
import weakref

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


# Reads go into one database per process, each into a table of its own
# through a connection of its own (a cursor): a fresh database costs about
# 10 ms, most of a DuckDB consumer case. A read's table is dropped once
# its relation is gone (at the next read, not from inside the collector).
# Producers keep a fresh database per object: what a shared database
# keeps per query (about 240 bytes per from_arrow) would be counted
# against their exports by the release.frees rules.
_reads = None
_gone = []
_count = itertools.count()


def read(data):
    global _reads
    try:
        while _gone:
            _reads.execute(f'DROP TABLE IF EXISTS "{_gone.pop()}"')
        _reads.execute("SELECT 1")
    except Exception:
        # None yet, or invalidated: a FATAL error (one read's, or one of
        # its export after it) leaves every later query failing. Nothing
        # read before is read from it again.
        _gone.clear()
        _reads = duckdb.connect()
    name = f"arrowcert_read_{next(_count)}"
    con = _reads.cursor()
    con.execute("SET enable_progress_bar = false")  # it would print to stdout
    con.from_arrow(data).create(name)
    rel = con.table(name)
    weakref.finalize(rel, _gone.append, name)
    return rel


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
