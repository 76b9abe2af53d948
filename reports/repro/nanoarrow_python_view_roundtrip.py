"""nanoarrow (Python) 0.9.0 crashes importing a binary_view or string_view
array: na.Array(data) of an Arrow PyCapsule (what the harness's py: adapter
does in `load` and `read`) dies inside na.Array itself (faulthandler:
nanoarrow/array.py:163 -> c_array_stream.py:92, where it wraps what it
imported as a stream). pyarrow builds the input:

    pip install nanoarrow==0.9.0 pyarrow==26.0.1
    python reports/repro/nanoarrow_python_view_roundtrip.py binary_view   # SIGSEGV
    python reports/repro/nanoarrow_python_view_roundtrip.py string_view   # SIGSEGV
    python reports/repro/nanoarrow_python_view_roundtrip.py string        # exported

The same heap damage as nanoarrow_python_string_view.py (which needs no
pyarrow), here for both view types: dies before printing "imported"
(SIGSEGV in every one of three runs each; SIGABRT or SIGBUS in the
harness's runs).
"""
import sys

import nanoarrow as na
import pyarrow as pa

kind = sys.argv[1] if len(sys.argv) > 1 else "binary_view"
arrow_type = {"binary_view": pa.binary_view(), "string_view": pa.string_view(), "string": pa.string()}[kind]
values = ["a", "bbbbbbbbbbbbbbbbbbbbbbbbbbb", None]
if kind == "binary_view":
    values = [v.encode() if v else v for v in values]
array = na.Array(pa.array(values, arrow_type))
print(f"nanoarrow {na.__version__}: {kind} imported", flush=True)
for _ in na.c_array_stream(array.__arrow_c_stream__()):
    pass
print("exported")
