#!/usr/bin/env bash
# One fuzzing run: scripts/fuzz/run.sh TARGET [PLUGIN] [SECONDS] [OUT]
#
# TARGET: validate, consumer, producer, async or dlpack_reader. PLUGIN
# (not for validate and dlpack_reader): `reference` (default), `mutant:NAME`, `async-mutant:NAME` or a
# library path; for async it is the producer and the consumer stays the
# reference unless ASYNC_CONSUMER names one. Runs libFuzzer for SECONDS
# (default 60) over a copy of the seed corpus, minimises every crash it
# finds (`cargo fuzz tmin`) into OUT/findings/, and writes OUT/run.json
# (executions, seconds, the command) for `arrowcert fuzz-report`.
source "$(dirname "$0")/common.sh"
target=${1:?usage: run.sh TARGET [PLUGIN] [SECONDS] [OUT]}
plugin=${2:-reference}
case "$target" in validate|dlpack_reader) plugin="" ;; esac
seconds=${3:-60}
out=${4:-$ROOT/target/fuzz-runs/$target-$(echo "$plugin" | tr ':/' '__')}
fuzz_setup
plugins_build
fuzz_build
corpus_build
producer="" consumer=""
case "$target" in
    validate|dlpack_reader) ;;
    consumer) resolve_plugin consumer "$plugin"; consumer=$PLUGIN_PATH ;;
    producer) resolve_plugin producer "$plugin"; producer=$PLUGIN_PATH ;;
    async)
        resolve_plugin consumer "${ASYNC_CONSUMER:-reference}"; consumer=$PLUGIN_PATH
        resolve_plugin producer "$plugin"; producer=$PLUGIN_PATH ;;
    *) echo "run.sh: unknown target $target (validate, consumer, producer, async, dlpack_reader)" >&2; exit 2 ;;
esac
export ARROWCERT_FUZZ_PRODUCER="$producer" ARROWCERT_FUZZ_CONSUMER="$consumer"
rm -rf "$out"; mkdir -p "$out/corpus" "$out/crashes" "$out/findings"
cp "$ROOT/fuzz/seeds/$target/"* "$out/corpus/"
log="$out/fuzz.log"
start=$(date +%s.%N)
set +e
# A finding stops the run (one finding per target and plugin per run, as
# OSS-Fuzz does); the async target's cases wait on threads, so a slow unit
# is not a hang before 25 s.
(cd "$ROOT" && "${FUZZ_CARGO[@]}" run --fuzz-dir fuzz -O -s "$FUZZ_SANITIZER" ${FUZZ_FEATURES:+--features "$FUZZ_FEATURES"} "$target" "$out/corpus" -- \
    -max_total_time="$seconds" -timeout=25 -rss_limit_mb=4096 -artifact_prefix="$out/crashes/" -print_final_stats=1) >"$log" 2>&1
code=$?
set -e
end=$(date +%s.%N)
execs=$( (grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" || true) | awk '{s+=$2} END {print s+0}')
# Minimise each crash; a crash that does not reproduce is kept as it is.
for c in "$out"/crashes/*; do
    [ -f "$c" ] || continue
    m="$out/findings/$(basename "$c")"
    (cd "$ROOT" && "${FUZZ_CARGO[@]}" tmin --fuzz-dir fuzz -O -s "$FUZZ_SANITIZER" ${FUZZ_FEATURES:+--features "$FUZZ_FEATURES"} "$target" "$c" -r 200 >"$out/tmin.log" 2>&1) || true
    base=$(basename "$c"); min="$ROOT/fuzz/artifacts/$target/minimized-from-${base#*-}"
    if [ -f "$min" ]; then mv "$min" "$m"; else cp "$c" "$m"; fi
done
corpus=$(find "$out/corpus" -type f | wc -l)
seconds_run=$(awk "BEGIN {printf \"%.1f\", $end - $start}")
cat > "$out/run.json" <<JSON
{"target": "$target", "producer": "$producer", "consumer": "$consumer", "seconds": $seconds_run,
 "executions": $execs, "corpus": $corpus, "exit_code": $code,
 "command": "scripts/fuzz/run.sh $target $plugin $seconds"}
JSON
echo "$target $plugin: $execs executions in ${seconds_run}s, $(find "$out/findings" -type f | wc -l) finding(s); $out" >&2
