"""nanoarrow (Python) 0.9.0 crashes exporting a string_view array it
imported: na.Array(batch) imports it, and its __arrow_c_stream__ (what
pa.table(...) calls) dies in c_array_shallow_copy (valgrind, through the
harness: "Use of uninitialised value of size 8 at
__pyx_f_9nanoarrow_6_utils_c_array_shallow_copy", reached from
CMaterializedArrayStream.__arrow_c_stream__). pyarrow builds the input:

    pip install nanoarrow==0.9.0 pyarrow==26.0.1
    python reports/repro/nanoarrow_python_view_data_buffers.py 0   # inline values: SIGBUS
    python reports/repro/nanoarrow_python_view_data_buffers.py 1   # one data buffer: SIGBUS
    python reports/repro/nanoarrow_python_view_data_buffers.py 2   # two data buffers: SIGBUS

(each of three runs here; exit 0 only if the values come back.) This is the
harness's gen/81 and gen/87: a string_view nested in a list_view of
fixed_size_list, and in a dense union. Their plain cases pass because the
one row's list is empty (the string_view child holds nothing the export
walks); the varied encoding's `garbage` and `variadic-buffers` variations
give that child data buffers, and the export crashes.
"""
import sys

import nanoarrow as na
import pyarrow as pa

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
value = "x" * 20 if n > 0 else "short"
chunks = [pa.array([value, None, "s"], pa.string_view()) for _ in range(max(n, 1))]
sv = pa.concat_arrays(chunks) if len(chunks) > 1 else chunks[0]
print(f"nanoarrow {na.__version__}: {len(sv.buffers()) - 2} data buffer(s)", flush=True)
got = na.Array(pa.record_batch([sv], names=["f"]))
print("imported", flush=True)
out = pa.table(got)
same = out.column(0).to_pylist() == sv.to_pylist()
print(f"exported and read back: {out.num_rows} rows, values {'kept' if same else 'CHANGED'}")
sys.exit(0 if same else 1)
