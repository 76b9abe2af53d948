#!/usr/bin/env bash
# Builds the Arrow C++ adapter plugins against the Arrow C++ that the pinned
# pyarrow wheel ships (headers and libarrow.so.<SO> inside the wheel):
#
#   target/real/lib/libarrowcert_producer_arrow_cpp.so  (producers/arrow-cpp)
#   target/real/lib/libarrowcert_consumer_arrow_cpp.so  (consumers/arrow-cpp)
#
# Idempotent: a plugin is rebuilt only when its sources, the shared header,
# the plugin header, the compiler flags or the pyarrow version changed (a
# content stamp next to each library). Runs scripts/real/setup.sh first when
# the project-local venv is missing. Compiles one file at a time (no -j).
#
# Environment: CXX (default g++), ARROWCERT_REAL_DIR (default target/real),
# EXTRA_CXXFLAGS (appended, e.g. -g -O0 or -fsanitize=address).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=versions.env
source scripts/real/versions.env
REAL=${ARROWCERT_REAL_DIR:-target/real}
CXX=${CXX:-g++}
VPY="$REAL/venv/bin/python"

if [ ! -x "$VPY" ] || ! "$VPY" -c 'import pyarrow' >/dev/null 2>&1; then
    bash scripts/real/setup.sh
fi

read -r PA_VERSION PA_INCLUDE PA_LIBDIR < <("$VPY" - <<'PYEOF'
import pyarrow
print(pyarrow.__version__, pyarrow.get_include(), pyarrow.get_library_dirs()[0])
PYEOF
)
if [ "$PA_VERSION" != "$PYARROW_VERSION" ]; then
    echo "build-arrow-cpp: pyarrow $PA_VERSION installed, versions.env pins $PYARROW_VERSION;" \
         "run scripts/real/setup.sh" >&2
    exit 1
fi
# The wheel ships libarrow.so.<SO> only (no unversioned link name): link it by
# its full path; DT_NEEDED records its SONAME.
LIBARROW=$(ls "$PA_LIBDIR"/libarrow.so.[0-9]* 2>/dev/null | grep -E '/libarrow\.so\.[0-9]+$' | head -n1 || true)
if [ -z "$LIBARROW" ]; then
    echo "build-arrow-cpp: no libarrow.so.<SO> in $PA_LIBDIR" >&2
    exit 1
fi

OUT="$REAL/lib"
mkdir -p "$OUT"
OUT_ABS=$(cd "$OUT" && pwd)
# rpath relative to the plugin, so target/real stays relocatable.
RPATH_REL=$("$VPY" -c 'import os,sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' \
    "$PA_LIBDIR" "$OUT_ABS")

CXXFLAGS=(-std=c++20 -O2 -fPIC -fvisibility=hidden -fvisibility-inlines-hidden
          -D_GLIBCXX_USE_CXX11_ABI=1 -Wall -Wextra -Wno-unused-parameter
          -isystem "$PA_INCLUDE" -I harness/include -I producers/arrow-cpp)
# shellcheck disable=SC2206
CXXFLAGS+=(${EXTRA_CXXFLAGS:-})
LDFLAGS=(-shared -Wl,--no-undefined -Wl,-rpath,"\$ORIGIN/$RPATH_REL" -Wl,-z,defs
         "$LIBARROW" -pthread)

build() {  # build <name> <source>
    local name=$1 src=$2
    local lib="$OUT/libarrowcert_${name}_arrow_cpp.so"
    local stamp="$OUT/.libarrowcert_${name}_arrow_cpp.stamp"
    local want
    want=$({
        echo "$CXX $("$CXX" -dumpfullversion 2>/dev/null || true)"
        echo "pyarrow $PA_VERSION $LIBARROW"
        printf '%s\n' "${CXXFLAGS[@]}" "${LDFLAGS[@]}"
        cat "$src" producers/arrow-cpp/arrowcert_arrow_cpp_common.h harness/include/arrowcert_plugin.h
    } | sha256sum | cut -d' ' -f1)
    if [ -f "$lib" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        echo "build-arrow-cpp: $lib is up to date"
        return
    fi
    echo "build-arrow-cpp: compiling $src -> $lib"
    local tmp="$lib.tmp.$$"
    "$CXX" "${CXXFLAGS[@]}" -o "$tmp" "$src" "${LDFLAGS[@]}"
    mv -f "$tmp" "$lib"
    echo "$want" > "$stamp"
}

build producer producers/arrow-cpp/arrow_cpp_producer.cc
build consumer consumers/arrow-cpp/arrow_cpp_consumer.cc
