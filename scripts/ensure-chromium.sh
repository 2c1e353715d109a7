#!/usr/bin/env bash
# The console tests (test/console/) drive Debian's Chromium. Present: nothing to do. Missing:
# installed with apt-get when this runs as root (as in CI, .ci/run); otherwise say why the
# console tests will be skipped, and exit 0 (they skip themselves, they do not fail).
set -euo pipefail
chromium="${ANKUSA_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$chromium" ]; then exit 0; fi
source "$(dirname "$0")/apt-install.sh"
apt_install "console tests" chromium "Chromium at $chromium" \
  "they will be skipped (apt-get install -y chromium as root, or set ANKUSA_CHROMIUM)" || true
exit 0
