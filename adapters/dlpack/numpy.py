"""NumPy through DLPack (docs/DLPACK.md).

    arrowcert certify --dlpack --producer py:adapters/dlpack/numpy.py --consumer py:adapters/dlpack/numpy.py
"""
import numpy as np

NAME = f"NumPy {np.__version__} (DLPack)"


def dlpack_load(tensor):
    # Producer side: an array of NumPy's own, holding a copy of the
    # harness's tensor; its __dlpack__ is what is certified.
    return np.from_dlpack(tensor).copy()


def dlpack_read(tensor):
    # Consumer side: NumPy's from_dlpack, as its users call it.
    return np.from_dlpack(tensor)
