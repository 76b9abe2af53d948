# nanoarrow (Python) imports a struct array of length 3 whose children are
# longer (5), which the C data interface allows; to_pylist should give the
# struct's 3 rows.
import numpy as np
import pyarrow as pa
import nanoarrow as na

for child in (pa.array(np.array([1, 2, 3, 4, 5], np.float16)),
              pa.UnionArray.from_sparse(pa.array([0] * 5, pa.int8()), [pa.array([1, 2, 3, 4, 5])]),
              pa.array([1, 2, 3, 4, 5], pa.int64())):
    struct = pa.StructArray.from_buffers(pa.struct([("x", child.type)]), 3, [None], children=[child])
    a = na.Array(struct)
    print(na.__version__, child.type, "length", len(a), "to_pylist rows", len(a.to_pylist()), a.to_pylist())
