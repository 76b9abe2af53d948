"""GDAL's own C stream implementation, through pyogrio (docs/PYTHON_ADAPTERS.md).

    arrowcert certify --producer py:adapters/pyogrio.py --consumer py:adapters/pyogrio.py

GDAL keeps vector data in its own model (OGR features in a dataset), so both
sides go through a dataset: an in-memory GeoPackage (/vsimem/, GDAL's own
virtual file system, nothing on disk). Data goes in through GDAL's importer
of an ArrowArrayStream (pyogrio.raw.write_arrow: OGRLayer::WriteArrowBatch)
and comes out through GDAL's exporter (pyogrio.raw.open_arrow with
use_pyarrow=False: OGRLayer::GetArrowStream), with no pyarrow in the path
(both work with pyarrow blocked; it is not blocked here, because a worker
running a pair shares one interpreter with the other library, which may
need it). A type OGR has no field type for is refused by GDAL with its
message; OGR's field types are coarser than Arrow's (no unsigned 64-bit
integers, for one: they come back as doubles), so values can come back in
another type.
"""
import itertools

import pyogrio
from pyogrio.raw import open_arrow, write_arrow

NAME = f"pyogrio {pyogrio.__version__} (GDAL {pyogrio.__gdal_version_string__})"

_names = itertools.count()


class _Dataset:
    """What GDAL exported, as the object the harness takes its stream from.

    GDAL's stream is valid only while its dataset is open ("the stream must
    be released before the dataset is closed"), and the harness uses the
    stream after this object is gone, so the dataset stays open until the
    next load or read (the case that used it has ended by then)."""

    def __init__(self, path):
        self._path = path
        self._cm = open_arrow(path, use_pyarrow=False, read_geometry=False)
        _meta, self._reader = self._cm.__enter__()

    def __arrow_c_stream__(self, requested_schema=None):
        return self._reader.__arrow_c_stream__(requested_schema)

    def close(self):
        self._cm.__exit__(None, None, None)
        pyogrio.vsi_unlink(self._path)


_open = []


def _dataset(data):
    while _open:
        _open.pop().close()
    path = f"/vsimem/arrowcert/{next(_names)}.gpkg"
    write_arrow(data, path, driver="GPKG", layer="t", geometry_type="Unknown")
    ds = _Dataset(path)
    _open.append(ds)
    return ds


def load(data):
    return _dataset(data)


def read(data):
    return _dataset(data)
