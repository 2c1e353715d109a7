#!/usr/bin/env bash
# The console tests (test/console/) drive Debian's Chromium. Present: nothing to do. Missing:
# installed with apt-get when this runs as root (as in CI, .ci/run); otherwise say why the
# console tests will be skipped, and exit 0 (they skip themselves, they do not fail).
set -euo pipefail
chromium="${ANKUSA_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$chromium" ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "console tests: Chromium is not installed at $chromium and this is not root, so it cannot be installed here; they will be skipped (apt-get install -y chromium as root, or set ANKUSA_CHROMIUM)" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "console tests: Chromium is not installed and there is no apt-get to install Debian's; they will be skipped (install chromium or set ANKUSA_CHROMIUM)" >&2
  exit 0
fi
echo "console tests: installing Debian's Chromium (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }; then
  echo "console tests: apt-get could not install chromium; they will be skipped" >&2
fi
exit 0
