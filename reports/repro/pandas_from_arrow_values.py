"""pandas 3.1.1's DataFrame.from_arrow does not keep the values of integer
columns with nulls nor of the smallest duration: what it read, handed back
as Arrow (pandas' own __arrow_c_stream__), differs from what it was given.
pyarrow builds the input:

    pip install pandas==3.1.1 pyarrow==26.0.1
    python reports/repro/pandas_from_arrow_values.py

- an int8/int32 column with a null comes back as float64 (3 -> 3.0), also
  inside a list (list<int32> -> list<double>): pandas' documented NumPy
  conversion ("integer data with missing values is cast to float"). The
  values are numerically equal; the harness compares values with their
  kind (Int vs Float), so it counts this as consumer.read.values, not as a
  type flavour (reports/FINDINGS.md, "How data differences are judged").
- duration[ns] -9223372036854775808 (int64 min) comes back as null: it is
  pandas' NaT sentinel, so a valid value turns into a null.
- a map column comes back as list<list<int64>>: pandas holds each entry as
  a (key, value) tuple, and pyarrow infers a list for it (the harness sees
  a list where an entry struct was).

Exits 1 when any column differs after the round trip.
"""
import pandas as pd
import pyarrow as pa

INPUT = pa.table({
    "i8": pa.array([0, 3, None], pa.int8()),
    "list_i32": pa.array([[-2147483648, 2147483647], None, [1, None]], pa.list_(pa.int32())),
    "duration": pa.array([-9223372036854775808, 0, None], pa.duration("ns")),
    "map": pa.array([[(-4, -7)], [(-4, -93), (-1, 52)], None], pa.map_(pa.int8(), pa.int16())),
})


def main():
    print(f"pandas {pd.__version__}, pyarrow {pa.__version__}")
    frame = pd.DataFrame.from_arrow(INPUT)
    back = pa.table(frame)  # pandas' __arrow_c_stream__
    differs = 0
    for name in INPUT.column_names:
        given, got = INPUT.column(name), back.column(name)
        same = given.type == got.type and given.to_pylist() == got.to_pylist()
        differs += not same
        print(f"{name}: {given.type} {given.to_pylist()} -> {got.type} {got.to_pylist()}"
              f"{'' if same else '  <- differs'}")
    raise SystemExit(1 if differs else 0)


if __name__ == "__main__":
    main()
