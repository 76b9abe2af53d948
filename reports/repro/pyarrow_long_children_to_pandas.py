"""pyarrow 26.0.1 writes past the end of the NumPy block it allocated when
it converts to pandas a record batch imported through the C data interface
whose struct children are longer than the batch (the C data interface lets
a parent use a part of its children: the harness's varied encoding hands
such batches over). RecordBatch._import_from_c keeps each child's full
length as the column (num_rows 10, a column of 200000), and
`to_pandas`' ObjectWriter (binary, large_binary, binary_view, decimal,
list columns) copies the whole column into a block of num_rows slots:
a heap overflow. pandas' DataFrame.from_arrow goes through it, which is
the pandas consumer's crashes "on a different set of cases in each run":
the write lands in whatever the heap holds next, and the damage shows in
this case or a later one in the same worker.

    pip install pyarrow==26.0.1 pandas==3.1.1
    python reports/repro/pyarrow_long_children_to_pandas.py binary_view 200000   # SIGSEGV
    valgrind python reports/repro/pyarrow_long_children_to_pandas.py binary_view 11
        # "Invalid write of size 8 ... 0 bytes after a block of size 160",
        # ObjectWriterVisitor::Visit<BinaryViewType> (libarrow_python)
    python reports/repro/pyarrow_long_children_to_pandas.py int64 200000   # converts

ctypes builds the parent ArrowArray (length 10, two children exported by
pyarrow: one of 10 values, one of N); no harness. With string or
string_view columns pandas refuses the shapes ("Shape of passed values is
(N, 2), indices imply (10, 2)"); int64 copies 10 rows.
"""
import ctypes as C
import decimal
import sys

import pyarrow as pa


class ArrowSchema(C.Structure):
    _fields_ = [("format", C.c_char_p), ("name", C.c_char_p), ("metadata", C.c_void_p),
                ("flags", C.c_int64), ("n_children", C.c_int64), ("children", C.c_void_p),
                ("dictionary", C.c_void_p), ("release", C.c_void_p), ("private_data", C.c_void_p)]


class ArrowArray(C.Structure):
    pass


RELEASE = C.CFUNCTYPE(None, C.POINTER(ArrowArray))
ArrowArray._fields_ = [
    ("length", C.c_int64), ("null_count", C.c_int64), ("offset", C.c_int64),
    ("n_buffers", C.c_int64), ("n_children", C.c_int64), ("buffers", C.POINTER(C.c_void_p)),
    ("children", C.POINTER(C.POINTER(ArrowArray))), ("dictionary", C.POINTER(ArrowArray)),
    ("release", RELEASE), ("private_data", C.c_void_p),
]

KIND = sys.argv[1] if len(sys.argv) > 1 else "binary_view"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 200000
TYPES = {
    "binary_view": pa.binary_view(), "binary": pa.binary(), "large_binary": pa.large_binary(),
    "decimal128": pa.decimal128(10, 2), "list": pa.list_(pa.int32()),
    "string": pa.string(), "string_view": pa.string_view(), "int64": pa.int64(),
}
T = TYPES[KIND]


def values(k):
    if KIND == "int64":
        return pa.array(range(k), T)
    if KIND == "decimal128":
        return pa.array([decimal.Decimal(i) for i in range(k)], T)
    if KIND == "list":
        return pa.array([[i] for i in range(k)], T)
    return pa.array([f"value-{i}-long-enough" for i in range(k)], pa.string()).cast(T)


keep = []


def exported(array):
    c = ArrowArray()
    array._export_to_c(C.addressof(c))
    keep.append(c)
    return C.pointer(c)


@RELEASE
def release(a):
    a.contents.release = RELEASE()  # the children stay alive until the script ends


children = (C.POINTER(ArrowArray) * 2)(exported(values(10)), exported(values(N)))
buffers = (C.c_void_p * 1)(None)
parent = ArrowArray(length=10, null_count=0, offset=0, n_buffers=1, n_children=2,
                    buffers=buffers, children=children, release=release)
schema = ArrowSchema()
pa.struct([pa.field("a", T), pa.field("b", T)])._export_to_c(C.addressof(schema))
batch = pa.RecordBatch._import_from_c(C.addressof(parent), C.addressof(schema))
print(f"pyarrow {pa.__version__}: {T} batch of {batch.num_rows} rows, "
      f"column lengths {[len(c) for c in batch.columns]}", flush=True)
try:
    frame = batch.to_pandas()
    print(f"to_pandas: {len(frame)} rows")
    del frame
except ValueError as e:
    print(f"refused: {e}")
del batch
