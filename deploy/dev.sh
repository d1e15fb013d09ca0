#!/usr/bin/env bash
# RedDot on one machine, with embedded defaults: the README's run command.
#
# On a fresh Debian machine (as root) it installs what is missing (libpq-dev, librdkafka-dev,
# postgresql, kcat), creates the account the private PostgreSQL runs as (it refuses root), builds
# RedDot, and starts `reddot dev --demo`: a private PostgreSQL cluster in .reddot-dev/, an
# in-process Kafka broker, ingest, rollup and the API with the live view, and demo data. It prints
# a cheat sheet (URLs, a token, curl / reddot publish / kcat lines). Ctrl-C stops everything; the
# next start reuses the data. Extra arguments go to `reddot dev` (deploy/dev.sh --port 9090, --reset).
#
# Works from any folder: as root, when the account cannot enter the repository's folder (a clone
# under /root, a 0700 folder), the cluster lives in /var/lib/<account>/ instead, and `reddot dev`
# says so in one line; .reddot-dev/env and the rest stay in .reddot-dev/.
#
# REDDOT_DEV_BINARY=/path/to/reddot skips the build and runs that executable (the tests use it).
set -euo pipefail

cd "$(dirname "$0")/.."
say() { echo "dev.sh: $*" >&2; }
# shellcheck source=deploy/packages.sh
. deploy/packages.sh

# --- 1. system packages -------------------------------------------------------------------
missing=()
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
pkg-config --exists libpq 2>/dev/null || missing+=(libpq-dev)
pkg-config --exists rdkafka 2>/dev/null || missing+=(librdkafka-dev)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
install_missing "${missing[@]}"
# Debian's postgresql package starts a system cluster on 5432; RedDot dev runs its own and
# leaves that one alone.

# --- 2. the account PostgreSQL runs as when we are root -----------------------------------
if [ "$(id -u)" -eq 0 ]; then
  pg_user=${REDDOT_DEV_PG_USER:-reddot-dev}
  if ! id "$pg_user" >/dev/null 2>&1; then
    say "creating the system account $pg_user (PostgreSQL refuses to run as root)"
    useradd --system --create-home --home-dir "/var/lib/$pg_user" --shell /usr/sbin/nologin "$pg_user"
  fi
  export REDDOT_DEV_PG_USER=$pg_user
fi

# --- 3. build and run ---------------------------------------------------------------------
if [ -n "${REDDOT_DEV_BINARY:-}" ]; then
  [ -x "$REDDOT_DEV_BINARY" ] || { say "REDDOT_DEV_BINARY=$REDDOT_DEV_BINARY is not an executable file"; exit 1; }
  say "using $REDDOT_DEV_BINARY (REDDOT_DEV_BINARY: no build)"
  exec "$REDDOT_DEV_BINARY" dev --demo "$@"
fi
command -v swift >/dev/null 2>&1 || { say "swift is not on PATH; install Swift 6 (https://swift.org/install)"; exit 1; }
say "building (the first build takes a few minutes)"
log=$(mktemp)
if ! swift build --product reddot >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  say "the build failed (full log: $log)"
  exit 1
fi
rm -f "$log"
exec .build/debug/reddot dev --demo "$@"
