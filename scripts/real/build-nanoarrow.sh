#!/usr/bin/env bash
# Builds the nanoarrow adapter plugins of the real-library matrix:
#
#   target/real/lib/libarrowcert_producer_nanoarrow.so  (producers/nanoarrow/)
#   target/real/lib/libarrowcert_consumer_nanoarrow.so  (consumers/nanoarrow/)
#
#   target/real/lib/libnanoarrow_c_data_integration.so
#       nanoarrow's own C data integration library (its
#       src/nanoarrow/integration/c_data_integration.cc and testing/testing.cc,
#       built as upstream does, with the nlohmann/json headers of the
#       nlohmann-json wheel setup.sh installs): no plugin at all, certified
#       through arrowcert's built-in integration adapter by path.
#
# Each links nanoarrow's C library (common + device (CPU only: no CUDA, no
# Metal) + IPC reader and writer, with the flatcc runtime; no zstd/lz4
# codecs) from the pinned source distribution that scripts/real/setup.sh
# fetches (SHA-256 checked) into target/real/nanoarrow-src. Nothing from the
# sdist is committed or written outside target/real.
#
# nanoarrow is compiled with its own symbol namespace
# (NANOARROW_NAMESPACE=ArrowcertNanoarrow) and with hidden visibility, so a
# plugin exports only its arrowcert_* entry points and never clashes with
# another nanoarrow loaded in the same process.
#
# Idempotent: objects are rebuilt only when a source or this script is newer.
# Single-job (set JOBS=N for parallel compiles). Needs gcc (CC overrides).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=versions.env
source scripts/real/versions.env
REAL=${ARROWCERT_REAL_DIR:-target/real}
CC=${CC:-gcc}
JOBS=${JOBS:-1}

if [ ! -d "$REAL/nanoarrow-src/arrow-nanoarrow/src/nanoarrow" ]; then
    echo "build-nanoarrow: $REAL/nanoarrow-src missing, running scripts/real/setup.sh"
    bash scripts/real/setup.sh
fi

SRC="$REAL/nanoarrow-src"
NANO="$SRC/arrow-nanoarrow/src/nanoarrow"
FLATCC=$(ls -d "$SRC"/flatcc-* | head -n1)
BUILD="$REAL/build/nanoarrow-$NANOARROW_VERSION"
LIB="$REAL/lib"
mkdir -p "$BUILD/include/nanoarrow" "$BUILD/obj" "$LIB"

# What meson's configure_file writes for nanoarrow_config.h.
IFS=. read -r major minor patch <<<"${NANOARROW_VERSION%%[-+]*}"
config="$BUILD/include/nanoarrow/nanoarrow_config.h"
sed -e "s/@NANOARROW_VERSION@/$NANOARROW_VERSION/" \
    -e "s/@NANOARROW_VERSION_MAJOR@/$major/" \
    -e "s/@NANOARROW_VERSION_MINOR@/$minor/" \
    -e "s/@NANOARROW_VERSION_PATCH@/$patch/" \
    -e "s/@NANOARROW_NAMESPACE_DEFINE@/#define NANOARROW_NAMESPACE ArrowcertNanoarrow/" \
    "$NANO/nanoarrow_config.h.in" >"$config.tmp"
if cmp -s "$config.tmp" "$config"; then rm "$config.tmp"; else mv "$config.tmp" "$config"; fi

# NANOARROW_DLL= drops nanoarrow's visibility("default") so that
# -fvisibility=hidden keeps its symbols out of the plugins' dynamic tables.
CFLAGS=(-std=c11 -O2 -g -fPIC -fvisibility=hidden -DNDEBUG -DNANOARROW_DLL=
        -Wall -Wno-unused-function
        -I "$BUILD/include" -I "$SRC/arrow-nanoarrow/src" -I "$FLATCC/include"
        -I harness/include)

NANO_SOURCES=(
    "$NANO/common/array.c" "$NANO/common/schema.c" "$NANO/common/utils.c"
    "$NANO/common/array_stream.c"
    "$NANO/device/device.c"
    "$NANO/ipc/codecs.c" "$NANO/ipc/decoder.c" "$NANO/ipc/encoder.c"
    "$NANO/ipc/reader.c" "$NANO/ipc/writer.c"
    "$FLATCC/src/runtime/builder.c" "$FLATCC/src/runtime/emitter.c"
    "$FLATCC/src/runtime/verifier.c" "$FLATCC/src/runtime/refmap.c"
)

