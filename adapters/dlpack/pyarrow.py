"""pyarrow through DLPack (docs/DLPACK.md): a pyarrow Array's __dlpack__
(producer; one-dimensional arrays without nulls, numeric types) and
pa.Tensor.from_dlpack (consumer).

    arrowcert certify --dlpack --producer py:adapters/dlpack/pyarrow.py --consumer py:adapters/dlpack/pyarrow.py
"""
import numpy as np
import pyarrow as pa

NAME = f"pyarrow {pa.__version__} (DLPack)"


def dlpack_load(tensor):
    values = np.from_dlpack(tensor).copy()
    if values.ndim != 1:
        raise ValueError("pyarrow Arrays are one-dimensional")
    return pa.array(values)


def dlpack_read(tensor):
    # pyarrow's DLPack consumer: Tensor.from_dlpack (pyarrow 26).
    return pa.Tensor.from_dlpack(tensor)


def arrow_to_dlpack(array):
    # Arrow in, DLPack out (docs/DLPACK.md, "Across the protocols"): the
    # harness's Arrow array imported (zero-copy, through the Arrow PyCapsule
    # interface); its __dlpack__ is certified, and its release of the
    # harness's array judged by the Arrow consumer rules.
    return pa.array(array)
