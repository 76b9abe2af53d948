"""pyarrow 26.0.1 aborts the process converting to pandas a list_view (or
large_list_view) column that has no chunks (a stream with a schema and no
batches): Arrow C++ "Check failed: (chunks_.size()) > (0) cannot construct
ChunkedArray from empty vector and omitted type" (chunked_array.cc:54),
SIGABRT. pandas' DataFrame.from_arrow goes through it, so pandas aborts as
a producer loading such a stream. pyarrow alone:

    pip install pyarrow==26.0.1 pandas==3.1.1
    python reports/repro/pyarrow_list_view_no_chunks_to_pandas.py

Prints the column type and then dies in Table.to_pandas (exit 134). The
same with pa.list_(pa.int32()) (a list, not a list view) converts to an
empty frame, and so does a list_view column with one empty chunk.
"""
import sys

import pyarrow as pa

kind = sys.argv[1] if len(sys.argv) > 1 else "large_list_view"
value_type = {
    "list_view": pa.list_view(pa.int32()),
    "large_list_view": pa.large_list_view(pa.uint16()),
    "list": pa.list_(pa.int32()),
}[kind]
table = pa.table({"c": pa.chunked_array([], type=value_type)})
print(f"pyarrow {pa.__version__}: {value_type}, {table.column(0).num_chunks} chunk(s)", flush=True)
frame = table.to_pandas()
print(f"converted: {len(frame)} rows")
