#!/usr/bin/env sh
# Headless Chromium for the console's browser tests (test/console/), from Debian's `chromium`
# package: playwright-core drives it by executable path, so no browser download from a CDN.
# Installed only when missing and only as root (a developer's own machine may use CHROMIUM_PATH).
set -e
if [ -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "[deps] installing chromium (apt-get)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null ||
    { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null; }
else
  echo "[deps] no chromium at ${CHROMIUM_PATH:-/usr/bin/chromium}: the console's browser tests will fail (apt-get install chromium)" >&2
fi
