# nanoarrow (Python) to_pylist of negative decimal128/decimal256 values.
from decimal import Decimal
import pyarrow as pa
import nanoarrow as na

for t in (pa.decimal128(5, 1), pa.decimal256(5, 1)):
    arr = pa.array([Decimal("-1.5"), Decimal("2.5")], t)
    print(na.__version__, t, "sent", arr.to_pylist(), "nanoarrow to_pylist", na.Array(arr).to_pylist())
