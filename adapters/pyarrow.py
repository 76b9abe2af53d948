"""pyarrow through the Arrow PyCapsule interface (docs/PYTHON_ADAPTERS.md).

    arrowcert certify --producer py:adapters/pyarrow.py
"""
import pyarrow as pa

NAME = f"pyarrow {pa.__version__} (PyCapsule)"


def load(data):
    # One batch: a RecordBatch (array and device-array paths); a whole
    # scenario: a Table (schema and stream paths).
    if hasattr(data, "__arrow_c_array__"):
        return pa.record_batch(data)
    # What pa.table(data) does for a PyCapsule stream (the same import,
    # then read_all), without pa.table's check whether `data` is a pandas
    # DataFrame first: that check imports pandas, a quarter of a second in
    # every worker that starts (one per crash).
    return pa.RecordBatchReader.from_stream(data).read_all()


def slice(table, offset, length):
    # Table.slice: zero-copy, across the table's chunks.
    return table.slice(offset, length)


def read(data):
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data).read_all()
    return pa.record_batch(data)
