#!/usr/bin/env bash
# Installs Debian's chromium (for the matrix page's headless-browser test,
# harness/tests/matrix.rs) when /usr/bin/chromium is missing. Needs root
# (or sudo) and Debian's package archive. Exit 0 when chromium is there.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null; then SUDO="sudo -n"; else
        echo "install-chromium: not root and no sudo" >&2; exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
for attempt in 1 2 3; do
    if $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null; then
        break
    fi
    echo "install-chromium: attempt $attempt failed" >&2
    sleep 5
done
test -x /usr/bin/chromium
/usr/bin/chromium --version
