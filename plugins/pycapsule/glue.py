"""Python glue of the arrowcert PyCapsule plugin (pycapsule_plugin.c).

scripts/real/build-pycapsule.sh embeds this file into each plugin, which
executes it once in a fresh module namespace holding

  LIBRARY  the library under test: "pyarrow", "polars" or "duckdb"
  C        the plugin's helper module: C.capsule(address, name) wraps a
           structure the harness owns in a PyCapsule whose destructor
           releases it unless it was moved; C.stream_schema(address) calls a
           harness stream's get_schema into a capsule that owns the result.

The plugin calls produce_* / consume_* and, on an exception, describe().

Producers return exactly what the library's __arrow_c_*__ method returned;
the plugin moves the structure out of the capsule. Consumers hand the
harness's structures, as capsules, to the library's importer and return
what the library read as Arrow IPC stream bytes (any buffer object).
"""
import errno as _errno
import io
import sys
import traceback

# DuckDB's Python package reads a PyCapsule stream through pyarrow (a
# pyarrow.dataset scanner) whenever pyarrow.dataset is importable, and
# through its own importer otherwise: with the route open, a "duckdb"
# verdict would be pyarrow's (Arrow C++'s) code. The glue closes it, so
# that what the duckdb consumer reads is read by DuckDB's own C data
# interface importer, and what it loads (a pyarrow Table, for the producer
# side) is scanned by DuckDB's own arrow scan. Checked: with pyarrow.dataset
# importable, from_arrow on a capsule-only object imports it; with this
# entry, it does not and reads the same rows.
if globals().get("LIBRARY") == "duckdb":
    sys.modules["pyarrow.dataset"] = None


# ---- consumer side: the harness's structures, as PyCapsule objects ---------

class HarnessArray:
    """A record batch (a struct array) the harness exported."""

    def __init__(self, schema_ptr, array_ptr):
        self._s, self._a = schema_ptr, array_ptr

    def __arrow_c_array__(self, requested_schema=None):
        # "the producer may ignore requested_schema" (PyCapsuleInterface.rst)
        return (C.capsule(self._s, "arrow_schema"),
                C.capsule(self._a, "arrow_array"))


class HarnessDeviceArray:
    def __init__(self, schema_ptr, array_ptr):
        self._s, self._a = schema_ptr, array_ptr

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        return (C.capsule(self._s, "arrow_schema"),
                C.capsule(self._a, "arrow_device_array"))


class HarnessStream:
    def __init__(self, stream_ptr):
        self._p = stream_ptr

    def __arrow_c_stream__(self, requested_schema=None):
        return C.capsule(self._p, "arrow_array_stream")


class HarnessStreamWithSchema(HarnessStream):
    """For importers that want the schema before the stream: duckdb calls
    __arrow_c_stream__ twice otherwise, and the harness's stream is
    single-use. The schema comes from the stream's own get_schema."""

    def __arrow_c_schema__(self):
        return C.stream_schema(self._p)


# ---- loading the harness's data into the library (producers) ---------------

class Unsupported(NotImplementedError):
    pass


def _load(what, fn, data):
    """The harness's data as the library's own object. A library that cannot
    hold this data (its IPC reader or its import refuses it, or panics)
    cannot export it: a declared limitation (ENOSYS), with its message."""
    try:
        return fn(data)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # pyo3's PanicException is a BaseException
        raise Unsupported(f"{LIBRARY} cannot load this data as {what}: "
                          f"{type(e).__module__}.{type(e).__name__}: {e}") from e


def _arrow_buffer(data):
    # The IPC bytes copied into Arrow-owned memory, so that nothing pyarrow
    # exports keeps a Python object alive (releasing it needs no GIL).
    import pyarrow as pa
    sink = pa.BufferOutputStream()
    sink.write(data)
    return sink.getvalue()


def _pa_reader(data):
    import pyarrow as pa
    return pa.ipc.open_stream(_arrow_buffer(data))


def _pa_schema(data):
    return _pa_reader(data).schema


def _pa_batches(data):
    return list(_pa_reader(data))


