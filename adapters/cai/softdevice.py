"""A software device speaking the CUDA Array Interface (docs/CAI.md): no GPU.

Its "device memory" is host memory it owns (ctypes buffers): allocations are
tracked, and a freed one is poisoned (0xDB) and no longer counts as
accessible. Its streams are emulated: work enqueued on a stream (a Python
callable) runs only when that stream, or the whole device, is synchronized,
so a consumer that reads without synchronizing on the exported stream reads
stale bytes (0xEE). Handles 1 and 2 are the legacy and per-thread default
streams; others are created from 0x5000 up and never 0.

The same arrays also export DLPack (__dlpack__, __dlpack_device__: kDLCUDA,
device 0), and the one-dimensional C-contiguous ones of a primitive Arrow
type an Arrow device array (__arrow_c_device_array__: ARROW_DEVICE_CUDA,
device 0), describing the same memory, so the cai.agree.* rules compare the
descriptions (metadata only: nothing reads the data through them).

ARROWCERT_CAI_MUTANT selects a mutant (unset: correct): each breaks exactly
the cai.* rule named in MUTANTS (harness/tests/cai.rs proves each is caught,
and alone).
"""
import ctypes
import os
import struct
import sys
import types

MUTANT = os.environ.get("ARROWCERT_CAI_MUTANT", "")
NAME = f"arrowcert software CAI device{f' (mutant {MUTANT})' if MUTANT else ''}"
CAI_DEVICE = "software"

# The rule each mutant breaks.
MUTANTS = {
    "not-a-dict": "cai.dict",
    "shape-list": "cai.shape",
    "typestr-bytes": "cai.typestr",
    "data-list": "cai.data",
    "version-str": "cai.version",
    "version-2": "cai.version.current",
    "typestr-name": "cai.typestr.format",
    "descr-str": "cai.descr",
    "pointer-off-end": "cai.data.accessible",
    "zero-size-pointer": "cai.data.zero-size",
    "strides-list": "cai.strides",
    "mask-int": "cai.mask",
    "stream-str": "cai.stream.type",
    "stream-zero": "cai.stream.zero",
    "strides-in-elements": "cai.values",
    "stream-none-pending": "cai.producer.sync",
    "stream-destroyed": "cai.stream.lifetime",
    "dict-owns-data": "cai.data.lifetime",
    # DLPack says something else of the same memory than the dict does.
    "dlpack-pointer": "cai.agree.pointer",
    "dlpack-shape": "cai.agree.shape",
    "dlpack-strides": "cai.agree.strides",
    "dlpack-dtype": "cai.agree.dtype",
    "dlpack-device": "cai.agree.device",
    "dlpack-readonly": "cai.agree.readonly",
    # The Arrow device array says something else than the dict does.
    "arrow-pointer": "cai.agree.pointer",
    "arrow-length": "cai.agree.shape",
    "arrow-strided": "cai.agree.strides",
    "arrow-format": "cai.agree.dtype",
    "arrow-device": "cai.agree.device",
    # The consumer side (cai_consume).
    "consumer-no-sync": "cai.consumer.sync",
}
if MUTANT and MUTANT not in MUTANTS:
    raise LookupError(f"no CAI mutant {MUTANT!r} (known: {', '.join(MUTANTS)})")

POISON = 0xDB
STALE = 0xEE


class SoftDevice:
    """Memory and streams of the emulated device."""

    def __init__(self):
        self.allocs = {}  # address -> [buffer, nbytes, live]
        self.streams = {}  # handle -> pending work (callables)
        self.next_stream = 0x5000

    def alloc(self, nbytes):
        buf = (ctypes.c_ubyte * max(nbytes, 1))()
        addr = ctypes.addressof(buf)
        self.allocs[addr] = [buf, nbytes, True]
        return addr

    def free(self, addr):
        a = self.allocs.get(addr)
        if a is None or not a[2]:
            return
        ctypes.memset(addr, POISON, max(a[1], 1))
        a[2] = False  # the buffer is kept: freed memory stays mapped, poisoned

    def accessible(self, ptr, nbytes):
        return any(live and base <= ptr and ptr + nbytes <= base + n
                   for base, (_, n, live) in self.allocs.items())

    def create_stream(self):
        h = self.next_stream
        self.next_stream += 1
        self.streams[h] = []
        return h

    def enqueue(self, stream, work):
        self.streams[stream].append(work)

    def synchronize(self, stream=None):
        if stream is None or stream in (1, 2):
            for h in list(self.streams):
                self.synchronize(h)
            return
        if stream not in self.streams:
            raise ValueError(f"no stream {stream:#x} on the software device")
        pending, self.streams[stream] = self.streams[stream], []
        for work in pending:
            work()

    def destroy_stream(self, stream):
        # As cudaStreamDestroy: pending work still completes.
        self.synchronize(stream)
        del self.streams[stream]


