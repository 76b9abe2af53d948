"""Arrow C++ 26.0.1's IPC writer (pyarrow here; the arrow-cpp consumer
plugin writes what it read with it) keeps the offsets of a zero-length
string/binary array as they are: an array of length 0 whose one offset is 4
is written as offsets [4] with an empty values buffer. Arrow C++ reads it
back and its own ValidateFull accepts it; arrow-rs's IPC reader (the one
arrowcert decodes a consumer's output with, harness/src/sdk/ipc.rs) refuses
it: "First offset 4 of Utf8 is larger than values length 0".

    pip install pyarrow==26.0.1
    python reports/repro/pyarrow_ipc_zero_length_first_offset.py

Columnar.rst only recommends the normalization ("When serializing this
layout, we recommend normalizing the offsets to start at 0"), and a
zero-length array has no value whose location the offset gives, so this is
not a MUST broken by Arrow C++: the arrow-cpp "IPC stream: ... First offset
N ... is larger than values length 0" errors of the varied:garbage cases are
arrowcert's reader being stricter than the spec. For length > 0 the writer
normalizes (offsets [0, 0, 0] for two empty values after offset 4). Exits 1
when the written offsets of the zero-length array are not normalized.
"""
import io

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc


def written(array):
    sink = io.BytesIO()
    batch = pa.record_batch({"c": array})
    with ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    back = ipc.open_stream(sink.getvalue()).read_all().column(0).chunk(0)
    back.validate(full=True)
    offsets = np.frombuffer(back.buffers()[1], np.int32)[: len(back) + 1].tolist()
    data = back.buffers()[2]
    return offsets, 0 if data is None else data.size


def build(length, offsets, data):
    buffers = [None, pa.py_buffer(np.array(offsets, np.int32).tobytes()), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.string(), length, buffers)


print(f"pyarrow {pa.__version__}")
zero = written(build(0, [4], b"abcd"))
two = written(build(2, [4, 4, 4], b"abcd"))
print(f"length 0, offsets [4]:       written offsets {zero[0]}, values {zero[1]} bytes")
print(f"length 2, offsets [4, 4, 4]: written offsets {two[0]}, values {two[1]} bytes")
raise SystemExit(1 if zero[0][0] != 0 else 0)
