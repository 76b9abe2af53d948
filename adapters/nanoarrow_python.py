"""nanoarrow's Python package through the Arrow PyCapsule interface
(docs/PYTHON_ADAPTERS.md; the same adapter as that page's example)."""
import nanoarrow as na

NAME = f"nanoarrow {na.__version__} (Python)"


def load(data):
    return na.Array(data)


def read(data):
    return na.Array(data)


def values(arr):
    # nanoarrow's own conversion to Python objects (to_pylist of each
    # column), not its Arrow exporter.
    return [arr.child(i).to_pylist() for i in range(arr.n_children)]
