"""pyarrow 26.0.1 builds a string array holding bytes that are not UTF-8
when it infers the type of nested Python lists mixing str and bytes:
pa.array([["k", b"\\xff\\x80"]]) is list<string>, and its own
validate(full=True) then fails ("Invalid UTF8 sequence"). At the top level
(pa.array(["k", b"\\xff\\x80"])) it infers binary. pandas hands a map
column back this way: from_arrow makes map<string, binary_view> a column of
lists of (key, value) tuples, and pa.table(frame) infers
list<list<string>> with the value bytes inside (the pandas consumer's
`array.utf8.valid` errors on `gen/2`). pyarrow alone:

    pip install pyarrow==26.0.1 pandas==3.1.1
    python reports/repro/pyarrow_infer_str_bytes_invalid_utf8.py

Columnar.rst: "the String (and LargeString) types are ... UTF-8 encoded".
Exits 1 when an inferred string array is not valid UTF-8.
"""
import pandas as pd
import pyarrow as pa

CASES = {
    "pa.array([['k', b'\\xff\\x80']])": lambda: pa.array([["k", b"\xff\x80"]]),
    "pa.array([[('k', b'\\xff\\x80')]])": lambda: pa.array([[("k", b"\xff\x80")]]),
    "pa.array(['k', b'\\xff\\x80'])": lambda: pa.array(["k", b"\xff\x80"]),
    "pandas map<string, binary> round trip": lambda: pa.table(pd.DataFrame.from_arrow(pa.table({
        "m": pa.array([[("k0", b"\xe5\x90\x8d"), ("k1", b"\xff\x80")]],
                      pa.map_(pa.string(), pa.binary()))}))).column(0).combine_chunks(),
}

print(f"pyarrow {pa.__version__}, pandas {pd.__version__}")
invalid = 0
for name, build in CASES.items():
    array = build()
    try:
        array.validate(full=True)
        verdict = "valid"
    except pa.ArrowInvalid as e:
        invalid += 1
        verdict = f"INVALID: {str(e).splitlines()[0][:90]}"
    print(f"{name:40} {array.type}: {verdict}")
raise SystemExit(1 if invalid else 0)
