"""arro3-core (the Rust arrow crate's Python face) through the Arrow
PyCapsule interface (docs/PYTHON_ADAPTERS.md)."""
import arro3.core as a3

NAME = f"arro3-core {a3.__version__} (PyCapsule)"


def load(data):
    # One batch: a RecordBatch (array path); a whole scenario: a Table
    # (schema and stream paths).
    if hasattr(data, "__arrow_c_array__"):
        return a3.RecordBatch.from_arrow(data)
    return a3.Table.from_arrow(data)


def slice(table, offset, length):
    # Table.slice (arrow-rs's slice of each batch it spans): zero-copy.
    return table.slice(offset, length)


def read(data):
    if hasattr(data, "__arrow_c_stream__"):
        return a3.Table.from_arrow(data)
    return a3.RecordBatch.from_arrow(data)


def values(obj):
    # arro3's own conversion to Python objects (to_pylist per column), not
    # its Arrow exporter.
    return [c.to_pylist() for c in obj.columns]
