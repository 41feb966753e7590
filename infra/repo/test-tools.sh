#!/usr/bin/env sh
# What `npm test` needs beyond node_modules, installed when missing: headless Chromium for the
# console's browser tests (infra/repo/chromium.sh) and promtool for the alerting rules' tests
# (infra/repo/promtool.sh). Not part of `npm start`, which needs neither.
set -e
cd "$(dirname "$0")/../.."
sh infra/repo/chromium.sh
sh infra/repo/promtool.sh >/dev/null
