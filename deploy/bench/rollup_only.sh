#!/usr/bin/env bash
# The rollup alone, over one backlog state built by SQL, so that two builds roll up exactly the
# same work one after the other. The state is what ingest leaves for EVENTS increments of 1
# spread over USERS users × 30 paths (root.bench.p0…): an increment row and a dirty mark per
# event, the mark carrying the event's delta (additive, as since migration 31), each user's
# write sequence at its last mark. Each run copies it into a scratch
# database, runs `REDDOT rollup --no-change-feed` (its defaults) until no mark is left, and
# prints the time, the users versioned and the CPU of the database's backends and of the
# rollup process (Linux /proc).
#
#   deploy/bench/rollup_only.sh SERVER_URL EVENTS USERS REDDOT[=MIGRATIONS] [REDDOT[=MIGRATIONS] …]
#   deploy/bench/rollup_only.sh postgresql://reddot@127.0.0.1:56432 300000 100000 old/reddot new/reddot old/reddot new/reddot
#
# The state is built on the first build's schema (its MIGRATIONS directory, else migrations/
# under the working directory). With MIGRATIONS, a build first brings its copy to that
# directory's schema (`migrate up`, not timed): two builds with different migrations each roll up
# on their own schema; give the older build first.
#
# With SECOND_BACKLOG=N in the environment, each run then goes on: once the queue is drained, it
# waits for a vacuum of the queue (the rollup's own, `--rollup-queue-vacuum-seconds`, or
# autovacuum's; at most 120 s), adds N more increments the same way over USERS other users, and
# times their drain by the same rollup: a backlog that comes after a vacuum of the emptied
# queue (BENCHMARKS.md, "A claim planned by the statistics of an emptied queue").
#
# SERVER_URL has no database name (the role needs CREATEDB; the scratch databases are dropped).
# Run it from the repository (reddot finds migrations/ there). The template's tables are marked
# never analyzed, as a fresh deployment's are.
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 SERVER_URL EVENTS USERS REDDOT [REDDOT …]" >&2
  exit 2
fi
server=${1%/}
events=$2
users=$3
shift 3
# shellcheck source=deploy/bench/arguments.sh
. "$(dirname "$0")/arguments.sh"
require_whole_numbers "$0" "EVENTS, USERS and SECOND_BACKLOG" "$events" "$users" ${SECOND_BACKLOG:+"$SECOND_BACKLOG"}
template="reddot_rollup_only_$$"
first=${1%%=*}
first_migrations=()
[ "$first" = "$1" ] || first_migrations=(--migrations "${1#*=}")
hz=$(getconf CLK_TCK)

psql -q "$server/postgres" -c "CREATE DATABASE $template"
trap 'psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $template WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
"$first" migrate up --database-url "$server/$template" "${first_migrations[@]}" --log-level warning >/dev/null
# backlog_sql PREFIX EVENTS: the SQL that adds EVENTS increments over USERS users named PREFIX0…,
# each with its increment row, its dirty mark and the user's write sequence.
backlog_sql() {
  cat <<SQL
BEGIN;
CREATE TEMP TABLE ev AS
SELECT g AS n, '$1' || (hashint4(g) & 1048575) % $users AS user_id,
       ('root.bench.p' || (hashint4(g * 7 + 1) & 1048575) % 30)::ltree AS path,
       now() - interval '1 hour' + g * interval '1 millisecond' AS occurred_at
FROM generate_series(1, $2) g;
CREATE TEMP TABLE evs AS SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY n) AS seq FROM ev;
INSERT INTO badge_increment (user_id, path, occurred_at, amount, shown_in) SELECT user_id, path, occurred_at, 1, seq FROM evs;
INSERT INTO dirty_mark (user_id, seq, bump, recount, additive, delta_paths, delta_amounts, delta_unseen, dirtied_at)
SELECT user_id, seq, false, true, true, ARRAY[path], ARRAY[1::bigint], ARRAY[1::bigint], occurred_at FROM evs;
INSERT INTO user_write (user_id, seq) SELECT user_id, max(seq) FROM evs GROUP BY 1;
COMMIT;
SQL
}
{ backlog_sql user- "$events"; echo "VACUUM ANALYZE;"; } | psql -q "$server/$template" -v ON_ERROR_STOP=1
# As a fresh deployment's statistics: a table vacuumed while empty is planned as empty (this
# needs a superuser; without one the tables that start empty are probed by sequential scans).
psql -q "$server/$template" -c "UPDATE pg_class SET reltuples = -1, relpages = 0
  WHERE relname IN ('badge_aggregate', 'badge_aggregate_pkey', 'user_version', 'user_version_pkey', 'badge_change', 'badge_change_pkey')" ||
  echo "$0: could not mark the empty tables never analyzed (needs a superuser): the first rounds will be slow" >&2