# One software device per process, as one GPU is: two adapters on it (a
# pair: one library's array read by another's cai_consume) see the same
# memory and streams, whichever module instance made the device first.
_HOME = "_arrowcert_cai_software_device"
if _HOME not in sys.modules:
    sys.modules[_HOME] = types.ModuleType(_HOME)
    sys.modules[_HOME].DEVICE = SoftDevice()
DEVICE = sys.modules[_HOME].DEVICE

_PACK = {("f", 4): "f", ("f", 8): "d", ("i", 1): "b", ("i", 2): "h", ("i", 4): "i",
         ("i", 8): "q", ("u", 1): "B", ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q",
         ("b", 1): "?"}


def _c_strides(shape, itemsize):
    out, step = [], itemsize
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return list(reversed(out))


class OwningDict(dict):
    """dict-owns-data: the dict frees the copy its data points at when it dies."""

    def __del__(self):
        DEVICE.free(self._copy)


class SoftArray:
    """An array in the software device's memory, exported through the CUDA
    Array Interface."""

    def __init__(self, spec):
        self.typestr = spec["typestr"]
        kind, self.itemsize = self.typestr[1], int(self.typestr[2:])
        fmt = "<" + _PACK[(kind, self.itemsize)]
        shape = list(spec["shape"])
        count = 1
        for n in shape:
            count *= n
        self.nbytes = count * self.itemsize
        self.stream = DEVICE.create_stream()
        self.ptr = DEVICE.alloc(self.nbytes) if self.nbytes else 0
        payload = b"".join(struct.pack(fmt, v) for v in spec["values"])
        if self.nbytes:
            if spec.get("pending"):
                # The values are still being written by work on self.stream.
                ctypes.memset(self.ptr, STALE, self.nbytes)
                ptr = self.ptr
                DEVICE.enqueue(self.stream, lambda: ctypes.memmove(ptr, payload, len(payload)))
            else:
                ctypes.memmove(self.ptr, payload, len(payload))
        strides = _c_strides(shape, self.itemsize)
        self.strides = None
        if spec.get("view") == "step" and shape:
            shape[0] = (shape[0] + 1) // 2
            strides[0] *= 2
            self.strides = strides
        self.shape = shape
        self.size = count

    def __del__(self):
        DEVICE.free(self.ptr)
        if self.stream in DEVICE.streams:
            DEVICE.destroy_stream(self.stream)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy is True:
            raise BufferError("the software device exports its arrays as they are (no copy)")
        if dl_device is not None and tuple(dl_device) != (KDL_CUDA, 0):
            raise BufferError(f"the array is on {(KDL_CUDA, 0)}, not {tuple(dl_device)}")
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return _dlpack_capsule(self, versioned)

    def __dlpack_device__(self):
        return (KDL_CPU if MUTANT == "dlpack-device" else KDL_CUDA, 0)

    @property
    def __cuda_array_interface__(self):
        empty = any(n == 0 for n in self.shape)
        d = {
            "shape": tuple(self.shape),
            "typestr": self.typestr,
            "data": (0 if empty else self.ptr, False),
            "version": 3,
            "strides": None if self.strides is None else tuple(self.strides),
            "descr": [("", self.typestr)],
            "mask": None,
            "stream": self.stream,
        }
        return _mutated(self, d, empty)


