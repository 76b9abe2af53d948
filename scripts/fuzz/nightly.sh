#!/usr/bin/env bash
# The nightly fuzzing job: scripts/fuzz/nightly.sh [SECONDS] [OUT]
#
# Every target against every configured plugin for SECONDS each (default
# 600), each run's crashes minimised, then one report in the
# certification format (OUT/nightly.json, default reports/fuzz/) with the
# executions per second of every run and each finding's replay commands.
# Plugins: FUZZ_PRODUCERS and FUZZ_CONSUMERS (space-separated names or
# paths, default `reference`). Exit status 1 when anything was found.
source "$(dirname "$0")/common.sh"
seconds=${1:-600}
out=${2:-$ROOT/reports/fuzz}
runs="$out/runs"
rm -rf "$runs"; mkdir -p "$runs"
producers=${FUZZ_PRODUCERS:-reference}
consumers=${FUZZ_CONSUMERS:-reference}
run() { bash "$ROOT/scripts/fuzz/run.sh" "$@" || true; }
run validate "" "$seconds" "$runs/validate"
run dlpack_reader "" "$seconds" "$runs/dlpack_reader"
for c in $consumers; do run consumer "$c" "$seconds" "$runs/consumer-$(basename "$c" .so | tr ':' '_')"; done
for p in $producers; do run producer "$p" "$seconds" "$runs/producer-$(basename "$p" .so | tr ':' '_')"; done
for p in $producers; do run async "$p" "$seconds" "$runs/async-$(basename "$p" .so | tr ':' '_')"; done
"$ROOT/target/debug/arrowcert" fuzz-report --runs "$runs" --out "$out/nightly.json"
