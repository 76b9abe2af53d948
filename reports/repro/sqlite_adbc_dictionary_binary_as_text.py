"""SQLite's ADBC driver 1.13.0 reads back as a string column (not UTF-8)
what it ingested from a dictionary-encoded fixed_size_binary column: the
bytes go in as TEXT, and the query's result is a string array holding
bytes that are not UTF-8. The same values not dictionary-encoded (or as
binary) come back as binary. pyarrow builds the input:

    pip install adbc-driver-sqlite==1.13.0 pyarrow==26.0.1
    python reports/repro/sqlite_adbc_dictionary_binary_as_text.py

Columnar.rst: "the String (and LargeString) types are ... UTF-8 encoded";
the harness's `array.utf8.valid` error on
`gen/shape:extension-storage~col:31` (a dictionary<fixed_size_binary[3]>
extension storage column). Exits 1 when what comes back is not valid.
"""
import adbc_driver_sqlite
import adbc_driver_sqlite.dbapi as sqlite
import pyarrow as pa

values = pa.array([b"\xff\x80a", b"abc", None], pa.binary(3))
CASES = {
    "fixed_size_binary[3]": values,
    "dictionary<fixed_size_binary[3]>": pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, 0], pa.int32()), values),
    "binary": values.cast(pa.binary()),
}

print(f"adbc_driver_sqlite {adbc_driver_sqlite.__version__}, pyarrow {pa.__version__}")
invalid = 0
for name, column in CASES.items():
    with sqlite.connect() as conn:
        cur = conn.cursor()
        cur.adbc_ingest("t", pa.table({"c": column}), mode="create")
        cur.execute("SELECT * FROM t")
        back = cur.fetch_arrow_table()
    try:
        back.validate(full=True)
        verdict = f"valid {back.column(0).to_pylist()}"
    except pa.ArrowInvalid as e:
        invalid += 1
        verdict = f"INVALID: {str(e).splitlines()[0][:80]}"
    print(f"{name:34} -> {back.schema.field(0).type}: {verdict}")
raise SystemExit(1 if invalid else 0)
