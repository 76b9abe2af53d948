#!/usr/bin/env bash
# Renders an HTML file to a PNG in headless Debian chromium (installed by
# scripts/install-chromium.sh). Usage: screenshot.sh PAGE.html OUT.png
set -euo pipefail
page=$(realpath "$1")
out=$(realpath -m "$2")
if [ ! -x /usr/bin/chromium ]; then
    echo "screenshot: no /usr/bin/chromium (bash scripts/install-chromium.sh); $out not made" >&2
    exit 0
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
/usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --window-size=1400,1800 --screenshot="$out" "file://$page" 2>/dev/null
echo "screenshot: $out"
