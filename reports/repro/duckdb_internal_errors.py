"""DuckDB 2.0.1 fails with INTERNAL errors (its own assertions: "This error
signals an assertion failure within DuckDB") on two kinds of valid Arrow
input read through the PyCapsule stream interface. pyarrow builds the
input, DuckDB reads it:

    pip install duckdb==2.0.1 pyarrow==26.0.1
    python reports/repro/duckdb_internal_errors.py

- a decimal with a negative scale (decimal32/64/128; format "d:7,-2,32"):
  "Information loss on integer cast: value 18446744073709551614 outside of
  target range [0, 255]" (the scale -2 cast to an unsigned byte). The C
  data interface's format is "d:precision,scale[,bitWidth]" and
  Schema.fbs's Decimal has `scale: int` (Arrow C++ allows negative
  scales): a consumer that cannot hold one may refuse it, but an assertion
  failure is not a refusal.
- a dictionary whose values are a struct of a dictionary-encoded string
  (the integration suite's generated_nested_dictionary, field struct_dict):
  "VectorBuffer::ReserveInternal not supported for this vector type".

The same INTERNAL errors come through the ADBC driver (duckdb-adbc's bulk
ingestion, ADBC status 9). Exits 1 when any INTERNAL error shows.
"""
import decimal

import duckdb
import pyarrow as pa


class Stream:
    def __init__(self, table):
        self.table = table

    def __arrow_c_stream__(self, requested_schema=None):
        return self.table.__arrow_c_stream__(requested_schema)


def nested_dictionary():
    strings = pa.array(["a", "b", "a", None, "c"]).dictionary_encode()
    structs = pa.StructArray.from_arrays([strings], names=["s"])
    return pa.DictionaryArray.from_arrays(pa.array([0, 1, None, 4], pa.int8()), structs)


CASES = {
    "decimal32(7,-2)": pa.array([decimal.Decimal("100"), None], pa.decimal32(7, -2)),
    "decimal64(15,-1)": pa.array([decimal.Decimal("10"), None], pa.decimal64(15, -1)),
    "decimal128(20,-2)": pa.array([decimal.Decimal("-300"), None], pa.decimal128(20, -2)),
    "decimal128(20,2) (control)": pa.array([decimal.Decimal("1.5"), None], pa.decimal128(20, 2)),
    "dictionary<struct<dictionary<string>>>": nested_dictionary(),
    "struct<dictionary<string>> (control)": nested_dictionary().dictionary,
}


def main():
    print(f"duckdb {duckdb.__version__}, pyarrow {pa.__version__}")
    internal = 0
    for name, arr in CASES.items():
        x = Stream(pa.table({"c": arr}))  # noqa: F841 (read by name below)
        try:
            rows = duckdb.connect().sql("select * from x").fetchall()
            verdict = f"read {rows}"
        except duckdb.Error as e:
            first = str(e).splitlines()[0]
            if "INTERNAL" in first:
                internal += 1
                verdict = f"INTERNAL: {first[:110]}"
            else:
                verdict = f"refused cleanly: {first[:110]}"
        print(f"{name:40} {verdict}")
    print(f"{internal} internal error(s)")
    raise SystemExit(1 if internal else 0)


if __name__ == "__main__":
    main()
