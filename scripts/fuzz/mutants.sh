#!/usr/bin/env bash
# Each target must find a planted bug and minimise it within SECONDS
# (default 300) each: scripts/fuzz/mutants.sh [SECONDS]
#   validate  the validator built with `validator-mutant` (decreasing
#             offsets accepted): disagrees with arrow-rs
#   consumer  mutant:leak (never releases what it imports)
#   producer  mutant:offsets-as-lengths (per-slot lengths as offsets)
#   async     async-mutant:double-release (the handler released twice)
# Prints one line per target; exit 1 if any target found nothing.
source "$(dirname "$0")/common.sh"
seconds=${1:-300}
out="$ROOT/target/fuzz-mutants-runs"
rm -rf "$out"; mkdir -p "$out"
status=0
check() { # name dir
    local n
    n=$(find "$2/findings" -type f 2>/dev/null | wc -l)
    if [ "$n" -gt 0 ]; then
        echo "FOUND  $1: $(sed -n 's/.*"seconds": \([0-9.]*\).*/\1/p' "$2/run.json")s; minimised: $(find "$2/findings" -type f | head -1)"
    else
        echo "MISSED $1"; status=1
    fi
}
FUZZ_FEATURES=validator-mutant bash "$ROOT/scripts/fuzz/run.sh" validate "" "$seconds" "$out/validate/run" || true
check "validate (validator-mutant)" "$out/validate/run"
# The normal build again for the plugin targets.
bash "$ROOT/scripts/fuzz/run.sh" consumer mutant:leak "$seconds" "$out/consumer/run" || true
check "consumer (mutant:leak)" "$out/consumer/run"
bash "$ROOT/scripts/fuzz/run.sh" producer mutant:offsets-as-lengths "$seconds" "$out/producer/run" || true
check "producer (mutant:offsets-as-lengths)" "$out/producer/run"
bash "$ROOT/scripts/fuzz/run.sh" async async-mutant:double-release "$seconds" "$out/async/run" || true
check "async (async-mutant:double-release)" "$out/async/run"
exit $status
