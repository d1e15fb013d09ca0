#!/usr/bin/env bash
# Migration 32 as a file against `reddot migrate up --online`, with a writer beside it. Each run
# copies TEMPLATE (a database at schema 31, e.g. what `reddot bench backlog --keep` left) into a
# scratch database, starts pgbench there (2 clients, each transaction an upsert of a random
# user's user_write row, 40 s, a log line per transaction), runs `REDDOT migrate up [--online]`
# 10 s in, and prints how long the migration took, the online swap's time (from its log line)
# and the writer's longest transaction.
#
#   deploy/bench/online_migration.sh SERVER_URL TEMPLATE REDDOT MODE [MODE …]     (MODE: file or online)
#   deploy/bench/online_migration.sh postgresql://reddot@127.0.0.1:56432 reddot_bench_abc123a .build/release/reddot file online file online
#
# SERVER_URL has no database name (the role needs CREATEDB; the scratch databases are dropped).
# Run it from the repository (reddot finds migrations/ there). Needs pgbench and bc.
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 SERVER_URL TEMPLATE REDDOT MODE [MODE …]" >&2
  exit 2
fi
server=$1 template=$2 reddot=$3
shift 3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cat >"$scratch/writer.sql" <<'SQL'
\set u random(1, 100000)
INSERT INTO user_write (user_id, seq) VALUES ('w' || :u, 1) ON CONFLICT (user_id) DO UPDATE SET seq = user_write.seq + 1;
SQL
for mode in "$@"; do
  case $mode in
    file) flag=() ;;
    online) flag=(--online) ;;
    *) echo "$0: MODE is file or online, not '$mode'" >&2; exit 2 ;;
  esac
  database="reddot_online_bench_$mode"
  psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $database" -c "CREATE DATABASE $database TEMPLATE $template"
  psql -q "$server/$database" -c "CHECKPOINT"
  mkdir -p "$scratch/$mode" && rm -f "$scratch/$mode"/pgbench_log.*
  (cd "$scratch/$mode" && pgbench -n -c 2 -j 1 -T 40 -l -f "$scratch/writer.sql" "$server/$database" >pgbench.out 2>&1) &
  writer=$!
  sleep 10
  started=$(date +%s.%N)
  "$reddot" migrate up "${flag[@]}" --database-url "$server/$database" >"$scratch/$mode/migrate.out" 2>&1
  ended=$(date +%s.%N)
  wait "$writer"
  swap=$(grep -o 'migration.swap=[0-9.]* seconds' "$scratch/$mode/migrate.out" || echo "migration.swap=- (the file locks for the whole run)")
  longest=$(cat "$scratch/$mode"/pgbench_log.* | awk '{ if ($3 > m) m = $3; n++ } END { printf "%d transactions, the longest %.1f ms", n, m / 1000 }')
  printf '%s: migrate up took %.2f s; %s; writer: %s\n' "$mode" "$(echo "$ended - $started" | bc)" "$swap" "$longest"
  psql -q "$server/postgres" -c "DROP DATABASE $database"
done
