"""Numba's device arrays (numba.cuda) through __cuda_array_interface__
(docs/CAI.md). Needs Numba and a CUDA device: without a driver every case is
SKIPPED with the reason. Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1) is
no substitute: its FakeCUDAArray has no __cuda_array_interface__ (Numba
0.68.1; numba-cuda 0.30.4's simulator needs libcudart to import), so the
interface cannot be certified on it: adapters/cai/softdevice.py is the
software device instead.

cai_object returns Numba's own device array: where the installed numba.cuda
gives it a __dlpack__ (or __arrow_c_device_array__), the cai.agree.* rules
compare it with the dict; where it exports the CUDA Array Interface only,
they are not exercised, with that reason (never a pass)."""

NAME = "Numba (numba.cuda, CUDA Array Interface)"
CAI_DEVICE = "cuda"


def cai_object(spec):
    import numpy as np
    from numba import cuda
    host = np.asarray(spec["values"], dtype=spec["dtype"]).reshape(spec["shape"])
    if spec.get("pending"):
        # The copy is enqueued on a stream that becomes the array's default
        # stream, exported as its "stream" entry.
        a = cuda.to_device(host, stream=cuda.stream())
    else:
        a = cuda.to_device(host)
    if spec.get("view") == "step":
        a = a[::2]
    return a


def cai_consume(obj):
    """Numba as a consumer: cuda.as_cuda_array of the harness's object,
    copied to the host (flat, C order)."""
    from numba import cuda
    return cuda.as_cuda_array(obj).copy_to_host().ravel().tolist()
