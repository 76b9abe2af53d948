"""nanoarrow (Python) as a DLPack consumer (docs/DLPACK.md): its
c_device_array accepts any object with __dlpack__ and makes an Arrow
device array of it (DLPack in, ArrowDeviceArray out). nanoarrow exports
no __dlpack__ of its own: what it read is handed back through NumPy's view
of the Arrow array's data buffer (zero-copy, offset and length applied),
so the harness reads what nanoarrow holds.

    arrowcert certify --dlpack --consumer py:adapters/dlpack/nanoarrow.py
"""
import nanoarrow as na
import numpy as np
from nanoarrow import device

NAME = f"nanoarrow {na.__version__} (DLPack consumer)"


class _DLPackOnly:
    """The object as DLPack alone: c_device_array prefers the Arrow
    PyCapsule interface where an object has it (pyarrow's arrays do)."""

    def __init__(self, obj):
        self._obj = obj

    def __dlpack__(self, **kw):
        return self._obj.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._obj.__dlpack_device__()


def dlpack_read(tensor):
    arr = device.c_device_array(_DLPackOnly(tensor))
    view = arr.array.view()
    data = np.asarray(view.buffer(1))[view.offset : view.offset + view.length]
    # The device array owns what nanoarrow imported: kept alive as long
    # as the view of its buffer.
    return _Holder(data, arr)


class _Holder:
    def __init__(self, data, owner):
        self._data = data
        self._owner = owner

    def __dlpack__(self, **kw):
        return self._data.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()


def dlpack_to_arrow(tensor):
    # DLPack in, Arrow out (docs/DLPACK.md, "Across the protocols"): the
    # Arrow device array nanoarrow makes of the tensor, judged by the Arrow
    # rules; what it did with the capsule, by the DLPack consumer rules.
    return device.c_device_array(_DLPackOnly(tensor))
