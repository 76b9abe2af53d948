"""arrowcert from Python: the command-line tool (its binary ships in this
package, under ``_bin/``) and an API to certify a library's Arrow PyCapsule
producer and consumer, or its DLPack exchange, from plain callables or an
adapter file (docs/PYTHON_ADAPTERS.md, "From Python and pytest").

The pytest plugin (``arrowcert.pytest_plugin``, registered through the
``pytest11`` entry point) wraps :func:`certify` in the ``arrowcert``
fixture. Only the standard library is imported here: the plugin loads in
every pytest session of the environment.
"""

from ._api import (
    CertificationFailed,
    Result,
    adapter,
    binary,
    certify,
)

__all__ = ["CertificationFailed", "Result", "adapter", "binary", "certify"]
