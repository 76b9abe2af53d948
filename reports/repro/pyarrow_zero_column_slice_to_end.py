"""pyarrow 26.0.1: Table.slice(offset) (no length) of a table with rows but
no columns keeps every row.

A table's rows need not come from its columns (a record batch of no
columns has a length of its own); `Table.slice(13)` of a 26-row table must
hold 13 rows, as `Table.slice(13, 13)` does. Exits 1 when the bug shows."""
import sys
import pyarrow as pa

def batch(n):
    return pa.RecordBatch.from_struct_array(pa.StructArray.from_buffers(pa.struct([]), n, [None]))

t = pa.Table.from_batches([batch(26)])
with_length = t.slice(13, 13).num_rows
to_end = t.slice(13).num_rows
cols = pa.table({"x": list(range(26))}).slice(13).num_rows
print(f"pyarrow {pa.__version__}: 26 rows, 0 columns: slice(13, 13) -> {with_length} rows, "
      f"slice(13) -> {to_end} rows (with a column: slice(13) -> {cols})")
sys.exit(1 if to_end != 13 else 0)
