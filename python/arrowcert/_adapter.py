"""Callables as an adapter file (docs/PYTHON_ADAPTERS.md).

arrowcert runs adapters in an interpreter of its own (embedded in its
bridge, in worker processes), so a function object cannot be handed over:
the file written here imports each function by ``module:qualname``, with
the folder its module was imported from on ``sys.path``. That is the
constraint: a function defined at the top level of a module that sits in
a file (a test module is one), not a lambda, a nested function, or one
defined in ``__main__`` or at an interactive prompt.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Callable, Dict, Optional

TEMPLATE = '''"""Written by arrowcert (arrowcert._adapter): the functions below are
imported by name from the modules that define them."""
import importlib
import sys

for _folder in reversed({paths!r}):
    if _folder not in sys.path:
        sys.path.insert(0, _folder)


def _function(module, qualname):
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


NAME = {name!r}
'''


def spec_of(fn: Callable) -> tuple:
    """``(module, qualname, folder)`` that import ``fn`` again, or
    ValueError saying why it cannot be."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    label = getattr(fn, "__name__", repr(fn))
    if not module or not qualname:
        raise ValueError(f"arrowcert: {fn!r} has no module and name to import it by")
    if "<lambda>" in qualname or "<locals>" in qualname:
        raise ValueError(
            f"arrowcert: {module}:{qualname} cannot be imported by name (a lambda or a "
            "nested function): define it at the top level of a module"
        )
    if module == "__main__":
        raise ValueError(
            f"arrowcert: {label} is defined in __main__, which the adapter's interpreter "
            "cannot import: define it in a module file"
        )
    mod = sys.modules.get(module) or importlib.import_module(module)
    obj = mod
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if obj is not fn:
        raise ValueError(
            f"arrowcert: {module}:{qualname} does not lead back to {label}: it must be "
            "importable by that name"
        )
    file = getattr(mod, "__file__", None)
    if not file:
        raise ValueError(f"arrowcert: module {module} has no file to import it from")
    # The folder the module's top-level package is imported from: up one
    # level per dot of its name (one more for a package's __init__.py).
    folder = Path(file).resolve().parent
    depth = module.count(".") + (1 if Path(file).stem == "__init__" else 0)
    for _ in range(depth):
        folder = folder.parent
    return module, qualname, str(folder)


def write_adapter(path: Path, functions: Dict[str, Optional[Callable]], name: Optional[str]) -> Path:
    """Writes an adapter at ``path`` defining each given function by
    importing it; returns ``path``."""
    given = {k: f for k, f in functions.items() if f is not None}
    if not given:
        raise ValueError("arrowcert: an adapter needs at least one function")
    specs = {k: spec_of(f) for k, f in given.items()}
    folders = []
    for _, _, folder in specs.values():
        if folder not in folders:
            folders.append(folder)
    if name is None:
        name = " + ".join(f"{m}:{q}" for m, q, _ in specs.values())
    text = TEMPLATE.format(paths=folders, name=name)
    for attr, (module, qualname, _) in specs.items():
        text += f"{attr} = _function({module!r}, {qualname!r})\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