def _pa_table(data):
    return _pa_reader(data).read_all()


def _pl_frame(data):
    import polars as pl
    return pl.read_ipc_stream(io.BytesIO(data), rechunk=False)


def _duck_connect():
    import duckdb
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")  # it would print to stdout
    return con


def _duck_relation(data):
    # The data is imported into a duckdb table (duckdb's own storage); the
    # exported stream is duckdb's export of a relation over it. The
    # connection is private, so no other query invalidates the result.
    tbl = _pa_table(data)
    con = _duck_connect()
    con.from_arrow(tbl).create("arrowcert_t")
    return con.table("arrowcert_t")


def _pick(batches, batch_index, offset, length):
    if not 0 <= batch_index < len(batches):
        raise ValueError(f"batch_index {batch_index} out of range: "
                         f"the stream has {len(batches)} batches")
    b = batches[batch_index]
    rows = b.num_rows
    n = rows - offset if length == -1 else length
    if offset < 0 or n < 0 or offset + n > rows:
        raise ValueError(f"slice {offset}+{length} out of range for a batch of {rows} rows")
    if offset == 0 and n == rows:
        return b
    return b.slice(offset, n)  # zero-copy


def _unsupported(what):
    raise NotImplementedError(f"{LIBRARY} (PyCapsule) cannot {what}")


# ---- producers: what the library's __arrow_c_*__ method returned -----------

def produce_schema(data):
    if LIBRARY == "pyarrow":
        return _load("a pyarrow Schema", _pa_schema, data).__arrow_c_schema__()
    if LIBRARY == "polars":
        return _load("a polars DataFrame", _pl_frame, data).schema.__arrow_c_schema__()
    _unsupported("export a schema (no __arrow_c_schema__)")


def produce_array(data, batch_index, offset, length):
    if LIBRARY == "pyarrow":
        batches = _load("pyarrow RecordBatches", _pa_batches, data)
        return _pick(batches, batch_index, offset, length).__arrow_c_array__()
    _unsupported("export an array (no __arrow_c_array__)")


def produce_device_array(data, batch_index, offset, length):
    if LIBRARY == "pyarrow":
        batches = _load("pyarrow RecordBatches", _pa_batches, data)
        return _pick(batches, batch_index, offset, length).__arrow_c_device_array__()
    _unsupported("export a device array (no __arrow_c_device_array__)")


def produce_stream(data):
    if LIBRARY == "pyarrow":
        return _load("a pyarrow Table", _pa_table, data).__arrow_c_stream__()
    if LIBRARY == "polars":
        return _load("a polars DataFrame", _pl_frame, data).__arrow_c_stream__()
    if LIBRARY == "duckdb":
        return _load("a duckdb relation", _duck_relation, data).__arrow_c_stream__()
    _unsupported("export a stream")


def produce_device_stream(data):
    _unsupported("export a device stream (no __arrow_c_device_stream__)")


# ---- consumers: import, read everything, write it back as IPC --------------

def _empty_like(b):
    """A zero-row batch with fresh columns. pyarrow 26 imports a zero-length
    array with a non-zero offset with zero-size buffers, and its IPC writer
    then writes negative buffer lengths for it (an IPC stream pyarrow itself
    cannot read). That is a fault of the serialization step, not of what
    was read (zero rows), so the glue writes fresh empty columns instead."""
    import pyarrow as pa
    def fresh(c):
        if not c.offset:
            return c
        for make in (lambda: c.take(pa.array([], pa.int32())),
                     lambda: pa.nulls(0, type=c.type)):
            try:
                return make()
            except Exception:
                pass
        return c  # a type neither can make: written as read
    try:
        return pa.RecordBatch.from_arrays([fresh(c) for c in b.columns], schema=b.schema)
    except Exception:  # e.g. a column type with no Python class (interval
        return b       # months): written as read


def _pa_ipc(schema, batches):
    import pyarrow as pa
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as w:
        for b in batches:
            w.write_batch(_empty_like(b) if b.num_rows == 0 else b)
    return sink.getvalue()


