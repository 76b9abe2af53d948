"""PostgreSQL's ADBC driver 1.13.0 crashes (SIGSEGV) ingesting a stream
whose get_schema fails: valgrind puts the crash in the driver's own
clean-up, a call through a NULL function pointer

    at 0x0: ???
    by adbcpq::Releaser<ArrowBuffer>::Release(ArrowBuffer*)
    by adbcpq::Handle<ArrowBuffer>::reset()
    by adbcpq::BindStream::~BindStream()
    by adbcpq::PostgresStatement::ExecuteIngest(...)

(a buffer BindStream never set up, released with its zeroed allocator),
the same stack as through the harness (`arrowcert replay --consumer
postgresql-adbc --under valgrind 'consumer/stream_error/schema-EINVAL/primitive'`,
where the last harness step was `get_last_error`). No harness, no pyarrow:
the stream is built with ctypes (one int64 column), as in
duckdb_adbc_get_schema_error.py. Needs a server:

    pip install adbc-driver-postgresql==1.13.0
    eval "$(bash scripts/postgres/server.sh start)"
    python reports/repro/adbc_postgresql_get_schema_error.py       # SIGSEGV
    python reports/repro/adbc_postgresql_get_schema_error.py ok    # ingested

The C stream interface's callbacks: "Return value: 0 on success, a
non-zero error code otherwise." A crash is not an error reported. The
cases `consumer/stream_error/schema-EINVAL/*` (consumer.stream.error,
SHOULD, inferred).
"""
import ctypes as C
import glob
import os
import sys
import sysconfig

import adbc_driver_manager.dbapi as dbapi
import adbc_driver_postgresql
import adbc_driver_postgresql.dbapi as pg



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

NAME = b"x"
FAIL = sys.argv[1:] != ["ok"]
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
    if FAIL:
        return 22  # EINVAL
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
    return b"get_schema failed on purpose" if FAIL else None


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



uri = os.environ.get("ARROWCERT_PG_URI")
if not uri:
    sys.exit("set ARROWCERT_PG_URI (eval \"$(bash scripts/postgres/server.sh start)\")")
print(f"adbc_driver_postgresql {adbc_driver_postgresql.__version__}: ingesting a stream whose "
      f"get_schema {'fails with EINVAL' if FAIL else 'succeeds'} ...", flush=True)
with pg.connect(uri) as conn:
    with conn.cursor() as cur:
        try:
            cur.adbc_ingest("arrowcert_get_schema_error", Stream(), mode="replace")
            print("ingested")
        except pg.Error as e:
            print(f"refused cleanly: {type(e).__name__}: {str(e)[:150]}")
