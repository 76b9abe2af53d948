#!/usr/bin/env bash
# CI's smoke run: every fuzz target builds and runs for a few seconds
# against the reference plugins (SECONDS each, default 10), and a short
# run must end clean: a broken target, a harness that cannot load a
# plugin, or a false positive on the reference plugins fails CI.
source "$(dirname "$0")/common.sh"
seconds=${1:-10}
out="$ROOT/target/fuzz-smoke"
rm -rf "$out"; mkdir -p "$out"
status=0
for t in validate consumer producer async dlpack_reader; do
    bash "$ROOT/scripts/fuzz/run.sh" "$t" reference "$seconds" "$out/$t" || status=1
done
"$ROOT/target/debug/arrowcert" fuzz-report --runs "$out" --out "$out/smoke.json" || status=1
for t in validate consumer producer async dlpack_reader; do
    if ! grep -q '"executions": [1-9]' "$out/$t/run.json"; then
        echo "smoke: the $t target executed nothing" >&2; status=1
    fi
done
exit $status
