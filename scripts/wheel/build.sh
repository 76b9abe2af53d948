#!/usr/bin/env bash
# Builds arrowcert's Python wheel (docs/PYTHON_ADAPTERS.md, "From Python
# and pytest"): the binary and the bundled plugins with cargo, then
# scripts/wheel/make_wheel.py packs them with python/arrowcert/ into
# OUT/arrowcert-VERSION-py3-none-manylinux_2_N_ARCH.whl (N: the glibc the
# binaries need). Needs cargo, a C compiler and python3 with its headers
# (the Python bridge is built into the binary); the wheel needs none.
#
#   bash scripts/wheel/build.sh [--profile release|debug] [--out DIR] [--plugins LIST]
#
# --profile debug reuses a `cargo test` build (stripped, as release is);
# the default, release, is the one to publish. --plugins: make_wheel.py's.
set -euo pipefail
cd "$(dirname "$0")/../.."
profile=release
out=target/wheels
plugins=reference,arrow-rs,cuda-reference
while [ $# -gt 0 ]; do
    case "$1" in
        --profile) profile=${2:?--profile needs a value}; shift 2 ;;
        --out) out=${2:?--out needs a value}; shift 2 ;;
        --plugins) plugins=${2:?--plugins needs a value}; shift 2 ;;
        *) echo "build.sh: unknown argument $1 (--profile, --out, --plugins)" >&2; exit 2 ;;
    esac
done
case "$profile" in
    release) cargo_profile=release; dir=release ;;
    debug | dev) cargo_profile=dev; dir=debug ;;
    *) echo "build.sh: --profile is release or debug, not $profile" >&2; exit 2 ;;
esac
packages=(-p arrowcert)
for p in ${plugins//,/ }; do
    packages+=(-p "arrowcert-producer-$p" -p "arrowcert-consumer-$p")
done
cargo build --profile "$cargo_profile" "${packages[@]}"
python3 scripts/wheel/make_wheel.py --bin-dir "target/$dir" --out "$out" --plugins "$plugins"
