#!/usr/bin/env bash
# One retention prune of old increments (the fold into their counts), with a writer of random
# users beside it, over one state built by SQL, so that builds fold exactly the same work one
# after the other. The state: INCREMENTS increments of 1 over USERS users × 30 paths
# (root.bench.p0…), all stored 8 days ago in arrival order with the users interleaved, as
# ingest leaves them, and all shown (each user's version covers them). Each run copies it into a
# scratch database, starts `REDDOT ingest` there with no broker (its maintenance prunes once at
# start; the default retention, 7 days, has passed for every increment) and, beside it,
# `pgbench` updating random users' write sequences (`user_write`: the row lock every writer of
# a user takes first, which a fold transaction holds for its users). It prints the prune's time
# (to ingest's log line "pruned …") and the writer's transactions and latencies meanwhile.
#
#   deploy/bench/fold_prune.sh SERVER_URL INCREMENTS USERS REDDOT [REDDOT …]
#   deploy/bench/fold_prune.sh postgresql://reddot@127.0.0.1:56432 10000000 200000 old/reddot new/reddot
#
# SERVER_URL has no database name (the role needs CREATEDB; the databases are dropped). Run it
# from the repository (reddot finds migrations/ there). Needs pgbench (Debian's postgresql-15
# package has it).
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 SERVER_URL INCREMENTS USERS REDDOT [REDDOT …]" >&2
  exit 2
fi
server=${1%/}
increments=$2
users=$3
shift 3
# shellcheck source=deploy/bench/arguments.sh
. "$(dirname "$0")/arguments.sh"
require_whole_numbers "$0" "INCREMENTS and USERS" "$increments" "$users"
if [ "$users" -lt 1 ]; then
  echo "$0: USERS must be at least 1" >&2
  exit 2
fi
command -v pgbench >/dev/null || { echo "$0: pgbench is not installed" >&2; exit 2; }
template="reddot_fold_prune_$$"
work=$(mktemp -d)
first=$1

cleanup() {
  psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS ${template}_run WITH (FORCE)" >/dev/null 2>&1 || true
  psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $template WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

psql -q "$server/postgres" -c "CREATE DATABASE $template"
"$first" migrate up --database-url "$server/$template" --log-level warning >/dev/null
psql -q "$server/$template" -v ON_ERROR_STOP=1 <<SQL
ALTER TABLE badge_increment SET (autovacuum_enabled = false);
INSERT INTO badge_increment (user_id, path, occurred_at, amount, shown_in, arrived_at)
SELECT 'user-' || (hashint4(g) & 1048575) % $users, ('root.bench.p' || (hashint4(g * 7 + 1) & 1048575) % 30)::ltree,
       now() - interval '8 days' + g * interval '10 microseconds', 1, 1, now() - interval '8 days' + g * interval '10 microseconds'
FROM generate_series(1, $increments) g
ON CONFLICT DO NOTHING;
INSERT INTO user_version (user_id, version, writes_through) SELECT DISTINCT user_id, 1, 1 FROM badge_increment;
INSERT INTO user_write (user_id, seq) SELECT user_id, 1 FROM user_version;
ALTER TABLE badge_increment RESET (autovacuum_enabled);
VACUUM ANALYZE;
SQL
stored=$(psql -Atq "$server/$template" -c "SELECT count(*) FROM badge_increment")
writers=$(psql -Atq "$server/$template" -c "SELECT count(*) FROM user_write")
echo "state: $stored increments of $writers users, $(psql -Atq "$server/$template" -c "SELECT pg_size_pretty(pg_total_relation_size('badge_increment'))")"
cat > "$work/writer.sql" <<SQL
\set u random(0, $((writers - 1)))
UPDATE user_write SET seq = seq + 1 WHERE user_id = 'user-' || :u;
SQL

for reddot in "$@"; do
  scratch="${template}_run"
  psql -q "$server/postgres" -c "CREATE DATABASE $scratch TEMPLATE $template"
  rm -f "$work"/writer_log*
  (cd "$work" && exec pgbench -n -c 1 -T 86400 -f writer.sql -l --log-prefix=writer_log "$server/$scratch" >"$work/pgbench.out" 2>&1) &
  writer=$!
  sleep 1
  started=$(date +%s.%N)
  "$reddot" ingest --database-url "$server/$scratch" --brokers 127.0.0.1:1 --topic "reddot.fold_prune.$$" \
    --group "reddot-fold-prune-$$" --log-level info >"$work/ingest.log" 2>&1 &
  ingest=$!
  until grep -q "pruned applied event ids" "$work/ingest.log"; do
    if ! kill -0 "$ingest" 2>/dev/null; then
      echo "$reddot: ingest stopped before its prune ended:" >&2
      tail -5 "$work/ingest.log" >&2
      break
    fi
    sleep 0.2
  done
  ended=$(date +%s.%N)
  kill "$ingest" 2>/dev/null || true
  wait "$ingest" 2>/dev/null || true
  pkill -P "$writer" 2>/dev/null || true
  kill "$writer" 2>/dev/null || true
  wait "$writer" 2>/dev/null || true
  left=$(psql -Atq "$server/$scratch" -c "SELECT count(*) FROM badge_increment")
  # pgbench's log: the third field is each transaction's latency in microseconds.
  latencies=$(cat "$work"/writer_log* 2>/dev/null | awk '{print $3}' | sort -n)
  summary=$(echo "$latencies" | awk '
    function at(q,  i) { i = int(n * q); if (i < 1) i = 1; return a[i] / 1000 }
    NF { a[++n] = $1; if ($1 > 100000) { slow++; waited += $1 } if ($1 > 1000000) { over++ } }
    END {
      if (n == 0) { print "no writer transactions logged"; exit }
      printf "writer: %d transactions, p50 %.2f ms, p99 %.2f ms, p99.9 %.1f ms, max %.1f ms; %d waited over 100 ms (%.1f s in all), %d over 1 s\n",
        n, at(0.5), at(0.99), at(0.999), a[n] / 1000, slow, waited / 1e6, over
    }')
  echo "$reddot: prune $(echo "$ended - $started" | bc) s, $left increments left; $summary"
  psql -q "$server/postgres" -c "DROP DATABASE $scratch WITH (FORCE)"
done
