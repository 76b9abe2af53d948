#!/usr/bin/env bash
# Builds every real-library adapter of the compatibility matrix into
# target/real/lib/ (`just real`): installs the pinned libraries first
# (scripts/real/setup.sh: a project-local venv with pyarrow (Arrow C++'s
# headers and libarrow come in its wheel), polars and duckdb, and
# nanoarrow's sdist), then the Arrow C++, nanoarrow and PyCapsule adapters.
# The arrow-rs adapter is a workspace crate (`cargo build --workspace`).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/real/setup.sh
bash scripts/real/build-arrow-cpp.sh
bash scripts/real/build-nanoarrow.sh
bash scripts/real/build-pycapsule.sh
ls -1 "${ARROWCERT_REAL_DIR:-target/real}/lib"