def _polars_ipc(df):
    out = io.BytesIO()
    df.write_ipc_stream(out)
    return out.getvalue()


def consume_array(schema_ptr, array_ptr):
    obj = HarnessArray(schema_ptr, array_ptr)
    if LIBRARY == "pyarrow":
        import pyarrow as pa
        b = pa.record_batch(obj)
        return _pa_ipc(b.schema, [b])
    if LIBRARY == "polars":
        import polars as pl
        return _polars_ipc(pl.DataFrame(obj))
    _unsupported("import an array")


def consume_device_array(schema_ptr, array_ptr):
    obj = HarnessDeviceArray(schema_ptr, array_ptr)
    if LIBRARY == "pyarrow":
        import pyarrow as pa
        b = pa.record_batch(obj)
        return _pa_ipc(b.schema, [b])
    _unsupported("import a device array")


def consume_stream(stream_ptr):
    if LIBRARY == "pyarrow":
        import pyarrow as pa
        r = pa.RecordBatchReader.from_stream(HarnessStream(stream_ptr))
        try:
            schema = r.schema
            batches = list(r)
        finally:
            r.close()
        return _pa_ipc(schema, batches)
    if LIBRARY == "polars":
        import polars as pl
        return _polars_ipc(pl.DataFrame(HarnessStream(stream_ptr)))
    if LIBRARY == "duckdb":
        con = _duck_connect()
        try:
            rel = con.from_arrow(HarnessStreamWithSchema(stream_ptr))
            tbl = rel.to_arrow_table()
            del rel
        finally:
            con.close()
        return _pa_ipc(tbl.schema, tbl.to_batches())
    _unsupported("import a stream")


def consume_device_stream(stream_ptr):
    _unsupported("import a device stream")


# ---- errors -----------------------------------------------------------------

# A library that says so in its message declares a limitation (ENOSYS).
NOT_SUPPORTED = ("not supported", "not yet supported", "not yet implemented",
                 "not implemented", "unsupported", "does not support")


# Arrow C++'s record batch import refuses a struct array at a non-zero
# top-level offset ("ArrowArray struct has non-zero offset, cannot be
# imported as RecordBatch"). pyarrow raises it as it is (and duckdb's
# arrow_scan inherited it while it read streams through pyarrow, a route
# the glue now closes, see the top of this file). The spec
# allows the refusal ("Consumers MAY decide not to support non-0-offset
# arrays, but they should document this limitation", CDataInterface.rst):
# it is a declared limitation (ENOSYS), as the Arrow C++ adapter reports
# the same refusal, so one library's behaviour gets one verdict whichever
# binding reaches it.
DECLARED_LIMITATIONS = ("arrowarray struct has non-zero offset",)


# A library that failed inside itself (a Rust panic a binding caught, an
# "internal error" exception, a C++ logic error) did not decline the data:
# ENOTRECOVERABLE tells the harness so (PLUGIN_ABI.md), and the case is an
# error of the library, never a limitation.
INTERNAL_FAILURES = ("panicexception", "internalexception", "internal error",
                     "basic_string: construction from null")


def _internal_failure(e, text):
    name = (type(e).__module__ + "." + type(e).__name__).lower()
    return any(w in name or w in text for w in INTERNAL_FAILURES)


def describe(e):
    """(errno, message) for an exception the glue or the library raised."""
    text = str(e).lower()
    if _internal_failure(e, text):
        code = _errno.ENOTRECOVERABLE
    elif (isinstance(e, NotImplementedError) or any(w in text for w in NOT_SUPPORTED)
            or any(w in text for w in DECLARED_LIMITATIONS)):
        code = _errno.ENOSYS
    elif isinstance(e, MemoryError):
        code = _errno.ENOMEM
    elif isinstance(e, (ValueError, TypeError, IndexError, KeyError)):
        code = _errno.EINVAL
    else:
        code = _errno.EIO
    t = type(e)
    msg = "".join(traceback.format_exception_only(t, e)).strip()
    if t.__module__ not in ("builtins", "__main__") and not msg.startswith(t.__module__):
        msg = f"{t.__module__}.{msg}"
    return code, msg
