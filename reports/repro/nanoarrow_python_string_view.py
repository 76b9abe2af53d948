"""nanoarrow (Python) 0.9.0: exporting an Array of string_view as a stream
corrupts the heap. No harness, no pyarrow:

    pip install nanoarrow==0.9.0 && python reports/repro/nanoarrow_python_string_view.py

prints "built" and then dies in Array.__arrow_c_stream__ (glibc:
"realloc(): invalid pointer", SIGABRT; other runs SIGSEGV or SIGBUS). With
na.string() instead of na.string_view() it prints "exported".
"""
import nanoarrow as na

a = na.Array(na.c_array(["a", "bbbbbbbbbbbbbbbbbbbbbbbb"], na.string_view()))
print("built", flush=True)
cap = a.__arrow_c_stream__()
print("exported", flush=True)
