"""The ``arrowcert`` command of an installed wheel: runs the bundled binary
with ``py:`` adapters defaulting to this interpreter (the environment
arrowcert was installed into), unless ``--python`` or ``ARROWCERT_PYTHON``
says otherwise."""

import os
import sys

from ._api import binary, environment


def main() -> None:
    exe = binary()
    # exec: the binary's exit code and signals are the command's own.
    os.execve(exe, [exe, *sys.argv[1:]], environment())


if __name__ == "__main__":
    main()