start=$(date +%s)
objects=()
pids=()
compile() {  # src obj
    echo "build-nanoarrow: cc $1"
    "$CC" "${CFLAGS[@]}" -w -c "$1" -o "$2"
}
for src in "${NANO_SOURCES[@]}"; do
    rel=${src#"$SRC"/}
    obj="$BUILD/obj/${rel//\//_}.o"
    objects+=("$obj")
    if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ "$config" -nt "$obj" ] \
        || [ "$0" -nt "$obj" ]; then
        compile "$src" "$obj" &
        pids+=($!)
        if [ "${#pids[@]}" -ge "$JOBS" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
    fi
done
for pid in "${pids[@]}"; do wait "$pid"; done

link() {  # plugin-source output
    local src=$1 out=$2
    if [ -f "$out" ] && [ ! "$src" -nt "$out" ] && [ ! "$0" -nt "$out" ] \
        && [ ! harness/include/arrowcert_plugin.h -nt "$out" ]; then
        local stale=0
        for obj in "${objects[@]}"; do [ "$obj" -nt "$out" ] && stale=1; done
        [ "$stale" = 0 ] && return 0
    fi
    echo "build-nanoarrow: link $out"
    "$CC" "${CFLAGS[@]}" -Wextra -Werror=implicit-function-declaration \
        -shared -o "$out.tmp" "$src" "${objects[@]}" -Wl,--no-undefined -Wl,-z,defs -pthread
    mv "$out.tmp" "$out"
}
link producers/nanoarrow/nanoarrow_producer.c "$LIB/libarrowcert_producer_nanoarrow.so"
link consumers/nanoarrow/nanoarrow_consumer.c "$LIB/libarrowcert_consumer_nanoarrow.so"

# Only the plugin contract may be exported.
for so in "$LIB/libarrowcert_producer_nanoarrow.so" "$LIB/libarrowcert_consumer_nanoarrow.so"; do
    leaked=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^arrowcert_' || true)
    if [ -n "$leaked" ]; then
        echo "build-nanoarrow: $so exports non-plugin symbols:" $leaked >&2
        exit 1
    fi
done
# nanoarrow's C data integration library, with its four
# nanoarrow_CDataIntegration_* entry points.
CXX=${CXX:-g++}
integration="$LIB/libnanoarrow_c_data_integration.so"
int_sources=("$NANO/integration/c_data_integration.cc" "$NANO/testing/testing.cc")
stale=0
[ -f "$integration" ] || stale=1
for f in "${int_sources[@]}" "${objects[@]}" "$0"; do [ "$f" -nt "$integration" ] && stale=1; done
if [ "$stale" = 1 ]; then
    json_include=$("$REAL/venv/bin/python" -c \
        'import nlohmann_json, os; print(os.path.join(os.path.dirname(nlohmann_json.__file__), "include"))')
    echo "build-nanoarrow: link $integration"
    "$CXX" -std=c++17 -O2 -g -fPIC -fvisibility=hidden -DNDEBUG \
        '-DNANOARROW_DLL=__attribute__((visibility("default")))' \
        -I "$BUILD/include" -I "$SRC/arrow-nanoarrow/src" -I "$json_include" \
        -shared -o "$integration.tmp" "${int_sources[@]}" "${objects[@]}" \
        -Wl,--no-undefined -pthread
    mv "$integration.tmp" "$integration"
fi
# (nanoarrow's testing classes are exported too, as upstream builds them.)
for entry in ExportSchemaFromJson ExportBatchFromJson ImportSchemaAndCompareToJson \
    ImportBatchAndCompareToJson; do
    if ! nm -D --defined-only "$integration" | grep -q " nanoarrow_CDataIntegration_$entry\$"; then
        echo "build-nanoarrow: $integration lacks nanoarrow_CDataIntegration_$entry" >&2
        exit 1
    fi
done
echo "build-nanoarrow: nanoarrow $NANOARROW_VERSION plugins in $LIB ($(( $(date +%s) - start ))s)"
