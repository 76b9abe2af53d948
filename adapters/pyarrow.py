"""pyarrow through the Arrow PyCapsule interface (docs/PYTHON_ADAPTERS.md).

    arrowcert certify --producer py:adapters/pyarrow.py
    arrowcert certify --producer 'py:adapters/pyarrow.py#array'    # a variant

Variants (docs/PYTHON_ADAPTERS.md, "Variants"): `array`, pyarrow's Array
and ChunkedArray (a struct column holding the scenario's columns) instead
of RecordBatch and Table, through their own exporters and importers;
`reader`, a RecordBatchReader over the data (producer) and the reader
pyarrow's importer makes of the harness's stream, read lazily when the
harness reads it back (consumer).
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


def values(obj):
    # pyarrow's own conversion to Python objects (to_pylist), not its
    # Arrow exporter; a list of columns (duplicate names are kept).
    if isinstance(obj, (pa.Array, pa.ChunkedArray)):
        return _struct_columns(obj)
    return [c.to_pylist() for c in obj.columns]


def _struct_columns(arr):
    """The columns of a struct Array or ChunkedArray, through to_pylist."""
    chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
    cols = [[] for _ in range(arr.type.num_fields)]
    for ch in chunks:
        for i in range(arr.type.num_fields):
            cols[i].extend(ch.field(i).to_pylist())
    return cols


def _load_array(data):
    # The scenario as one struct column: an Array for one batch, a
    # ChunkedArray for a stream (pa.array / pa.chunked_array import them).
    if hasattr(data, "__arrow_c_array__"):
        return pa.array(data)
    return pa.chunked_array(pa.RecordBatchReader.from_stream(data).read_all().to_struct_array())


def _read_array(data):
    if hasattr(data, "__arrow_c_stream__"):
        return pa.chunked_array(data)
    return pa.array(data)


class _Reader:
    """A RecordBatchReader over what load() copied: each export is a fresh
    reader's (a reader can be read once)."""

    def __init__(self, table):
        self._table = table

    def __arrow_c_schema__(self):
        return self._table.schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema=None):
        return pa.RecordBatchReader.from_batches(
            self._table.schema, self._table.to_batches()).__arrow_c_stream__(requested_schema)


def _load_reader(data):
    return _Reader(pa.RecordBatchReader.from_stream(data).read_all())


def _read_reader(data):
    # pyarrow's importer of a stream, read only when the harness reads
    # what it returned back.
    return pa.RecordBatchReader.from_stream(data)


VARIANTS = {
    "array": {"load": _load_array, "read": _read_array},
    # A reader is read once, by the harness's read-back: no values view.
    "reader": {"load": _load_reader, "read": _read_reader, "values": None},
}
