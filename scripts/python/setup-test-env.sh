#!/usr/bin/env bash
# The Python environment the adapter tests run in (harness/tests/python_adapters.rs):
# a venv over the machine's python3 under target/python-test/venv with the
# pinned nanoarrow Python package, the library docs/PYTHON_ADAPTERS.md's
# example certifies, and SQLite's ADBC driver (harness/tests/adbc.rs). Idempotent. Needs python3 with pip, its headers and a
# shared libpython (the bridge embeds it), and PyPI.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../real/versions.env
source scripts/real/versions.env
PY=${PYTHON:-python3}
VENV=target/python-test/venv
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
want="nanoarrow==$NANOARROW_PYTHON_VERSION adbc-driver-sqlite==$ADBC_DRIVER_SQLITE_VERSION"
have=$("$VENV/bin/python" -m pip freeze 2>/dev/null | tr '\n' ' ')
for pkg in $want; do
    case " $have " in
        *" $pkg "*) ;;
        *) "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary :all: $want; break ;;
    esac
done
"$VENV/bin/python" -c "import nanoarrow; print('setup-test-env: nanoarrow', nanoarrow.__version__)"