def _mutated(a, d, empty):
    m = MUTANT
    if m == "not-a-dict":
        return list(d.items())
    if m == "shape-list":
        d["shape"] = list(d["shape"])
    elif m == "typestr-bytes":
        d["typestr"] = d["typestr"].encode()
    elif m == "data-list":
        d["data"] = list(d["data"])
    elif m == "version-str":
        d["version"] = "3"
    elif m == "version-2":
        d["version"] = 2
    elif m == "typestr-name":
        d["typestr"] = {"f": "float", "i": "int", "u": "uint", "b": "bool"}[a.typestr[1]] + str(8 * a.itemsize)
    elif m == "descr-str":
        d["descr"] = a.typestr
    elif m == "pointer-off-end" and not empty:
        d["data"] = (a.ptr + (1 << 20), False)
    elif m == "zero-size-pointer" and empty:
        d["data"] = (DEVICE.alloc(1), False)
    elif m == "strides-list":
        d["strides"] = list(a.strides or _c_strides(a.shape, a.itemsize))
    elif m == "mask-int":
        d["mask"] = 0
    elif m == "stream-str":
        d["stream"] = str(d["stream"])
    elif m == "stream-zero":
        d["stream"] = 0
    elif m == "strides-in-elements" and a.strides is not None:
        d["strides"] = tuple(s // a.itemsize for s in a.strides)
    elif m == "stream-none-pending":
        d["stream"] = None
    elif m == "stream-destroyed":
        # The exported stream is destroyed (its work done) and the object
        # goes on with a new one: the handle in the dict names no stream.
        DEVICE.destroy_stream(a.stream)
        a.stream = DEVICE.create_stream()
    elif m == "dict-owns-data" and not empty:
        copy = DEVICE.alloc(a.nbytes)
        src = a.ptr
        DEVICE.enqueue(a.stream, lambda: ctypes.memmove(copy, src, a.nbytes))
        d = OwningDict(d)
        d._copy = copy
        d["data"] = (copy, False)
    return d


# ---- DLPack (dlpack.h v1.0) over the same memory, through ctypes --------

KDL_CPU, KDL_CUDA = 1, 2
FLAG_READ_ONLY = 1
_DL_CODE = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}
# dlpack-dtype: another code of the same size.
_DL_OTHER = {0: 1, 1: 0, 2: 0, 5: 2, 6: 1}


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Versioned(ctypes.Structure):
    _fields_ = [("version", _Version), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", _Tensor)]


class _Legacy(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


# A private handle on the C API: argtypes set here stay here.
_API = ctypes.PyDLL(None)
_API.PyCapsule_New.restype = ctypes.py_object
_API.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_API.PyCapsule_IsValid.restype = ctypes.c_int
_API.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_API.PyCapsule_GetPointer.restype = ctypes.c_void_p
_API.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# Managed tensors not yet deleted: address -> (structure, shape, strides,
# the array, whose memory the tensor keeps alive until its deleter runs).
_LIVE = {}
_NAMES = {True: b"dltensor_versioned", False: b"dltensor"}


@_DELETER
def _delete(addr):
    _LIVE.pop(addr, None)


def _destructor(versioned):
    name = _NAMES[versioned]
    kind = _Versioned if versioned else _Legacy

    @ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    def destroy(capsule):
        # "calls the deleter of the DLManagedTensor when the "dltensor"-named
        # capsule is no longer needed": not once a consumer renamed it.
        if _API.PyCapsule_IsValid(capsule, name):
            addr = _API.PyCapsule_GetPointer(capsule, name)
            kind.from_address(addr).deleter(addr)
    return destroy


_DESTROY = {v: _destructor(v) for v in (True, False)}


def _dlpack_capsule(a, versioned):
    """A managed tensor describing what a's __cuda_array_interface__ does,
    in a capsule (the mutants of MUTANTS' dlpack-* rows change one field)."""
    m = MUTANT
    empty = any(n == 0 for n in a.shape)
    strides = a.strides or _c_strides(a.shape, a.itemsize)
    shape = list(a.shape)
    if m == "dlpack-shape" and not empty and shape:
        shape[0] += 1
    elems = [s if m == "dlpack-strides" else s // a.itemsize for s in strides]
    code = _DL_CODE[a.typestr[1]]
    if m == "dlpack-dtype":
        code = _DL_OTHER[code]
    c_shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    c_strides = (ctypes.c_int64 * max(len(elems), 1))(*elems)
    t = _Tensor(data=None if empty else a.ptr,
                device=_Device(KDL_CPU if m == "dlpack-device" else KDL_CUDA, 0),
                ndim=len(shape), dtype=_DType(code, 8 * a.itemsize, 1),
                shape=c_shape, strides=c_strides,
                byte_offset=a.itemsize if m == "dlpack-pointer" and not empty else 0)
    if versioned:
        flags = FLAG_READ_ONLY if m == "dlpack-readonly" else 0
        mt = _Versioned(version=_Version(1, 0), manager_ctx=None, deleter=_delete,
                        flags=flags, dl_tensor=t)
    else:
        mt = _Legacy(dl_tensor=t, manager_ctx=None, deleter=_delete)
    addr = ctypes.addressof(mt)
    _LIVE[addr] = (mt, c_shape, c_strides, a)
    return _API.PyCapsule_New(addr, _NAMES[versioned],
                              ctypes.cast(_DESTROY[versioned], ctypes.c_void_p))


# ---- the Arrow C device interface over the same memory, through ctypes ----

ARROW_DEVICE_CPU, ARROW_DEVICE_CUDA = 1, 2
# Primitive formats by typestr kind and size; arrow-format: another type of
# the same size.
_ARROW_FORMAT = {("i", 1): b"c", ("u", 1): b"C", ("i", 2): b"s", ("u", 2): b"S",
                 ("i", 4): b"i", ("u", 4): b"I", ("i", 8): b"l", ("u", 8): b"L",
                 ("f", 2): b"e", ("f", 4): b"f", ("f", 8): b"g"}
_ARROW_OTHER = {b"c": b"C", b"C": b"c", b"s": b"S", b"S": b"s", b"i": b"I", b"I": b"i",
                b"l": b"L", b"L": b"l", b"e": b"s", b"f": b"i", b"g": b"l"}
_SCHEMA_RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_ARRAY_RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Schema(ctypes.Structure):
    _fields_ = [("format", ctypes.c_char_p), ("name", ctypes.c_char_p),
                ("metadata", ctypes.c_char_p), ("flags", ctypes.c_int64),
                ("n_children", ctypes.c_int64), ("children", ctypes.c_void_p),
                ("dictionary", ctypes.c_void_p), ("release", _SCHEMA_RELEASE),
                ("private_data", ctypes.c_void_p)]


class _Array(ctypes.Structure):
    _fields_ = [("length", ctypes.c_int64), ("null_count", ctypes.c_int64),
                ("offset", ctypes.c_int64), ("n_buffers", ctypes.c_int64),
                ("n_children", ctypes.c_int64), ("buffers", ctypes.POINTER(ctypes.c_void_p)),
                ("children", ctypes.c_void_p), ("dictionary", ctypes.c_void_p),
                ("release", _ARRAY_RELEASE), ("private_data", ctypes.c_void_p)]


class _DeviceArray(ctypes.Structure):
    _fields_ = [("array", _Array), ("device_id", ctypes.c_int64),
                ("device_type", ctypes.c_int32), ("sync_event", ctypes.c_void_p),
                ("reserved", ctypes.c_int64 * 3)]


# What a live export holds (its format, its buffer list, the array whose
# memory it points at), by the token in private_data: a moved structure
# keeps its private_data, so the release callback finds it wherever it is.
_ARROW_LIVE = {}
# The structures the capsules point at, until the capsules die.
_ARROW_HELD = {}
_TOKENS = iter(range(1, 1 << 62))


@_SCHEMA_RELEASE
def _release_schema(addr):
    s = _Schema.from_address(addr)
    _ARROW_LIVE.pop(s.private_data, None)
    s.release = _SCHEMA_RELEASE()


@_ARRAY_RELEASE
def _release_array(addr):
    a = _Array.from_address(addr)
    _ARROW_LIVE.pop(a.private_data, None)
    a.release = _ARRAY_RELEASE()


def _arrow_destructor(name, kind):
    @ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    def destroy(capsule):
        # An unconsumed capsule releases what it holds; a moved structure is
        # marked released (release NULL) by its consumer.
        addr = _API.PyCapsule_GetPointer(capsule, name)
        s = kind.from_address(addr)
        release = s.array.release if kind is _DeviceArray else s.release
        if release:
            release(addr)
        _ARROW_HELD.pop(addr, None)
    return destroy


_DESTROY_SCHEMA = _arrow_destructor(b"arrow_schema", _Schema)
_DESTROY_DEVICE_ARRAY = _arrow_destructor(b"arrow_device_array", _DeviceArray)


def _arrow_exportable(a):
    return (len(a.shape) == 1 and (a.strides is None or MUTANT == "arrow-strided")
            and (a.typestr[1], a.itemsize) in _ARROW_FORMAT)


class ArrowSoftArray(SoftArray):
    """A one-dimensional array of a primitive Arrow type: also exported
    through the Arrow PyCapsule interface's __arrow_c_device_array__."""

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        m = MUTANT
        fmt = _ARROW_FORMAT[(self.typestr[1], self.itemsize)]
        if m == "arrow-format":
            fmt = _ARROW_OTHER[fmt]
        length = self.shape[0] + (1 if m == "arrow-length" else 0)
        data = self.ptr + (self.itemsize if m == "arrow-pointer" and self.ptr else 0)
        buffers = (ctypes.c_void_p * 2)(None, data or None)
        token = next(_TOKENS)
        _ARROW_LIVE[token] = (fmt, buffers, self)
        _ARROW_LIVE[token + (1 << 62)] = (fmt, buffers, self)
        schema = _Schema(format=fmt, name=None, metadata=None, flags=2, n_children=0,
                         children=None, dictionary=None, release=_release_schema,
                         private_data=token)
        array = _Array(length=length, null_count=0, offset=0, n_buffers=2, n_children=0,
                       buffers=ctypes.cast(buffers, ctypes.POINTER(ctypes.c_void_p)),
                       children=None, dictionary=None, release=_release_array,
                       private_data=token + (1 << 62))
        device = ARROW_DEVICE_CPU if m == "arrow-device" else ARROW_DEVICE_CUDA
        dev = _DeviceArray(array=array, device_id=0, device_type=device, sync_event=None)
        for struct in (schema, dev):
            _ARROW_HELD[ctypes.addressof(struct)] = struct
        return (_API.PyCapsule_New(ctypes.addressof(schema), b"arrow_schema",
                                   ctypes.cast(_DESTROY_SCHEMA, ctypes.c_void_p)),
                _API.PyCapsule_New(ctypes.addressof(dev), b"arrow_device_array",
                                   ctypes.cast(_DESTROY_DEVICE_ARRAY, ctypes.c_void_p)))


def cai_object(spec):
    a = SoftArray(spec)
    if _arrow_exportable(a):
        a.__class__ = ArrowSoftArray
    return a


def cai_synchronize(stream):
    DEVICE.synchronize(stream)


def cai_stream_alive(stream):
    return stream in (1, 2) or stream in DEVICE.streams


def cai_accessible(ptr, nbytes):
    return DEVICE.accessible(ptr, nbytes)


def cai_device_array(spec):
    """The harness's arrays for a consumer, on this device (mutants of the
    producer side do not apply to them)."""
    return _Unmutated(SoftArray(spec))


class _Unmutated:
    def __init__(self, a):
        self._a = a

    @property
    def __cuda_array_interface__(self):
        global MUTANT
        saved, MUTANT = MUTANT, ""
        try:
            return self._a.__cuda_array_interface__
        finally:
            MUTANT = saved


def cai_consume(obj):
    """A consumer on this device: synchronizes on the given stream (none
    for None), then reads every element by shape, strides and typestr."""
    d = obj.__cuda_array_interface__
    stream = d.get("stream")
    if isinstance(stream, int) and stream != 0 and MUTANT != "consumer-no-sync":
        DEVICE.synchronize(stream)
    kind, size = d["typestr"][1], int(d["typestr"][2:])
    fmt = "<" + _PACK[(kind, size)]
    shape = list(d["shape"])
    strides = list(d["strides"]) if d.get("strides") is not None else _c_strides(shape, size)
    ptr = d["data"][0]
    out = []

    def walk(dim, offset):
        if dim == len(shape):
            out.append(struct.unpack(fmt, ctypes.string_at(ptr + offset, size))[0])
            return
        for i in range(shape[dim]):
            walk(dim + 1, offset + i * strides[dim])

    if all(n > 0 for n in shape):
        walk(0, 0)
    return out
