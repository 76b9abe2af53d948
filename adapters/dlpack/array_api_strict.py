"""array-api-strict (the Array API's strict reference implementation, on
NumPy) through DLPack (docs/DLPACK.md).

    arrowcert certify --dlpack --producer py:adapters/dlpack/array_api_strict.py --consumer py:adapters/dlpack/array_api_strict.py
"""
import array_api_strict as xp
import numpy as np

NAME = f"array-api-strict {xp.__version__} (DLPack)"


def dlpack_load(tensor):
    return xp.asarray(np.from_dlpack(tensor).copy())


def dlpack_read(tensor):
    return xp.from_dlpack(tensor)
