"""chDB holds more memory after every query, whether or not the result is
exported through the Arrow C stream interface: the growth arrowcert's
release repetitions saw on chdb (schema/stream.release.frees) is the
query's, not the release's.

    ARROWCERT_REAL_CHDB=1 just real
    target/real/venv/bin/python reports/repro/chdb_query_growth.py
"""
import gc

import arro3.core as a3
import chdb
import numpy as np

table = a3.Table.from_pydict({"x": a3.Array.from_numpy(np.array([1, 2, 3], dtype="int64"))})


def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096


def once(export):
    data = table  # noqa: F841 (Python(data) names it)
    res = chdb.query("SELECT * FROM Python(data)", "Arrow")
    if export:
        cap = res.__arrow_c_stream__()  # exported, then released unread
        del cap
    del res


for export in (False, True):
    for _ in range(100):
        once(export)
    gc.collect()
    before = rss()
    for _ in range(1000):
        once(export)
    gc.collect()
    grew = (rss() - before) / 1000
    print(f"chdb {chdb.__version__}, {'query + export + release' if export else 'query only'}: "
          f"{grew:.0f} bytes more resident per query")
