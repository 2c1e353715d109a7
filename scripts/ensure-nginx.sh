#!/usr/bin/env bash
# `npm run test:fleet` needs Debian's nginx. Present: nothing to do. Missing: installed with apt-get
# when this runs as root (as in CI, .ci/run); otherwise say why the fleet tests cannot run, exit 1.
set -euo pipefail
if [ -n "${ANKUSA_NGINX:-}" ] && [ -x "$ANKUSA_NGINX" ]; then exit 0; fi
if [ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "test:fleet: nginx is not installed and this is not root, so it cannot be installed here; run as root (apt-get install -y nginx) or set ANKUSA_NGINX to an nginx binary" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "test:fleet: nginx is not installed and there is no apt-get to install Debian's nginx; install nginx or set ANKUSA_NGINX" >&2
  exit 1
fi
echo "test:fleet: installing Debian's nginx (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq nginx >/dev/null
