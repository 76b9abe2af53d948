"""chDB (ClickHouse, in process) through the Arrow PyCapsule interface
(docs/PYTHON_ADAPTERS.md).

    ARROWCERT_REAL_CHDB=1 just real    # installs the pinned chdb too
    arrowcert certify --producer py:adapters/chdb.py

Producer only. What chDB exports is its own: a query result in the "Arrow"
output format has __arrow_c_stream__, ClickHouse's export with no pyarrow in
the path. chDB has no importer of its own for a PyCapsule object: its
Python() table function reads one through pyarrow (with pyarrow blocked the
query fails with "Required module pyarrow failed to import"), so a consumer
verdict would be pyarrow's, and this adapter offers none. Data gets in the
same way (pyarrow's importer, then chDB's reader of pyarrow tables): a value
that changes may have changed on the way in.
"""
import chdb

NAME = f"chdb {chdb.__version__} (PyCapsule)"


def load(data):
    # Python(data) names this function's local `data`.
    return chdb.query("SELECT * FROM Python(data)", "Arrow")
