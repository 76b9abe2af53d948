"""arro3-core (arrow-rs inside; DataFusion, arrow-rs too, fails the same
harness cases) hands a zero-length binary array whose one offset is 2 back
with offsets [2] and an empty data buffer at the dangling address 0x80
(arrow-rs's empty buffer). No harness: pyarrow builds the input and reads
arro3's export.

    pip install arro3-core pyarrow==26.0.1
    python reports/repro/arro3_zero_length_first_offset.py

The C data interface: "The producer MUST ensure that each contiguous buffer
is large enough to represent length + offset values": offset + length is
0 here, so no data byte is needed, and the offsets recommendation
(Columnar.rst: "we recommend normalizing the offsets to start at 0") is
not a MUST. arrowcert's array.layout.lengths asks the data buffer for
offsets[offset + length] = 2 bytes even when no slot exists
(harness/src/inspect/validate/binary.rs, `required` is the last offset):
its error on the arro3 and DataFusion `varied:garbage` cases is the
harness's strictness, not the library's. Arrays of length > 0 keep their
2 data bytes. Exits 1 when the zero-length array comes back with offsets
past an empty data buffer (the behaviour in question).
"""
import arro3.core as a3
import numpy as np
import pyarrow as pa

column = pa.Array.from_buffers(
    pa.binary(), 2, [None, pa.py_buffer(np.array([2, 2, 2], np.int32).tobytes()), pa.py_buffer(b"xx")])
print(f"arro3-core {a3.__version__}, pyarrow {pa.__version__}")
past = False
for name, array in (("length 2", column), ("length 1", column.slice(1)), ("length 0", column.slice(2))):
    back = pa.record_batch(a3.RecordBatch.from_arrow(pa.record_batch({"c": array}))).column(0)
    offsets = np.frombuffer(back.buffers()[1], np.int32)[back.offset: back.offset + len(back) + 1].tolist()
    data = back.buffers()[2]
    size, address = (0, 0) if data is None else (data.size, data.address)
    print(f"{name}: offsets {offsets}, data {size} bytes at {address:#x}")
    past |= len(back) == 0 and offsets[-1] > size
raise SystemExit(1 if past else 0)
