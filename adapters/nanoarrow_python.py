"""nanoarrow's Python package through the Arrow PyCapsule interface
(docs/PYTHON_ADAPTERS.md; the same adapter as that page's example)."""
import nanoarrow as na

NAME = f"nanoarrow {na.__version__} (Python)"


def load(data):
    return na.Array(data)


def read(data):
    return na.Array(data)


def values(arr):
    # nanoarrow's own conversion to Python objects (to_pylist: one dict a
    # row), not its Arrow exporter; a dict of columns (the harness leaves
    # data with duplicate column names uncompared). Not child(i): that is
    # the physical child, without the parent's offset and length.
    names = [arr.schema.field(i).name for i in range(arr.schema.n_fields)]
    rows = arr.to_pylist()
    return {n: [r[n] for r in rows] for n in names}
