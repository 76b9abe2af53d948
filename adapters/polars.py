"""polars through the Arrow PyCapsule interface (docs/PYTHON_ADAPTERS.md).

    arrowcert certify --producer py:adapters/polars.py
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
