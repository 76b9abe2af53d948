# Shared by the fuzz scripts (sourced). Sets FUZZ_CARGO (how to call cargo
# fuzz), builds what the targets need, and resolves plugin names.
#
# cargo-fuzz is installed into target/tools/ (pinned version). Sanitizers
# need nightly compiler features: the installed nightly toolchain when
# FUZZ_TOOLCHAIN=nightly, else the default (stable) toolchain with
# RUSTC_BOOTSTRAP=1. A failed stable attempt can leave
# fuzz/target/.rustc_info.json describing the wrong compiler, so it is
# removed before every build.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CARGO_FUZZ_VERSION=0.13.1
TOOLS="$ROOT/target/tools"
export PATH="$TOOLS/bin:$PATH"
# address (default) or none: ASan catches double frees and bad frees in the
# plugins too; none runs several times faster (throughput figures).
FUZZ_SANITIZER=${FUZZ_SANITIZER:-address}

fuzz_setup() {
    if ! "$TOOLS/bin/cargo-fuzz" --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
        echo "installing cargo-fuzz $CARGO_FUZZ_VERSION into $TOOLS" >&2
        cargo install --quiet --locked --root "$TOOLS" cargo-fuzz --version "$CARGO_FUZZ_VERSION"
    fi
    if [ "${FUZZ_TOOLCHAIN:-}" = nightly ]; then
        FUZZ_CARGO=(cargo +nightly fuzz)
    else
        export RUSTC_BOOTSTRAP=1
        FUZZ_CARGO=(cargo fuzz)
    fi
    rm -f "$ROOT/fuzz/target/.rustc_info.json"
}

# Builds the fuzz targets (all four share one build).
fuzz_build() {
    (cd "$ROOT" && "${FUZZ_CARGO[@]}" build --fuzz-dir fuzz -O -s "$FUZZ_SANITIZER" ${FUZZ_FEATURES:+--features "$FUZZ_FEATURES"})
}

# The plugins and the arrowcert binary (replay, corpus, report).
plugins_build() {
    (cd "$ROOT" && cargo build --quiet -p arrowcert -p arrowcert-producer-reference -p arrowcert-consumer-reference)
}

# Seeds: built-in scenarios, generated ones and the gold streams.
corpus_build() {
    local gold="$ROOT/../shared/gold/cpp-21.0.0"
    [ -d "$gold" ] || gold=""
    if [ ! -d "$ROOT/fuzz/seeds/validate" ] || [ ! -d "$ROOT/fuzz/seeds/dlpack_reader" ]; then
        "$ROOT/target/debug/arrowcert" fuzz-corpus --out "$ROOT/fuzz/seeds" ${gold:+--gold "$gold"} --generated 16 >&2
    fi
}

# A plugin argument to a path, in PLUGIN_PATH: `reference` (the bundled
# one for the role), `mutant:NAME` / `async-mutant:NAME` (the mutant
# wrapper with that mutation, built here; ARROWCERT_MUTANT and
# ARROWCERT_MUTANT_BASE exported), or a path to a library. Not in a
# subshell: the exports must reach the fuzzer.
resolve_plugin() { # role arg
    local role=$1 arg=$2
    case "$arg" in
        reference) PLUGIN_PATH="$ROOT/target/debug/libarrowcert_${role}_reference.so" ;;
        mutant:*|async-mutant:*)
            local kind=${arg%%:*} name=${arg#*:} src lib
            if [ "$kind" = async-mutant ]; then src="$ROOT/${role}s/mutants/mutant_async_${role}.c"; else src="$ROOT/${role}s/mutants/mutant_${role}.c"; fi
            lib="$ROOT/target/fuzz-mutants/lib${kind}_${role}.so"
            mkdir -p "$ROOT/target/fuzz-mutants"
            if [ ! -f "$lib" ] || [ "$src" -nt "$lib" ]; then
                ${CC:-cc} -shared -fPIC -pthread -ldl -I "$ROOT/harness/include" -o "$lib" "$src"
            fi
            export ARROWCERT_MUTANT="$name"
            export ARROWCERT_MUTANT_BASE="$ROOT/target/debug/libarrowcert_${role}_reference.so"
            PLUGIN_PATH="$lib" ;;
        *) PLUGIN_PATH="$arg" ;;
    esac
}
