#!/usr/bin/env bash
# Builds the PyCapsule plugins (plugins/pycapsule/pycapsule_plugin.c, one
# source compiled once per library, with plugins/pycapsule/glue.py embedded) that embed CPython and certify pyarrow,
# polars and duckdb through the Arrow PyCapsule interface:
#
#   target/real/lib/libarrowcert_pycapsule_pyarrow.so
#   target/real/lib/libarrowcert_pycapsule_polars.so
#   target/real/lib/libarrowcert_pycapsule_duckdb.so
#
# Runs scripts/real/setup.sh first when the venv is missing. Idempotent: a
# plugin is rebuilt only when it is older than the source, this script,
# versions.env or the venv's interpreter. The venv's site-packages and the
# interpreter's prefix are compiled in (ARROWCERT_PYCAPSULE_SITE_PACKAGES and
# ARROWCERT_PYCAPSULE_PYTHONHOME override them at run time).
#
# Usage: scripts/real/build-pycapsule.sh [pyarrow|polars|duckdb ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=versions.env
source scripts/real/versions.env
REAL=${ARROWCERT_REAL_DIR:-target/real}
CC=${CC:-cc}
if [ ! -x "$REAL/venv/bin/python" ]; then
    bash scripts/real/setup.sh
fi
VPY="$REAL/venv/bin/python"
# One line each: include dir, lib dir, library file, base prefix, site-packages.
mapfile -t cfg < <("$VPY" - <<'PYEOF'
import sys, sysconfig
v = sysconfig.get_config_var
print(v("INCLUDEPY"))
print(v("LIBDIR"))
print(v("LDLIBRARY"))
print(sys.base_prefix)
print(sysconfig.get_paths()["purelib"])
print(f"python{v('LDVERSION') or v('VERSION')}")
PYEOF
)
INCLUDEPY=${cfg[0]} LIBDIR=${cfg[1]} LDLIBRARY=${cfg[2]} PYHOME=${cfg[3]} SITE=${cfg[4]} PYLIB=${cfg[5]}
case "$LDLIBRARY" in
    *.so*) ;;
    *) echo "build-pycapsule: $VPY's Python has no shared libpython ($LDLIBRARY)" >&2; exit 1 ;;
esac
SITE=$(cd "$SITE" && pwd)
SRC=plugins/pycapsule/pycapsule_plugin.c
GLUE=plugins/pycapsule/glue.py
OUT="$REAL/lib"
GEN="$REAL/build/pycapsule"
mkdir -p "$OUT" "$GEN"
# The Python glue, embedded in each plugin as one C string literal.
GLUE_H="$GEN/pycapsule_glue.h"
if [ ! -f "$GLUE_H" ] || [ "$GLUE" -nt "$GLUE_H" ] || [ "$0" -nt "$GLUE_H" ]; then
    "$VPY" - "$GLUE" "$GLUE_H.tmp" <<'PYEOF'
import sys
src = open(sys.argv[1], encoding="ascii").read()
compile(src, sys.argv[1], "exec")  # a syntax error fails the build, not the plugin
with open(sys.argv[2], "w") as out:
    out.write("/* generated from plugins/pycapsule/glue.py by build-pycapsule.sh */\n")
    for line in src.splitlines(keepends=True):
        esc = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        out.write(f'"{esc}"\n')
PYEOF
    mv "$GLUE_H.tmp" "$GLUE_H"
fi
libs=("$@")
[ ${#libs[@]} -gt 0 ] || libs=(pyarrow polars duckdb)
for lib in "${libs[@]}"; do
    case "$lib" in
        pyarrow) def=PYCAPSULE_LIB_PYARROW ;;
        polars) def=PYCAPSULE_LIB_POLARS ;;
        duckdb) def=PYCAPSULE_LIB_DUCKDB ;;
        *) echo "build-pycapsule: unknown library $lib" >&2; exit 2 ;;
    esac
    so="$OUT/libarrowcert_pycapsule_$lib.so"
    if [ -f "$so" ] && [ "$so" -nt "$SRC" ] && [ "$so" -nt "$GLUE_H" ] && [ "$so" -nt "$0" ] \
        && [ "$so" -nt scripts/real/versions.env ] && [ "$so" -nt harness/include/arrowcert_plugin.h ]; then
        echo "build-pycapsule: $so is up to date"
        continue
    fi
    echo "build-pycapsule: building $so"
    "$CC" -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -fPIC -shared \
        -fvisibility=hidden \
        -I harness/include -I "$INCLUDEPY" \
        -D"$def" -I "$GEN" -DPYCAPSULE_GLUE_HEADER="\"pycapsule_glue.h\"" \
        -DPYCAPSULE_SITE_PACKAGES="\"$SITE\"" \
        -DPYCAPSULE_PYTHONHOME="\"$PYHOME\"" \
        -DPYARROW_VERSION="\"$PYARROW_VERSION\"" \
        -DPOLARS_VERSION="\"$POLARS_VERSION\"" \
        -DDUCKDB_VERSION="\"$DUCKDB_VERSION\"" \
        -o "$so.tmp" "$SRC" \
        -L "$LIBDIR" -Wl,-rpath,"$LIBDIR" -l"$PYLIB" \
        -Wl,-z,nodelete -Wl,--no-undefined -ldl -lpthread
    mv "$so.tmp" "$so"
done
