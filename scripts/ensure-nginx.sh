#!/usr/bin/env bash
# `npm run test:fleet` needs Debian's nginx. Present: nothing to do. Missing: installed with apt-get
# when this runs as root (as in CI, .ci/run); otherwise say why the fleet tests cannot run, exit 1.
set -euo pipefail
if [ -n "${ANKUSA_NGINX:-}" ] && [ -x "$ANKUSA_NGINX" ]; then exit 0; fi
if [ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1; then exit 0; fi
source "$(dirname "$0")/apt-install.sh"
apt_install "test:fleet" nginx nginx "the fleet tests cannot run (apt-get install -y nginx as root, or set ANKUSA_NGINX to an nginx binary)"
