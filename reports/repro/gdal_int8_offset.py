"""GDAL (through pyogrio, no pyarrow) writes an int8 column of a sliced
record batch from the wrong rows: the array's offset is not applied.

    target/real/venv/bin/python reports/repro/gdal_int8_offset.py
"""
import sys

sys.modules["pyarrow"] = None  # GDAL's own importer and exporter only

import numpy as np  # noqa: E402
import arro3.core as a3  # noqa: E402
import pyogrio  # noqa: E402
from pyogrio.raw import open_arrow, write_arrow  # noqa: E402

values = np.arange(0, 30, 3, dtype="int8")  # 0, 3, 6, ..., 27
wide = np.arange(0, 30, 3, dtype="int32")
table = a3.Table.from_pydict({"i8": a3.Array.from_numpy(values), "i32": a3.Array.from_numpy(wide)})
sliced = table.slice(1, 4)  # rows 1..4: offset 1 in every column
print("sent i8 :", sliced.column("i8").to_numpy().tolist())
print("sent i32:", sliced.column("i32").to_numpy().tolist())
path = "/vsimem/offset.gpkg"
write_arrow(sliced, path, driver="GPKG", layer="t", geometry_type="Unknown")
with open_arrow(path, use_pyarrow=False, read_geometry=False) as (_meta, reader):
    back = a3.Table.from_arrow(reader)
print("read i8 :", back.column("i8").to_numpy().tolist())
print("read i32:", back.column("i32").to_numpy().tolist())
print("pyogrio", pyogrio.__version__, "GDAL", pyogrio.__gdal_version_string__)
