"""polars 2.1.0 aborts exporting a decimal64 column through the Arrow
PyCapsule stream interface (arrowcert: producer/stream/gen/70~col:0, seed
20261122, one column of the generated scenario gen/70 split off when
polars failed on it). Run with the pinned polars (scripts/real/versions.env):
the process dies with SIGABRT ("panic in a function that cannot unwind")
inside ArrowArrayStream.get_next."""
import sys
import pyarrow as pa
import polars as pl

kind = sys.argv[1] if len(sys.argv) > 1 else "decimal64"
typ = {"decimal64": pa.decimal64(16, 4), "decimal32": pa.decimal32(7, 2)}[kind]
t = pa.table({"d": pa.array([1, None, 3], typ)})


class Stream:
    """Only the PyCapsule stream dunder, as arrowcert's bridge hands data."""

    def __arrow_c_stream__(self, requested_schema=None):
        return t.__arrow_c_stream__(requested_schema)


df = pl.DataFrame(Stream())  # as adapters/polars.py loads the data
print("loaded:", df.schema, flush=True)
back = pa.RecordBatchReader.from_stream(df)  # polars's __arrow_c_stream__
print(back.read_all(), flush=True)
