# A map array whose entries struct has a non-zero offset over its children
# (valid in the C data interface: the offset is "the number of items from
# the physical start of the buffers"), imported by pyarrow through
# pa.array(capsule): to_pylist reads the keys and items from the
# children's start, ignoring the entries' offset.
import pyarrow as pa

keys = pa.array(["x", "k0", "k1"])
items = pa.array([99, None, 1], pa.int64())
entries_type = pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.int64())])
entries = pa.StructArray.from_buffers(entries_type, 2, [None], children=[keys, items], offset=1)
print("entries", entries.to_pylist())
offsets = pa.array([0, 2], pa.int32())
m = pa.Array.from_buffers(pa.map_(pa.string(), pa.int64()), 1, [None, offsets.buffers()[1]], children=[entries])
print("built map", m.to_pylist())

class Capsules:
    def __arrow_c_array__(self, requested_schema=None):
        return m.__arrow_c_array__()

imported = pa.array(Capsules())
print("pyarrow", pa.__version__, "imported to_pylist", imported.to_pylist())
print("imported keys", imported.keys.to_pylist(), "items", imported.items.to_pylist())
