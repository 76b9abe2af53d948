#!/usr/bin/env bash
# The Python environment the adapter tests run in (harness/tests/python_adapters.rs):
# a venv over the machine's python3 under target/python-test/venv with the
# pinned nanoarrow Python package, the library docs/PYTHON_ADAPTERS.md's
# example certifies, SQLite's ADBC driver (harness/tests/adbc.rs), and NumPy
# and pyarrow for the DLPack tests (harness/tests/dlpack*.rs: pyarrow's
# wheel also carries a real dlpack.h for the layout proof). Idempotent. Needs python3 with pip, its headers and a
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
want="nanoarrow==$NANOARROW_PYTHON_VERSION adbc-driver-sqlite==$ADBC_DRIVER_SQLITE_VERSION numpy==$NUMPY_VERSION pyarrow==$PYARROW_VERSION array_api_strict==$ARRAY_API_STRICT_VERSION"
have=$("$VENV/bin/python" -m pip freeze 2>/dev/null | tr '\n' ' ')
for pkg in $want; do
    case " $have " in
        *" $pkg "*) ;;
        *) "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary :all: $want; break ;;
    esac
done
"$VENV/bin/python" -c "import nanoarrow, numpy, pyarrow, array_api_strict; print('setup-test-env: nanoarrow', nanoarrow.__version__, 'numpy', numpy.__version__, 'pyarrow', pyarrow.__version__, 'array-api-strict', array_api_strict.__version__)"
