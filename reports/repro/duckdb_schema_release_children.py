"""DuckDB 1.5.6: does the release callback of an exported ArrowSchema call
its children's release callbacks? No harness, no pyarrow:

    pip install duckdb==1.5.6 && python reports/repro/duckdb_schema_release_children.py

Takes the schema of DuckDB's own exported stream (get_schema), replaces
each child's release with a counting callback (which forwards to the
original), releases the root, and prints how often each child's release
ran. The C data interface: "The release callback MUST walk all children
structures (including the optional dictionary) and call their own release
callbacks."
"""
import ctypes as C
import sys

sys.modules["pyarrow.dataset"] = None  # DuckDB's own exporter only
import duckdb


class ArrowSchema(C.Structure):
    pass


RELEASE = C.CFUNCTYPE(None, C.POINTER(ArrowSchema))
ArrowSchema._fields_ = [
    ("format", C.c_char_p), ("name", C.c_char_p), ("metadata", C.c_void_p),
    ("flags", C.c_int64), ("n_children", C.c_int64),
    ("children", C.POINTER(C.POINTER(ArrowSchema))),
    ("dictionary", C.POINTER(ArrowSchema)), ("release", C.c_void_p),
    ("private_data", C.c_void_p),
]


class ArrowArrayStream(C.Structure):
    _fields_ = [
        ("get_schema", C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(ArrowSchema))),
        ("get_next", C.c_void_p), ("get_last_error", C.c_void_p),
        ("release", C.CFUNCTYPE(None, C.c_void_p)), ("private_data", C.c_void_p),
    ]


get_pointer = C.pythonapi.PyCapsule_GetPointer
get_pointer.restype = C.c_void_p
get_pointer.argtypes = [C.py_object, C.c_char_p]

con = duckdb.connect()
con.execute("CREATE TABLE t AS SELECT 1::INTEGER AS a, 'x' AS b, [1, 2] AS c")
cap = con.table("t").__arrow_c_stream__()
stream = ArrowArrayStream.from_address(get_pointer(cap, b"arrow_array_stream"))
schema = ArrowSchema()
assert stream.get_schema(C.addressof(stream), C.byref(schema)) == 0

calls = {}
originals = {}
keep = []


def counting(i):
    def release(ptr):
        calls[i] = calls.get(i, 0) + 1
        original = originals[i]
        if original:
            RELEASE(original)(ptr)
        ptr.contents.release = None
    cb = RELEASE(release)
    keep.append(cb)
    return cb


for i in range(schema.n_children):
    child = schema.children[i].contents
    originals[i] = child.release
    if child.release:
        child.release = C.cast(counting(i), C.c_void_p).value

RELEASE(schema.release)(C.byref(schema))
for i in range(schema.n_children):
    had = "a release callback" if originals[i] else "release NULL"
    print(f"child {i} ({had}): release called {calls.get(i, 0)} time(s)")
