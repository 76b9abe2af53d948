#!/usr/bin/env bash
# CI's smoke matrix (.ci/run): builds every adapter (`just real`: the
# pinned libraries into target/real/, the Arrow C++ and nanoarrow adapters,
# the Python bridge), starts a throwaway PostgreSQL server, and runs the
# matrix over every bundled library on a handful of built-in scenarios
# (SMOKE_FILTERS below), each certification checked against its committed
# expectations file (expectations/), then every unit's status checked
# against the committed baseline (expectations/matrix-smoke.json). An
# adapter that stops building, a certification that moves from its
# expectations, or any unit whose status moves, fails.
#
#   bash scripts/matrix/smoke.sh                   # check
#   ARROWCERT_BLESS=1 bash scripts/matrix/smoke.sh  # rewrite the baseline (review the diff)
#
# The full matrix (gold files + 100 generated scenarios) is `just matrix`.
set -euo pipefail
cd "$(dirname "$0")/../.."
# A few built-in scenarios that reach every path and most type families.
SMOKE_FILTERS=(/primitive /nested /dictionary)
bash scripts/real/build.sh >&2
cargo build --workspace --quiet
out=target/matrix-smoke
rm -rf "$out"
mkdir -p "$out"
eval "$(bash scripts/postgres/server.sh start)"
trap 'bash scripts/postgres/server.sh stop "$ARROWCERT_PG_DIR"' EXIT
filters=()
for f in "${SMOKE_FILTERS[@]}"; do filters+=(--filter "$f"); done
rc=0
target/debug/arrowcert matrix --cases 0 --seed 1 --shrink-candidates 0 --units-at-once 2 \
    --expectations expectations --out "$out" "${filters[@]}" > "$out/matrix.log" 2>&1 || rc=$?
grep -E "^(UNEXPECTED|took|not built)" "$out/matrix.log" || true
if [ ! -f "$out/matrix.json" ]; then
    tail -20 "$out/matrix.log" >&2
    echo "smoke: the matrix wrote no matrix.json" >&2
    exit 1
fi
# Exit 1 from the matrix: a unit could not run, or a certification is not
# as its expectations file says (blessing the baseline does not change that).
python3 scripts/matrix/smoke-check.py "$out/matrix.json" expectations/matrix-smoke.json || rc=1
if [ "$rc" != 0 ]; then
    echo "smoke: FAILED (the matrix's log: $out/matrix.log; its page: $out/matrix.html)" >&2
    exit 1
fi
echo "smoke: ok"
