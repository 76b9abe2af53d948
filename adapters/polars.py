"""polars through the Arrow PyCapsule interface (docs/PYTHON_ADAPTERS.md).

    arrowcert certify --producer py:adapters/polars.py
    arrowcert certify --producer 'py:adapters/polars.py#series'   # a variant

Variant `series` (docs/PYTHON_ADAPTERS.md, "Variants"): a polars Series of
structs holding the scenario's columns, imported with pl.Series and
exported through the Series' own __arrow_c_stream__, instead of a
DataFrame.
"""
import polars as pl

NAME = f"polars {pl.__version__} (PyCapsule)"


def load(data):
    # rechunk=False: the batches stay as the harness sent them.
    return pl.DataFrame(data)


def slice(frame, offset, length):
    # DataFrame.slice: zero-copy, across the frame's chunks.
    return frame.slice(offset, length)


def read(data):
    return pl.DataFrame(data)


def values(obj):
    # polars' own conversion to Python objects, not its Arrow exporter.
    if isinstance(obj, pl.Series):
        names = [f.name for f in obj.dtype.fields]
        rows = obj.to_list()
        return [[None if r is None else r[n] for r in rows] for n in names]
    return [obj.to_series(i).to_list() for i in range(obj.width)]


def _series(data):
    return pl.Series(data)


VARIANTS = {"series": {"load": _series, "read": _series}}
