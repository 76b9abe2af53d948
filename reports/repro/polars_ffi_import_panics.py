"""polars 2.1.0 panics (pyo3_runtime.PanicException) importing Arrow data
through the PyCapsule interface where it should raise a clean error. No
harness: pyarrow (nanoarrow for the two interval types pyarrow lacks)
builds the input, polars reads it.

    pip install polars==2.1.0 pyarrow==26.0.1 nanoarrow==0.9.0
    python reports/repro/polars_ffi_import_panics.py

Two kinds, each printed as "PANIC" with the path (stream: an object with
only `__arrow_c_stream__`; array: one with only `__arrow_c_array__`):

- list_view ("+vl"), large_list_view ("+vL"), run-end encoded ("+r"): the
  stream path raises ValueError("The datatype ... is still not supported"),
  a clean refusal; the array path panics with the same message
  (`polars-python/src/series/import.rs:70`, `Result::unwrap()` on `Err`).
- a decimal with a negative scale ("Decimal scale is not a valid integer"):
  ValueError on the stream path, a panic on the array path.
- decimal256 / a decimal of precision > 38 ("operator does not support
  primitive `Int256`", polars-arrow/src/ffi/array.rs:28), day-time interval
  (`DaysMs`), month-day-nano interval ("could not import from
  `month_day_nano_interval`", field.rs:326, `unwrap()`), year-month interval
  and sparse/dense unions ("Arrow datatype ... not supported by Polars",
  field.rs:333): both paths panic.

A panic is not a refusal: docs/PYTHON_ADAPTERS.md counts a PanicException as
the library's error. Exits 1 when any case panics.
"""
import decimal
import os

os.environ.setdefault("RUST_BACKTRACE", "0")
import polars as pl  # noqa: E402
import pyarrow as pa  # noqa: E402


class Stream:
    def __init__(self, table):
        self.table = table

    def __arrow_c_stream__(self, requested_schema=None):
        return self.table.__arrow_c_stream__(requested_schema)


class Array:
    def __init__(self, batch):
        self.batch = batch

    def __arrow_c_array__(self, requested_schema=None):
        return self.batch.__arrow_c_array__(requested_schema)


def interval(kind):
    # pyarrow has no year-month or day-time interval type: nanoarrow builds
    # a one-column batch ("tiM": int32 months; "tiD": int32 days + int32 ms).
    import nanoarrow as na

    t, values = (na.interval_months(), [1, 2]) if kind == "M" else (na.interval_day_time(), [1, 2, 3, 4])
    child = na.c_array_from_buffers(t, 2, [None, na.c_buffer(values, na.int32())])
    batch = na.c_array_from_buffers(na.struct({"c": t}), 2, [None], children=[child])
    return na.c_array_stream(batch), batch


CASES = {
    "list_view": pa.array([[1], [2, 3]], type=pa.list_view(pa.int32())),
    "large_list_view": pa.array([[1], [2, 3]], type=pa.large_list_view(pa.int32())),
    "run_end_encoded": pa.RunEndEncodedArray.from_arrays([2, 3], pa.array([1, 2])),
    "decimal256(5,2)": pa.array([decimal.Decimal("1.5")], type=pa.decimal256(5, 2)),
    "month_day_nano": pa.array([pa.MonthDayNano([1, 2, 3])], type=pa.month_day_nano_interval()),
    "decimal128(20,-2)": pa.array([decimal.Decimal("-300")], type=pa.decimal128(20, -2)),
    "sparse_union": pa.UnionArray.from_sparse(
        pa.array([0, 1], type=pa.int8()), [pa.array([1, 2]), pa.array(["a", "b"])]),
    "dense_union": pa.UnionArray.from_dense(
        pa.array([0, 1], type=pa.int8()), pa.array([0, 0], type=pa.int32()),
        [pa.array([1]), pa.array(["a"])]),
}


def main():
    print(f"polars {pl.__version__}, pyarrow {pa.__version__}")
    panics = 0
    inputs = {}
    for name, arr in CASES.items():
        table = pa.table({"c": arr})
        inputs[name] = (Stream(table), Array(table.to_batches()[0]))
    inputs["interval_year_month"] = interval("M")
    inputs["interval_day_time"] = interval("D")
    for name, (stream, array) in inputs.items():
        for path, obj in (("stream", stream), ("array", array)):
            try:
                pl.DataFrame(obj)
                verdict = "read"
            except BaseException as e:  # PanicException derives from BaseException
                kind = type(e).__name__
                if kind == "PanicException":
                    panics += 1
                    verdict = f"PANIC: {str(e).splitlines()[0][:110]}"
                else:
                    verdict = f"refused cleanly ({kind}: {str(e)[:70]})"
            print(f"{name:18} {path:6} {verdict}")
    print(f"{panics} panic(s)")
    raise SystemExit(1 if panics else 0)


if __name__ == "__main__":
    main()
