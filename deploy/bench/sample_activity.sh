#!/usr/bin/env bash
# Samples what PostgreSQL's client backends are doing, every 100 ms, for a number of seconds:
# one line per active backend and sample, "<wait event type>/<wait event> <statement's first
# line>" ("CPU/-" when it waits for nothing). Run it beside a benchmark, then count:
#
#   deploy/bench/sample_activity.sh "$REDDOT_DATABASE_URL" 120 > samples.txt
#   cut -d' ' -f1 samples.txt | sort | uniq -c | sort -rn
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 DATABASE_URL SECONDS" >&2
  exit 2
fi
url=$1
seconds=$2
case $seconds in
  '' | *[!0-9]*) echo "$0: SECONDS must be a whole number, not '$seconds'" >&2; exit 2 ;;
esac
end=$((SECONDS + seconds))
while [ "$SECONDS" -lt "$end" ]; do
  psql "$url" -Atc "SELECT coalesce(wait_event_type, 'CPU') || '/' || coalesce(wait_event, '-') || ' ' || split_part(query, E'\n', 1)
                    FROM pg_stat_activity
                    WHERE state = 'active' AND backend_type = 'client backend' AND pid <> pg_backend_pid()" || true
  sleep 0.1
done
