#!/usr/bin/env bash
# Builds arrowcert's Python adapter bridge (plugins/python/bridge.c, with
# plugins/python/bridge.py embedded) against one Python interpreter:
#
#   scripts/python/build-bridge.sh PYTHON OUT.so
#
# PYTHON is the interpreter whose environment the adapters run in (its
# headers and shared libpython are needed: Debian's python3-dev, or any
# venv over such an interpreter). Also writes OUT.so.site: the
# interpreter's site-packages directories, one per line.
# The development fallback only: arrowcert carries a bridge built against
# the stable ABI (harness/build.rs) and runs this, on the first
# `--producer py:...` for an interpreter (result under
# target/python-bridge/), only when it was built without Python.h.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${1:?usage: build-bridge.sh PYTHON OUT.so}
OUT=${2:?usage: build-bridge.sh PYTHON OUT.so}
CC=${CC:-cc}
mapfile -t cfg < <("$PY" - <<'PYEOF'
import sys, sysconfig, site
v = sysconfig.get_config_var
print(v("INCLUDEPY"))
print(v("LIBDIR"))
print(v("LDLIBRARY"))
print(sys.base_prefix)
print(f"python{v('LDVERSION') or v('VERSION')}")
dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
try:
    dirs += site.getsitepackages()
except Exception:
    pass
seen = []
for d in dirs:
    if d not in seen:
        seen.append(d)
print("\t".join(seen))
PYEOF
)
INCLUDEPY=${cfg[0]} LIBDIR=${cfg[1]} LDLIBRARY=${cfg[2]} PYLIB=${cfg[4]} SITES=${cfg[5]}
case "$LDLIBRARY" in
    *.so*) ;;
    *) echo "build-bridge: $PY has no shared libpython ($LDLIBRARY): the bridge embeds it" >&2; exit 1 ;;
esac
if [ ! -f "$INCLUDEPY/Python.h" ]; then
    echo "build-bridge: $INCLUDEPY/Python.h is missing (install the interpreter's development headers, e.g. python3-dev)" >&2
    exit 1
fi
GEN=$(mktemp -d "${TMPDIR:-/tmp}/arrowcert-bridge.XXXXXX")
trap 'rm -rf "$GEN"' EXIT
"$PY" - plugins/python/bridge.py "$GEN/bridge_glue.h" <<'PYEOF'
import sys
src = open(sys.argv[1], encoding="utf-8").read()
compile(src, sys.argv[1], "exec")  # a syntax error fails the build
with open(sys.argv[2], "w") as out:
    for line in src.splitlines(keepends=True):
        esc = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        out.write(f'"{esc}"\n')
PYEOF
mkdir -p "$(dirname "$OUT")"
"$CC" -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -fPIC -shared \
    -fvisibility=hidden \
    -I harness/include -I "$INCLUDEPY" -I "$GEN" \
    -DBRIDGE_GLUE_HEADER="\"bridge_glue.h\"" \
    -o "$OUT.tmp.$$" plugins/python/bridge.c \
    -L "$LIBDIR" -Wl,-rpath,"$LIBDIR" -l"$PYLIB" \
    -Wl,-z,nodelete -Wl,--no-undefined -ldl -lpthread
echo "$SITES" | tr '\t' '\n' > "$OUT.site.tmp.$$"
mv "$OUT.site.tmp.$$" "$OUT.site"
mv "$OUT.tmp.$$" "$OUT"
