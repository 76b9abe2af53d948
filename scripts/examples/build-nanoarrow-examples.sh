#!/usr/bin/env bash
# Builds the two C plugin examples over nanoarrow (docs/PLUGIN_ABI.md,
# "A C plugin over nanoarrow") into OUTDIR:
#
#   OUTDIR/libnanoarrow_producer_example.so   (docs/examples/nanoarrow_producer.c)
#   OUTDIR/libnanoarrow_consumer_example.so   (docs/examples/nanoarrow_consumer.c)
#
# Both include docs/examples/nanoarrow_example_copy.h (found beside them).
#
# Usage: scripts/examples/build-nanoarrow-examples.sh OUTDIR
#
# nanoarrow's C sources come from the pinned source distribution of the
# `nanoarrow` package on PyPI (version and SHA-256 in scripts/real/versions.env,
# the same pin as bench/nanoarrow and scripts/real), taken from, in order:
# $NANOARROW_SDIST, target/real/nanoarrow-<version>.tar.gz (scripts/real/setup.sh),
# this script's cache under target/examples/nanoarrow, or
# `python3 -m pip download nanoarrow==<version> --no-binary nanoarrow --no-deps`.
# The archive is checked against the SHA-256 whichever it is. Nothing is
# written outside target/examples/nanoarrow and OUTDIR.
#
# Exit codes: 0 built; 75 the sdist could not be had (no network, no pip:
# callers may skip on this one); anything else is a real failure.
set -euo pipefail
if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
cd "$(dirname "$0")/../.."
# shellcheck source=../real/versions.env
source scripts/real/versions.env
V=$NANOARROW_VERSION
PY=${PYTHON:-python3}
CC=${CC:-cc}
CACHE=target/examples/nanoarrow
mkdir -p "$CACHE"

# ---- the sdist ---------------------------------------------------------------
sdist=""
for candidate in "${NANOARROW_SDIST:-}" "target/real/nanoarrow-$V.tar.gz" "$CACHE/nanoarrow-$V.tar.gz"; do
    if [ -n "$candidate" ] && [ -f "$candidate" ]; then sdist=$candidate; break; fi
done
if [ -z "$sdist" ]; then
    echo "build-nanoarrow-examples: fetching the nanoarrow $V sdist from PyPI"
    rm -rf "$CACHE/download"
    if ! "$PY" -m pip download --quiet --disable-pip-version-check --no-deps \
        --no-binary nanoarrow "nanoarrow==$V" -d "$CACHE/download" \
        || [ ! -f "$CACHE/download/nanoarrow-$V.tar.gz" ]; then
        rm -rf "$CACHE/download"
        echo "build-nanoarrow-examples: cannot fetch nanoarrow $V's sdist (pip download failed;" \
            "set NANOARROW_SDIST=/path/to/nanoarrow-$V.tar.gz)" >&2
        exit 75
    fi
    mv "$CACHE/download/nanoarrow-$V.tar.gz" "$CACHE/nanoarrow-$V.tar.gz"
    rm -rf "$CACHE/download"
    sdist="$CACHE/nanoarrow-$V.tar.gz"
fi
if ! echo "$NANOARROW_SDIST_SHA256  $sdist" | sha256sum -c --quiet - >/dev/null 2>&1; then
    echo "build-nanoarrow-examples: $sdist: SHA-256 is not $NANOARROW_SDIST_SHA256" >&2
    # A bad download of ours must not stick.
    [ "$sdist" = "$CACHE/nanoarrow-$V.tar.gz" ] && rm -f "$sdist"
    exit 1
fi

# ---- nanoarrow's C library: common/ and the CPU device (no IPC, no CUDA) ----
SRC="$CACHE/src-$V"
NANO="$SRC/nanoarrow"
if [ ! -f "$NANO/nanoarrow.h" ]; then
    tmp=$(mktemp -d "$CACHE/.extract.XXXXXX")
    tar -xzf "$sdist" -C "$tmp" "nanoarrow-$V/subprojects/arrow-nanoarrow/src/nanoarrow"
    rm -rf "$SRC"
    mv "$tmp/nanoarrow-$V/subprojects/arrow-nanoarrow/src" "$SRC"
    rm -rf "$tmp"
fi
# What meson's configure_file writes for nanoarrow_config.h; the namespace
# prefixes nanoarrow's symbols so they never clash with another nanoarrow in
# the same process.
IFS=. read -r major minor patch <<<"${V%%[-+]*}"
sed -e "s/@NANOARROW_VERSION@/$V/" \
    -e "s/@NANOARROW_VERSION_MAJOR@/$major/" \
    -e "s/@NANOARROW_VERSION_MINOR@/$minor/" \
    -e "s/@NANOARROW_VERSION_PATCH@/$patch/" \
    -e "s/@NANOARROW_NAMESPACE_DEFINE@/#define NANOARROW_NAMESPACE ArrowcertExample/" \
    "$NANO/nanoarrow_config.h.in" >"$NANO/nanoarrow_config.h.tmp.$$"
if cmp -s "$NANO/nanoarrow_config.h.tmp.$$" "$NANO/nanoarrow_config.h"; then
    rm "$NANO/nanoarrow_config.h.tmp.$$"
else
    mv "$NANO/nanoarrow_config.h.tmp.$$" "$NANO/nanoarrow_config.h"
fi

# NANOARROW_DLL= with -fvisibility=hidden keeps nanoarrow's symbols out of the
# plugins' dynamic symbol tables: they export their arrowcert_* entry points only.
COMMON=(-std=c11 -O2 -g -fPIC -fvisibility=hidden -DNANOARROW_DLL= -I "$SRC" -I harness/include)
OBJ="$CACHE/obj-$V"
mkdir -p "$OBJ"
objects=()
for c in common/array common/schema common/utils common/array_stream device/device; do
    obj="$OBJ/${c#*/}.o"
    if [ ! -f "$obj" ] || [ "$NANO/$c.c" -nt "$obj" ] || [ "$0" -nt "$obj" ]; then
        # nanoarrow's own code is compiled as upstream ships it (its warnings are not ours).
        "$CC" "${COMMON[@]}" -w -c "$NANO/$c.c" -o "$obj.tmp.$$"
        mv "$obj.tmp.$$" "$obj"
    fi
    objects+=("$obj")
done

for role in producer consumer; do
    so="$OUT/libnanoarrow_${role}_example.so"
    # The examples themselves: C11, every warning an error.
    "$CC" "${COMMON[@]}" -Wall -Wextra -Werror -shared -o "$so.tmp" \
        "docs/examples/nanoarrow_$role.c" "${objects[@]}" -Wl,--no-undefined
    mv "$so.tmp" "$so"
    leaked=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^arrowcert_' || true)
    if [ -n "$leaked" ]; then
        echo "build-nanoarrow-examples: $so exports non-plugin symbols:" $leaked >&2
        exit 1
    fi
    echo "build-nanoarrow-examples: $so"
done
