#!/usr/bin/env bash
# Builds every real-library adapter of the compatibility matrix into
# target/real/lib/ (`just real`): installs the pinned libraries first
# (scripts/real/setup.sh: a project-local venv with pyarrow (Arrow C++'s
# headers and libarrow come in its wheel), polars and duckdb, and
# nanoarrow's sdist, and the Python libraries adapters/*.py certify), then
# the Arrow C++ and nanoarrow adapters and the Python adapter bridge.
# The arrow-rs adapter is a workspace crate (`cargo build --workspace`).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/real/setup.sh
bash scripts/real/build-arrow-cpp.sh
bash scripts/real/build-nanoarrow.sh
# The bridge py: adapters run through, built for the project-local venv
# (arrowcert builds it on first use too; building it here fails early).
python_bridge="${ARROWCERT_REAL_DIR:-target/real}/lib/libarrowcert_python_bridge.so"
bash scripts/python/build-bridge.sh "${ARROWCERT_REAL_DIR:-target/real}/venv/bin/python" "$python_bridge"
ls -1 "${ARROWCERT_REAL_DIR:-target/real}/lib"
