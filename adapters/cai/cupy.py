"""CuPy's __cuda_array_interface__ (docs/CAI.md). Needs CuPy and a CUDA
device: without a driver every case is SKIPPED with the reason. The library
is imported when a case runs, so a machine without it reports that too.

cai_object returns CuPy's own ndarray, which also offers its DLPack
(__dlpack__, __dlpack_device__): the cai.agree.* rules compare that DLTensor
with the dict (metadata only, no device read)."""

NAME = "CuPy (CUDA Array Interface)"
CAI_DEVICE = "cuda"


def cai_object(spec):
    import cupy as cp
    a = cp.asarray(spec["values"], dtype=spec["dtype"]).reshape(spec["shape"])
    if spec.get("view") == "step":
        a = a[::2]
    if spec.get("pending"):
        # Work on a non-default stream the array is exported on. CuPy's
        # dict names the stream that is current when it is read (its
        # ndarray keeps none: the legacy default stream is exported as 1),
        # so the stream is made current, as a CuPy user does, and stays so
        # while the harness reads the dict; `a`'s upload on the stream
        # current before is finished first.
        cp.cuda.get_current_stream().synchronize()
        s = cp.cuda.Stream(non_blocking=True)
        s.use()
        b = cp.empty_like(a)
        b[...] = a
        return b
    return a


def cai_consume(obj):
    """CuPy as a consumer: cupy.asarray of the harness's object, copied to
    the host (flat, C order)."""
    import cupy as cp
    return cp.asarray(obj).ravel().get().tolist()
