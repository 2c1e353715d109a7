#!/usr/bin/env bash
# The PostgreSQL store tests (test/store-postgres.test.ts) run a throwaway cluster of Debian's
# PostgreSQL 15 (test/support/pg-cluster.ts). Present: nothing to do. Missing: installed with apt-get
# when this runs as root (as in CI, .ci/run); otherwise say why those tests will be skipped, and
# exit 0 (they skip themselves, naming the reason). The package's own `main` cluster (port 5432) is
# not used: the tests start their own on a free loopback port.
set -euo pipefail
bin="${ANKUSA_PG_BIN:-/usr/lib/postgresql/15/bin}"
if [ -x "$bin/initdb" ] && [ -x "$bin/postgres" ]; then exit 0; fi
source "$(dirname "$0")/apt-install.sh"
apt_install "postgres store tests" postgresql-15 "PostgreSQL 15 at $bin" \
  "they will be skipped (apt-get install -y postgresql-15 as root, or set ANKUSA_PG_BIN to its bin directory)" || true
exit 0
