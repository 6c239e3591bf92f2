#!/usr/bin/env bash
# Installs Debian's chromium for the browser tests when it is missing and this user can (root with
# apt-get). Never downloads a browser of Playwright's own (`playwright install` is not used).
# Exit 0 when /usr/bin/chromium is there afterwards or could not be installed (browser tests then
# skip); exit 1 only when an attempted install failed, or when REQUIRE_CHROMIUM=1 and it is missing.
set -euo pipefail

CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ]; then
    echo "[chromium] $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM") present"
    exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "[chromium] installing Debian's chromium (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq </dev/null
    apt-get install -y -qq --no-install-recommends chromium </dev/null >/dev/null
    [ -x "$CHROMIUM" ] || { echo "[chromium] apt-get finished but $CHROMIUM is missing" >&2; exit 1; }
    echo "[chromium] $("$CHROMIUM" --version 2>/dev/null) installed"
    exit 0
fi
msg="[chromium] $CHROMIUM is missing and cannot be installed here (needs root and apt-get: \`sudo apt-get install chromium\`); browser tests will skip"
if [ "${REQUIRE_CHROMIUM:-0}" = "1" ]; then
    echo "$msg" >&2
    exit 1
fi
echo "$msg"
