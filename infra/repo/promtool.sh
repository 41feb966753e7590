#!/usr/bin/env sh
# promtool, for the alerting rules' unit tests (infra/provision/monitoring/prometheus/*.test.yml): from
# Debian's `prometheus` package, unpacked under .cache/ (no root, nothing installed system-wide and
# no Prometheus server started). Prints the path of the promtool to use.
set -e
cd "$(dirname "$0")/../.."
if command -v promtool >/dev/null 2>&1; then command -v promtool; exit 0; fi
dir=.cache/promtool
bin="$dir/usr/bin/promtool"
if [ ! -x "$bin" ]; then
  echo "[deps] unpacking promtool from Debian's prometheus package into $dir" >&2
  mkdir -p "$dir"
  (cd "$dir" && rm -f prometheus_*.deb && apt-get download prometheus >/dev/null 2>&1 ||
    { apt-get update >/dev/null 2>&1 && apt-get download prometheus >/dev/null 2>&1; })
  dpkg-deb -x "$dir"/prometheus_*.deb "$dir"
  rm -f "$dir"/prometheus_*.deb
fi
echo "$PWD/$bin"
