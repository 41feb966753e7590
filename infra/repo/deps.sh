#!/usr/bin/env sh
# Installs dependencies from the lockfile when node_modules is missing or older than the lockfile,
# so `npm start` and `npm test` work on a fresh clone without a separate install step.
set -e
cd "$(dirname "$0")/../.."
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "[deps] installing dependencies (npm ci)" >&2
  npm ci --no-audit --no-fund --loglevel=error
fi
