"""pyogrio 0.13.0 (GDAL 3.12.4 inside) crashes (SIGSEGV) writing a stream
whose record batch has a field with no name: ArrowSchema.name NULL. No
harness, no pyarrow; the stream is built with ctypes:

    pip install pyogrio==0.13.0 && python reports/repro/pyogrio_null_field_name.py

The C data interface, ArrowSchema.name: "Optional. ... Producers MAY decide
not to provide this information, and consumers MAY decide to ignore it. If
omitted, MAY be NULL or an empty string." pyogrio's
create_fields_from_arrow_schema passes the child's name to
PyBytes_FromString, which reads a NULL pointer (gdb: __strlen_evex <-
PyBytes_FromString(str=0x0) <- pyogrio._ogr.get_string <-
pyogrio._io.create_fields_from_arrow_schema <- ogr_write_arrow).
The same stream with the name "x" is written and read back fine
(`python ... named`).
"""
import ctypes as C
import sys

import pyogrio
from pyogrio.raw import write_arrow


class ArrowSchema(C.Structure):
    pass


SCHEMA_RELEASE = C.CFUNCTYPE(None, C.POINTER(ArrowSchema))
ArrowSchema._fields_ = [
    ("format", C.c_char_p), ("name", C.c_char_p), ("metadata", C.c_void_p),
    ("flags", C.c_int64), ("n_children", C.c_int64),
    ("children", C.POINTER(C.POINTER(ArrowSchema))),
    ("dictionary", C.POINTER(ArrowSchema)), ("release", SCHEMA_RELEASE),
    ("private_data", C.c_void_p),
]


class ArrowArray(C.Structure):
    pass


ARRAY_RELEASE = C.CFUNCTYPE(None, C.POINTER(ArrowArray))
ArrowArray._fields_ = [
    ("length", C.c_int64), ("null_count", C.c_int64), ("offset", C.c_int64),
    ("n_buffers", C.c_int64), ("n_children", C.c_int64),
    ("buffers", C.POINTER(C.c_void_p)), ("children", C.POINTER(C.POINTER(ArrowArray))),
    ("dictionary", C.POINTER(ArrowArray)), ("release", ARRAY_RELEASE),
    ("private_data", C.c_void_p),
]


class ArrowArrayStream(C.Structure):
    pass


GET_SCHEMA = C.CFUNCTYPE(C.c_int, C.POINTER(ArrowArrayStream), C.POINTER(ArrowSchema))
GET_NEXT = C.CFUNCTYPE(C.c_int, C.POINTER(ArrowArrayStream), C.POINTER(ArrowArray))
GET_LAST_ERROR = C.CFUNCTYPE(C.c_char_p, C.POINTER(ArrowArrayStream))
STREAM_RELEASE = C.CFUNCTYPE(None, C.POINTER(ArrowArrayStream))
ArrowArrayStream._fields_ = [
    ("get_schema", GET_SCHEMA), ("get_next", GET_NEXT), ("get_last_error", GET_LAST_ERROR),
    ("release", STREAM_RELEASE), ("private_data", C.c_void_p),
]

NAME = b"x" if sys.argv[1:] == ["named"] else None
keep = []  # everything the structures point to lives as long as the script


@SCHEMA_RELEASE
def release_schema(s):
    s.contents.release = SCHEMA_RELEASE()


@ARRAY_RELEASE
def release_array(a):
    a.contents.release = ARRAY_RELEASE()


def fill_schema(out):
    child = ArrowSchema(format=b"l", name=NAME, flags=2, release=release_schema)
    children = (C.POINTER(ArrowSchema) * 1)(C.pointer(child))
    keep.extend([child, children])
    out.contents.format, out.contents.name, out.contents.metadata = b"+s", b"", None
    out.contents.flags, out.contents.n_children = 0, 1
    out.contents.children, out.contents.dictionary = children, None
    out.contents.release = release_schema


values = (C.c_int64 * 3)(1, 2, 3)
batches = [True]


@GET_SCHEMA
def get_schema(stream, out):
    fill_schema(out)
    return 0


@GET_NEXT
def get_next(stream, out):
    if not batches:
        out.contents.release = ARRAY_RELEASE()  # end of stream
        return 0
    batches.pop()
    child_buffers = (C.c_void_p * 2)(None, C.cast(values, C.c_void_p))
    child = ArrowArray(length=3, null_count=0, offset=0, n_buffers=2, n_children=0,
                       buffers=child_buffers, release=release_array)
    children = (C.POINTER(ArrowArray) * 1)(C.pointer(child))
    buffers = (C.c_void_p * 1)(None)
    keep.extend([child_buffers, child, children, buffers])
    a = out.contents
    a.length, a.null_count, a.offset, a.n_buffers, a.n_children = 3, 0, 0, 1, 1
    a.buffers, a.children, a.dictionary, a.release = buffers, children, None, release_array
    return 0


@GET_LAST_ERROR
def get_last_error(stream):
    return None


@STREAM_RELEASE
def release_stream(stream):
    stream.contents.release = STREAM_RELEASE()


class Stream:
    def __arrow_c_stream__(self, requested_schema=None):
        s = ArrowArrayStream(get_schema, get_next, get_last_error, release_stream, None)
        keep.append(s)
        new_capsule = C.pythonapi.PyCapsule_New
        new_capsule.restype = C.py_object
        new_capsule.argtypes = [C.c_void_p, C.c_char_p, C.c_void_p]
        return new_capsule(C.addressof(s), b"arrow_array_stream", None)


print(f"pyogrio {pyogrio.__version__} (GDAL {pyogrio.__gdal_version_string__}): "
      f"writing a stream whose field name is {NAME!r} ...", flush=True)
write_arrow(Stream(), "/vsimem/null-name.gpkg", driver="GPKG", layer="t", geometry_type="Unknown")
print("written")
