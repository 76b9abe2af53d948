"""CuPy on a CUDA device through DLPack (docs/DLPACK.md): a cupy.ndarray
in device memory, its __dlpack__ (producer), and cupy.from_dlpack
(consumer). Needs a GPU and CuPy: `just gpu` runs it where both are.

    arrowcert certify --dlpack --device cuda --producer py:adapters/dlpack/cupy.py --consumer py:adapters/dlpack/cupy.py
"""
import cupy as cp
import numpy as np

NAME = f"CuPy {cp.__version__} (CUDA, DLPack)"


def dlpack_load(tensor):
    # Producer side: the harness's tensor (host memory) copied into an
    # array of CuPy's own in device memory; its __dlpack__ is certified.
    a = cp.asarray(np.from_dlpack(tensor))
    cp.cuda.Device().synchronize()
    return a


def dlpack_read(tensor):
    # Consumer side: CuPy's from_dlpack, as its users call it.
    return cp.from_dlpack(tensor)
