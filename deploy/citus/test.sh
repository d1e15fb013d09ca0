#!/usr/bin/env bash
# RedDot's tests on a throwaway Citus cluster (issue 27; docs/SHARDING.md, "Running the tests on
# Citus"): starts a coordinator and two workers as a non-root user on free ports, each with
# Citus preloaded, exports the variables the tests read (REDDOT_TEST_DATABASE_URL names the
# coordinator, REDDOT_TEST_CITUS_WORKERS the workers), runs `swift test` with the arguments
# given (default: the tests that ask for Citus, `--filter OnCitus`, then the suites of push,
# webhooks, the API, a user's data and dead letters with every test database distributed), and
# stops the cluster whatever happens. Not part of deploy/test.sh: Debian has no Citus package, so the extension
# must be installed first (docs/SHARDING.md says how to build it from source).
#
#   deploy/citus/test.sh                                  # the tests that ask for Citus, and
#                                                         # whole suites on distributed databases
#   REDDOT_TEST_LAYOUT=citus deploy/citus/test.sh --filter BadgeStoreTests
#                                                         # every test database distributed, to
#                                                         # find what Citus still refuses
#
# Environment: REDDOT_TEST_PG_USER names the non-root user PostgreSQL runs as when started by
# root (default: reddot-test, created if missing); REDDOT_TEST_KEEP=1 keeps the data folder.
# Exit codes: what `swift test` returns; 69 when Citus is not installed or a node cannot start.
set -euo pipefail
cd "$(dirname "$0")/../.."

say() { printf '[citus/test.sh] %s\n' "$*" >&2; }
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
{ [ -n "$pg_bin" ] && [ -x "$pg_bin/initdb" ]; } || { say "no PostgreSQL server binaries in /usr/lib/postgresql: run deploy/test.sh once"; exit 69; }
pkglib=$("$pg_bin/pg_config" --pkglibdir 2>/dev/null || pg_config --pkglibdir)
[ -f "$pkglib/citus.so" ] || {
  say "Citus is not installed for $("$pg_bin/postgres" --version) (no $pkglib/citus.so): see docs/SHARDING.md, \"Running the tests on Citus\""
  exit 69
}
command -v swift >/dev/null 2>&1 || { say "swift is not on PATH"; exit 69; }

work=$(mktemp -d /tmp/reddot-citus-test.XXXXXX)
chmod 755 "$work"
run_pg() { "$@"; }
if [ "$(id -u)" -eq 0 ]; then
  pg_user=${REDDOT_TEST_PG_USER:-reddot-test}
  id "$pg_user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$pg_user"
  chown "$pg_user" "$work"
  run_pg() { runuser -u "$pg_user" -- "$@"; }
fi
nodes=(coordinator worker1 worker2)
ports=()
stop() {
  for name in "${nodes[@]}"; do
    [ -d "$work/$name" ] && { run_pg "$pg_bin/pg_ctl" -D "$work/$name" -m immediate -w stop >/dev/null 2>&1 || true; }
  done
  if [ "${REDDOT_TEST_KEEP:-}" = 1 ]; then say "kept $work"; else rm -rf "$work"; fi
}
trap stop EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
for name in "${nodes[@]}"; do
  port=$(free_port)
  ports+=("$port")
  run_pg "$pg_bin/initdb" -D "$work/$name" -U reddot -A trust -E UTF8 --locale=C --no-sync >"$work/$name.initdb.log" 2>&1 ||
    { cat "$work/$name.initdb.log" >&2; exit 69; }
  # Citus opens connections between the nodes and prepares a transaction on each worker that a
  # statement writes; the distributed tables' generic plans lock every shard they name.
  cat >>"$work/$name/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$work'
shared_preload_libraries = 'citus'
max_connections = 300
max_prepared_transactions = 150
max_locks_per_transaction = 256
fsync = off
CONF
  run_pg "$pg_bin/pg_ctl" -D "$work/$name" -l "$work/$name.log" -w -t 60 start >/dev/null ||
    { say "$name did not start:"; tail -n 20 "$work/$name.log" >&2; exit 69; }
done
say "coordinator on 127.0.0.1:${ports[0]}, workers on ${ports[1]} and ${ports[2]} ($work)"

export REDDOT_TEST_DATABASE_URL="postgresql://reddot@127.0.0.1:${ports[0]}/postgres"
export REDDOT_TEST_CITUS_WORKERS="postgresql://reddot@127.0.0.1:${ports[1]}/postgres postgresql://reddot@127.0.0.1:${ports[2]}/postgres"
swift build --build-tests >/dev/null
status=0
if [ $# -eq 0 ]; then
  # The tests that ask for Citus, then whole suites with every test database they make
  # distributed (SchemaLayout.citus): push, webhooks, the API, a user's data, dead letters.
  swift test --skip-build --filter OnCitus || status=$?
  REDDOT_TEST_LAYOUT=citus swift test --skip-build \
    --filter 'BadgeAPITests|PushServiceTests|WebhookServiceTests|InProcessSendersTests|UserDataTests|DeadLetterTests' \
    --skip ReplicaTests || status=$?
else
  swift test --skip-build "$@" || status=$?
fi
[ $status -eq 0 ] || say "swift test failed ($status); the nodes' logs: $work/*.log (REDDOT_TEST_KEEP=1 keeps them)"
exit $status
