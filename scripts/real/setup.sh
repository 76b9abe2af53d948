#!/usr/bin/env bash
# Installs the real libraries the matrix certifies into a project-local
# environment under target/real/ (never committed, never outside the
# checkout): a Python virtual environment with pinned pyarrow (whose wheel
# also carries Arrow C++'s headers and libarrow), polars, duckdb, and the
# Python libraries adapters/*.py certify (nanoarrow, arro3-core, pandas,
# datafusion, pyogrio; chdb when asked for), and
# nanoarrow's source distribution. Idempotent: a second run only checks.
#
# Needs python3 with pip and network access to PyPI. Versions live in
# scripts/real/versions.env so the reports can quote them.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=versions.env
source scripts/real/versions.env
REAL=${ARROWCERT_REAL_DIR:-target/real}
PY=${PYTHON:-python3}
mkdir -p "$REAL"
if [ ! -x "$REAL/venv/bin/python" ]; then
    echo "setup: creating $REAL/venv"
    "$PY" -m venv "$REAL/venv"
fi
VPY="$REAL/venv/bin/python"
want="pyarrow==$PYARROW_VERSION polars==$POLARS_VERSION duckdb==$DUCKDB_VERSION nlohmann-json==$NLOHMANN_JSON_VERSION nanoarrow==$NANOARROW_PYTHON_VERSION arro3-core==$ARRO3_CORE_VERSION pandas==$PANDAS_VERSION adbc-driver-sqlite==$ADBC_DRIVER_SQLITE_VERSION adbc-driver-postgresql==$ADBC_DRIVER_POSTGRESQL_VERSION datafusion==$DATAFUSION_VERSION pyogrio==$PYOGRIO_VERSION numpy==$NUMPY_VERSION array_api_strict==$ARRAY_API_STRICT_VERSION jax==$JAX_VERSION jaxlib==$JAX_VERSION"
have=$("$VPY" -m pip freeze 2>/dev/null | tr '\n' ' ')
missing=0
for pkg in $want; do
    case " $have " in *" $pkg "*) ;; *) missing=1 ;; esac
done
# chDB (adapters/chdb.py, producer only) is half a gigabyte and not in the
# default matrix: installed when asked for (ARROWCERT_REAL_CHDB=1 just real).
if [ "${ARROWCERT_REAL_CHDB:-0}" = 1 ]; then
    want="$want chdb==$CHDB_VERSION"
    case " $have " in *" chdb==$CHDB_VERSION "*) ;; *) missing=1 ;; esac
fi
if [ "$missing" = 1 ]; then
    echo "setup: installing $want"
    "$VPY" -m pip install --quiet --disable-pip-version-check --only-binary :all: $want
fi
sdist="$REAL/nanoarrow-$NANOARROW_VERSION.tar.gz"
if [ ! -f "$sdist" ]; then
    echo "setup: fetching nanoarrow $NANOARROW_VERSION sdist"
    "$VPY" -m pip download --quiet --disable-pip-version-check --no-deps \
        --no-binary nanoarrow "nanoarrow==$NANOARROW_VERSION" -d "$REAL"
fi
echo "$NANOARROW_SDIST_SHA256  $sdist" | sha256sum -c --quiet -
if [ ! -d "$REAL/nanoarrow-src" ]; then
    tmp=$(mktemp -d "$REAL/.nanoarrow.XXXXXX")
    tar -xzf "$sdist" -C "$tmp" "nanoarrow-$NANOARROW_VERSION/subprojects"
    mv "$tmp/nanoarrow-$NANOARROW_VERSION/subprojects" "$REAL/nanoarrow-src"
    rm -rf "$tmp"
fi
"$VPY" - <<'PYEOF'
import pyarrow, polars, duckdb, nanoarrow, arro3.core, pandas, datafusion, pyogrio, numpy, array_api_strict, jax
print(f"setup: pyarrow {pyarrow.__version__} ({pyarrow.get_library_dirs()[0]}), polars {polars.__version__}, duckdb {duckdb.__version__}, nanoarrow {nanoarrow.__version__}, arro3-core {arro3.core.__version__}, pandas {pandas.__version__}, datafusion {datafusion.__version__}, pyogrio {pyogrio.__version__} (GDAL {pyogrio.__gdal_version_string__}), numpy {numpy.__version__}, array-api-strict {array_api_strict.__version__}, jax {jax.__version__}")
PYEOF
