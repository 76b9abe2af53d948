"""pandas through the Arrow PyCapsule interface (docs/PYTHON_ADAPTERS.md).

pandas converts to and from Arrow with pyarrow: its verdicts are pandas'
conversion plus pyarrow's (Arrow C++'s) export and import.
"""
import pandas as pd

NAME = f"pandas {pd.__version__} (PyCapsule)"


def load(data):
    return pd.DataFrame.from_arrow(data)


def read(data):
    return pd.DataFrame.from_arrow(data)
