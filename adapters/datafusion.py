"""Apache DataFusion (Python) through the Arrow PyCapsule interface
(docs/PYTHON_ADAPTERS.md).

DataFusion imports what it is handed into an in-memory table of its own
(SessionContext.from_arrow) and exports a DataFrame by executing its plan:
`SELECT *` over that table, streamed through its own __arrow_c_stream__.
"""
import datafusion

NAME = f"datafusion {datafusion.__version__} (PyCapsule)"


def _frame(data):
    ctx = datafusion.SessionContext()
    # from_arrow reads the data into DataFusion's own memory table; the
    # DataFrame is a plan over it (cache() executes it once, so nothing
    # refers to `data` afterwards).
    return ctx.from_arrow(data).cache()


def load(data):
    return _frame(data)


def read(data):
    return _frame(data)
