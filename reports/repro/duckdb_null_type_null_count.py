"""DuckDB 2.0.1 exports a column of Arrow's null type ("n") with null_count
0 although every slot of a null-type array is null. No harness, no pyarrow:

    pip install duckdb==2.0.1 && python reports/repro/duckdb_null_type_null_count.py

Reads DuckDB's own exported stream (get_next) with ctypes and prints the
child's format, length and null_count. The C data interface: "null_count:
The number of null items in the array. MAY be -1 if not yet computed"; a
null-type array's items are all null (Columnar.rst, "Null Layout": "a Null
array ... all of whose values are null").
"""
import ctypes as C
import sys

sys.modules["pyarrow.dataset"] = None  # DuckDB's own exporter only
import duckdb  # noqa: E402


class ArrowSchema(C.Structure):
    pass


ArrowSchema._fields_ = [
    ("format", C.c_char_p), ("name", C.c_char_p), ("metadata", C.c_void_p),
    ("flags", C.c_int64), ("n_children", C.c_int64),
    ("children", C.POINTER(C.POINTER(ArrowSchema))),
    ("dictionary", C.POINTER(ArrowSchema)),
    ("release", C.CFUNCTYPE(None, C.POINTER(ArrowSchema))),
    ("private_data", C.c_void_p),
]


class ArrowArray(C.Structure):
    pass


ArrowArray._fields_ = [
    ("length", C.c_int64), ("null_count", C.c_int64), ("offset", C.c_int64),
    ("n_buffers", C.c_int64), ("n_children", C.c_int64),
    ("buffers", C.POINTER(C.c_void_p)),
    ("children", C.POINTER(C.POINTER(ArrowArray))),
    ("dictionary", C.POINTER(ArrowArray)),
    ("release", C.CFUNCTYPE(None, C.POINTER(ArrowArray))),
    ("private_data", C.c_void_p),
]


class ArrowArrayStream(C.Structure):
    _fields_ = [
        ("get_schema", C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(ArrowSchema))),
        ("get_next", C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(ArrowArray))),
        ("get_last_error", C.c_void_p),
        ("release", C.CFUNCTYPE(None, C.c_void_p)), ("private_data", C.c_void_p),
    ]


get_pointer = C.pythonapi.PyCapsule_GetPointer
get_pointer.restype = C.c_void_p
get_pointer.argtypes = [C.py_object, C.c_char_p]

con = duckdb.connect()
con.execute("CREATE TABLE t AS SELECT NULL AS n FROM range(10)")
cap = con.table("t").__arrow_c_stream__()
stream = ArrowArrayStream.from_address(get_pointer(cap, b"arrow_array_stream"))
schema, array = ArrowSchema(), ArrowArray()
assert stream.get_schema(C.addressof(stream), C.byref(schema)) == 0
assert stream.get_next(C.addressof(stream), C.byref(array)) == 0
child_schema, child = schema.children[0].contents, array.children[0].contents
print(f"duckdb {duckdb.__version__}: column format {child_schema.format!r}, "
      f"length {child.length}, null_count {child.null_count}"
      + ("  <- every slot is null: null_count must be the length (or -1)"
         if child_schema.format == b"n" and child.null_count not in (child.length, -1) else ""))
array.release(C.byref(array))
schema.release(C.byref(schema))