backend_ticks() {
  local total=0 pid fields
  for pid in $(pgrep -f "postgres: [^ ]+ $1 " || true); do
    fields=$(cut -d')' -f2- "/proc/$pid/stat" 2>/dev/null) || continue
    # After "pid (comm)": utime and stime are the 12th and 13th fields.
    total=$((total + $(echo "$fields" | awk '{print $12 + $13}')))
  done
  echo "$total"
}

# drained: waits until the scratch database's queue is empty.
drained() {
  until [ "$(psql -Atq "$server/$scratch" -c "SELECT NOT EXISTS (SELECT 1 FROM dirty_mark ORDER BY dirtied_at LIMIT 1)")" = t ]; do
    sleep 0.05
  done
}

for build in "$@"; do
  reddot=${build%%=*}
  scratch="${template}_run"
  psql -q "$server/postgres" -c "CREATE DATABASE $scratch TEMPLATE $template"
  if [ "$reddot" != "$build" ]; then
    "$reddot" migrate up --database-url "$server/$scratch" --migrations "${build#*=}" --log-level warning >/dev/null
  fi
  started=$(date +%s.%N)
  "$reddot" rollup --database-url "$server/$scratch" --no-change-feed --log-level warning &
  rollup=$!
  drained
  ended=$(date +%s.%N)
  database=$(backend_ticks "$scratch")
  process=$(cut -d')' -f2- "/proc/$rollup/stat" | awk '{print $12 + $13}')
  versioned=$(psql -Atq "$server/$scratch" -c "SELECT count(*) FROM user_version")
  echo "$reddot: $(echo "$ended - $started" | bc) s, $versioned users versioned," \
    "PostgreSQL CPU $(echo "scale=2; $database / $hz" | bc) s, rollup CPU $(echo "scale=2; $process / $hz" | bc) s"
  if [ -n "${SECOND_BACKLOG:-}" ]; then
    waited=0
    until [ "$(psql -Atq "$server/$scratch" -c "SELECT vacuum_count + autovacuum_count FROM pg_stat_user_tables WHERE relname = 'dirty_mark'")" -ge 1 ] ||
      [ "$waited" -ge 120 ]; do
      sleep 1
      waited=$((waited + 1))
    done
    queue=$(psql -Atq "$server/$scratch" -c "SELECT relpages || ' pages, ' || reltuples || ' rows' FROM pg_class WHERE relname = 'dirty_mark'")
    backlog_sql next- "$SECOND_BACKLOG" | psql -q "$server/$scratch" -v ON_ERROR_STOP=1
    started=$(date +%s.%N)
    drained
    echo "$reddot: after a vacuum ${waited} s after the drain (the queue then $queue)," \
      "a second backlog of $SECOND_BACKLOG increments drained in $(echo "$(date +%s.%N) - $started" | bc) s"
  fi
  kill "$rollup"
  wait "$rollup" 2>/dev/null || true
  psql -q "$server/postgres" -c "DROP DATABASE $scratch WITH (FORCE)"
done
