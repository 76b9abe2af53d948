#!/usr/bin/env bash
# Every benchmark builds and runs one short round (ARROWCERT_BENCH_SMOKE:
# no figure means anything; CI checks they run on a machine without a GPU).
# The validation benchmark compiles nanoarrow's C from its pinned PyPI sdist
# (bench/nanoarrow/build.rs); where that cannot be fetched it is skipped
# with the reason, never counted as run.
set -euo pipefail
cd "$(dirname "$0")/.."
export ARROWCERT_BENCH_SMOKE=1
cargo bench -p arrowcert --bench certify --bench roundtrip --bench scenarios
sdist_dir=target/tools/nanoarrow-sdist
mkdir -p "$sdist_dir"
if ls "$sdist_dir"/nanoarrow-0.9.0.tar.gz >/dev/null 2>&1 \
    || python3 -m pip download nanoarrow==0.9.0 --no-binary nanoarrow --no-deps \
        -d "$sdist_dir" >/dev/null 2>&1; then
    NANOARROW_SDIST="$(cd "$sdist_dir" && pwd)/nanoarrow-0.9.0.tar.gz" \
        ARROWCERT_BENCH_VALUES=200000 \
        cargo bench -p arrowcert-bench-nanoarrow --features nanoarrow --bench validate
else
    echo "SKIPPED: the validation benchmark: nanoarrow 0.9.0's sdist could not be fetched from PyPI" >&2
fi
echo "bench smoke: every benchmark ran one short round"
