"""polars 2.1.0 exports a column of Arrow's null type ("n") with n_buffers 1;
the null layout has no buffers. pyarrow builds the input, nanoarrow reads
polars' export without validating it:

    pip install polars==2.1.0 pyarrow==26.0.1 nanoarrow==0.9.0
    python reports/repro/polars_null_n_buffers.py

The C data interface: "n_buffers: Mandatory. The number of physical
buffers backing this array. The number of buffers is a function of the data
type, as described in the Columnar format specification"; Columnar.rst,
Null Layout: "In this case no memory buffers are allocated." Prints the
format and n_buffers of each exported null column (whole and at an
offset) and exits 1 when n_buffers is not 0.
"""
import nanoarrow as na
import polars as pl
import pyarrow as pa


class Array:
    def __init__(self, batch):
        self.batch = batch

    def __arrow_c_array__(self, requested_schema=None):
        return self.batch.__arrow_c_array__(requested_schema)


def main():
    print(f"polars {pl.__version__}, pyarrow {pa.__version__}, nanoarrow {na.__version__}")
    wrong = 0
    nulls = pa.array([None] * 3, type=pa.null())
    for name, arr in (("null[3]", nulls), ("null[3] at offset 1", nulls.slice(1))):
        frame = pl.DataFrame(Array(pa.record_batch({"c": arr})))
        for batch in na.c_array_stream(frame):
            child = batch.child(0)
            print(f"{name}: format {child.schema.format!r}, length {child.length}, "
                  f"n_buffers {child.n_buffers}")
            wrong += child.n_buffers != 0
    raise SystemExit(1 if wrong else 0)


if __name__ == "__main__":
    main()
