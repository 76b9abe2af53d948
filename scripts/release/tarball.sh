#!/usr/bin/env bash
# Makes the release tarball (issue 40): arrowcert-<version>-x86_64-linux-gnu.tar.gz
# and its .sha256 in OUT, holding one folder arrowcert-<version>-x86_64-linux-gnu/:
#
#   bin/arrowcert                 the relocatable binary (it carries the py:
#                                 adapters, the Python bridge, the ADBC adapter,
#                                 the mutant producer and the header: harness/src/assets.rs)
#   lib/arrowcert/*.so            the bundled plugins the binary looks up beside
#                                 itself (<exe dir>/../lib/arrowcert/), per --plugins
#   include/                      the plugin headers (harness/include)
#   docs/                         README.md, docs/*.md, expectations/README.md
#   examples/c/                   the C plugin examples (docs/examples/*.c, *.h)
#   examples/rust/                the reference producer and consumer crates' sources
#   examples/workflows/           the GitHub Actions workflows (docs/examples/*.yml,
#                                 docs/examples/workflows/*.yml)
#
# Usage: scripts/release/tarball.sh [--profile release|dev] [--out DIR] [--plugins LIST] [--bin FILE]
#   --profile  cargo profile to build with (default release; dev is for tests)
#   --out      where the tarball goes (default target/release-tarball)
#   --plugins  comma-separated bundled plugin names whose producer and consumer
#              go into lib/arrowcert/ (default: reference,arrow-rs; cuda-reference
#              too if asked: it needs an NVIDIA driver at run time only)
#   --bin      package this arrowcert binary instead of building one (the
#              tests pass the binary under test, so the tarball holds it)
#
# The archive is reproducible for one build: sorted names, owner 0, a fixed
# mtime (SOURCE_DATE_EPOCH, else the last commit's time), gzip without a name.
# Prints the tarball's path on its last line.
set -euo pipefail

die() { echo "tarball.sh: $*" >&2; exit 2; }

profile=release
out=""
plugins="reference,arrow-rs"
bin=""
while [ $# -gt 0 ]; do
    case "$1" in
        --profile) [ $# -ge 2 ] || die "--profile needs a value"; profile=$2; shift 2 ;;
        --out) [ $# -ge 2 ] || die "--out needs a value"; out=$2; shift 2 ;;
        --plugins) [ $# -ge 2 ] || die "--plugins needs a value"; plugins=$2; shift 2 ;;
        --bin) [ $# -ge 2 ] || die "--bin needs a value"; bin=$2; shift 2 ;;
        -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (usage: tarball.sh [--profile release|dev] [--out DIR] [--plugins LIST] [--bin FILE])" ;;
    esac
done
case "$profile" in
    release) profile_dir=release; cargo_profile=(--release) ;;
    dev) profile_dir=debug; cargo_profile=() ;;
    *) die "--profile must be release or dev, not '$profile'" ;;
esac
if [ -n "$bin" ]; then
    [ -f "$bin" ] && [ -x "$bin" ] || die "--bin: $bin is not an executable file"
    bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
fi
[ "$(uname -sm)" = "Linux x86_64" ] || die "builds the x86_64-linux-gnu tarball only, not on $(uname -sm)"

cd "$(dirname "$0")/../.."
root=$(pwd)
[ -n "$out" ] || out=target/release-tarball
mkdir -p "$out"
out=$(cd "$out" && pwd)
target=${CARGO_TARGET_DIR:-$root/target}

# The version of the arrowcert crate (`path+file:///...#arrowcert@0.1.0`).
pkgid=$(cargo pkgid -p arrowcert)
version=${pkgid##*[#@]}
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] || die "cannot read arrowcert's version from '$pkgid'"
name="arrowcert-$version-x86_64-linux-gnu"

packages=()
[ -n "$bin" ] || packages=(-p arrowcert)
libs=()
IFS=, read -ra names <<<"$plugins"
for n in "${names[@]}"; do
    [[ "$n" =~ ^[a-z0-9-]+$ ]] || die "--plugins: '$n' is not a plugin name"
    [ -d "producers/$n" ] && [ -d "consumers/$n" ] || die "--plugins: no bundled plugin '$n' (producers/$n and consumers/$n)"
    for role in producer consumer; do
        packages+=(-p "arrowcert-$role-$n")
        libs+=("libarrowcert_${role}_${n//-/_}.so")
    done
done

echo "tarball.sh: cargo build ${cargo_profile[*]} ${packages[*]}" >&2
cargo build -q "${cargo_profile[@]}" "${packages[@]}"

stage=$(mktemp -d "$out/.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
dest="$stage/$name"
mkdir -p "$dest/bin" "$dest/lib/arrowcert" "$dest/include" "$dest/docs" \
    "$dest/examples/c" "$dest/examples/rust" "$dest/examples/workflows"
install -m 0755 "${bin:-$target/$profile_dir/arrowcert}" "$dest/bin/arrowcert"
for l in "${libs[@]}"; do
    install -m 0755 "$target/$profile_dir/$l" "$dest/lib/arrowcert/$l"
done
install -m 0644 harness/include/*.h "$dest/include/"
install -m 0644 README.md "$dest/docs/README.md"
install -m 0644 docs/*.md "$dest/docs/"
install -m 0644 expectations/README.md "$dest/docs/EXPECTATIONS.md"
install -m 0644 docs/examples/*.c docs/examples/*.h "$dest/examples/c/"
install -m 0644 docs/examples/*.yml docs/examples/workflows/*.yml "$dest/examples/workflows/"
for role in producer consumer; do
    mkdir -p "$dest/examples/rust/$role-reference"
    cp -r "${role}s/reference/Cargo.toml" "${role}s/reference/src" "$dest/examples/rust/$role-reference/"
done
cat >"$dest/examples/README.md" <<TXT
arrowcert $version examples

c/         C plugins. minimal_plugin.c is the smallest valid plugin:
             cc -shared -fPIC -I ../include -o libminimal.so c/minimal_plugin.c
             ../bin/arrowcert inspect ./libminimal.so
           nanoarrow_producer.c and nanoarrow_consumer.c are complete plugins over
           nanoarrow's C library (docs/PLUGIN_ABI.md, "A C plugin over nanoarrow"):
           compile them with nanoarrow's sources (common/ and device/) and
           -I ../include, then
             ../bin/arrowcert certify --producer ./libnanoarrow_producer_example.so
rust/      The reference producer and consumer (the plugins in lib/arrowcert/):
           complete Rust plugins. Their Cargo.toml inherits from arrowcert's
           workspace: build them inside a checkout of arrowcert $version.
workflows/ GitHub Actions workflows: certify-pycapsule.yml certifies a Python
           library through arrowcert's Action (action.yml); matrix.yml and
           fuzz-nightly.yml are arrowcert's own.
TXT

epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
tarball="$out/$name.tar.gz"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
    -C "$stage" -cf - "$name" | gzip -9 -n >"$tarball.tmp"
mv "$tarball.tmp" "$tarball"
(cd "$out" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
echo "tarball.sh: $(du -h "$tarball" | cut -f1) $tarball" >&2
echo "$tarball"
