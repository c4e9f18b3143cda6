#!/usr/bin/env bash
# Prints the path of a headless-capable Chromium or Chrome for the HTML tests, installing Debian's
# `chromium` package when none is found and this is a Debian/Ubuntu machine run as root (what
# CI's machines are). Otherwise it stops with one line naming the command that would install one.
# `make test` runs it once and keeps the answer in .venv/chromium-path.
set -euo pipefail

find_browser() {
    local name
    for name in chromium chromium-browser google-chrome google-chrome-stable; do
        if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
    done
    # macOS: the usual application bundles, system-wide or in the user's own Applications.
    for name in "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome" \
                "/Applications/Chromium.app/Contents/MacOS/Chromium" \
                "$HOME/Applications/Google Chrome.app/Contents/MacOS/Google Chrome" \
                "$HOME/Applications/Chromium.app/Contents/MacOS/Chromium"; do
        if [ -x "$name" ]; then echo "$name"; return 0; fi
    done
    return 1
}

if find_browser; then exit 0; fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "tools/chromium.sh: installing Debian's chromium for the HTML tests (apt-get)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 && apt-get install -y -qq chromium >/dev/null
    find_browser && exit 0
fi
if [ "$(uname -s)" = Darwin ]; then
    hint="brew install --cask chromium"
elif command -v apt-get >/dev/null 2>&1; then
    hint="sudo apt-get install chromium"
else
    hint="install Chromium or Google Chrome with your system's package manager"
fi
echo "error: the HTML tests need headless Chromium or Chrome and none was found; run: $hint" >&2
exit 1
