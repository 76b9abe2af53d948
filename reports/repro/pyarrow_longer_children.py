# pyarrow imports a record batch (a struct ArrowArray of length 3) whose
# child is longer (5): the C data interface allows children longer than
# their parent; the batch's logical column is the first 3 values.
import pyarrow as pa
child = pa.array([1, 2, 3, 4, 5], pa.int64())
struct = pa.StructArray.from_buffers(pa.struct([("x", pa.int64())]), 3, [None], children=[child])
print("struct length", len(struct), "child length", len(struct.field(0)), struct.to_pylist())

class Capsules:
    def __arrow_c_array__(self, requested_schema=None):
        return struct.__arrow_c_array__()

rb = pa.record_batch(Capsules())
print("pyarrow", pa.__version__, "num_rows", rb.num_rows, "column length", len(rb.column(0)))
print("column to_pylist", rb.column(0).to_pylist())
print("rows to_pylist", rb.to_pylist())
try:
    rb.validate(full=True); print("validate: ok")
except Exception as e:
    print("validate:", e)
