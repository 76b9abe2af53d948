"""The ``arrowcert`` command of an installed wheel: runs the bundled binary
with ``py:`` adapters defaulting to this interpreter (the environment
arrowcert was installed into), unless ``--python`` or ``ARROWCERT_PYTHON``
says otherwise."""

import os
import sys

from ._api import binary, environment


def main() -> None:
    try:
        exe = binary()
    except FileNotFoundError as e:
        # One line and the exit code of bad input, not a traceback.
        print(e, file=sys.stderr)
        sys.exit(2)
    # exec: the binary's exit code and signals are the command's own.
    os.execve(exe, [exe, *sys.argv[1:]], environment())


if __name__ == "__main__":
    main()
