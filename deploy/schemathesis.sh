#!/usr/bin/env bash
# Checks a running `reddot serve` against its own OpenAPI document with schemathesis (PyPI):
# no 5xx, and every status, content type, header, body and stream event as /openapi.yaml says.
#
#   deploy/schemathesis.sh                          # a scratch database on the PG* server
#   deploy/schemathesis.sh postgresql://…/scratch   # or REDDOT_DATABASE_URL: a throwaway database
#
# It migrates the database, seeds two users (u42, the document's example user, and u7), starts
# `reddot serve` on a free loopback port with a random HS256 secret, waits for /readyz, signs an
# admin token and runs `schemathesis run` with every check; then stops the server, drops the
# scratch database (never one you named: that one keeps the seeded users and what the run
# cleared) and exits with schemathesis's status (1 also when the server logged a failed request).
#
# Environment:
#   REDDOT_BIN                   the reddot binary (default .build/debug/reddot, built if missing)
#   REDDOT_SCHEMATHESIS_EXAMPLES examples per operation and phase (default 100)
#   REDDOT_SCHEMATHESIS_SEED     a seed, to replay a run (default: random; printed at the end)
#   REDDOT_SCHEMATHESIS_ARGS     extra arguments for `schemathesis run` (split on spaces)
#   PGHOST, PGPORT, PGUSER, …    where the scratch database is created (needs CREATEDB)
#
# Not checked: POST /v1/events, which without Kafka brokers answers 503 by design.
set -euo pipefail
caller_dir=$(pwd)
cd "$(dirname "$0")/.."

say() { printf '[schemathesis.sh] %s\n' "$*" >&2; }

command -v schemathesis >/dev/null 2>&1 || { say "schemathesis is not installed: pip install schemathesis"; exit 1; }

reddot=${REDDOT_BIN:-.build/debug/reddot}
case $reddot in /*) ;; *) [ -z "${REDDOT_BIN:-}" ] || reddot="$caller_dir/$reddot" ;; esac
if [ ! -x "$reddot" ]; then
  say "building $reddot"
  swift build --product reddot >&2
fi

work=$(mktemp -d /tmp/reddot-schemathesis.XXXXXX)
server_pid=
ticker_pid=
schemathesis_pid=
scratch_database=
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local status=$?
  if [ -n "$schemathesis_pid" ]; then kill "$schemathesis_pid" 2>/dev/null || true; wait "$schemathesis_pid" 2>/dev/null || true; fi
  if [ -n "$ticker_pid" ]; then kill "$ticker_pid" 2>/dev/null || true; wait "$ticker_pid" 2>/dev/null || true; fi
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ -n "$scratch_database" ]; then
    dropdb --if-exists --force "$scratch_database" >/dev/null 2>&1 || say "could not drop the scratch database $scratch_database"
  fi
  if [ "$status" -ne 0 ] && [ -s "$work/serve.log" ]; then
    say "the server's last log lines:"; tail -n 20 "$work/serve.log" >&2
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the database ----------------------------------------------------------------------------
database_url=${1:-${REDDOT_DATABASE_URL:-}}
if [ -z "$database_url" ]; then
  scratch_database="reddot_schemathesis_$$_$RANDOM"
  createdb "$scratch_database"
  database_url="dbname=$scratch_database"
  say "scratch database $scratch_database on ${PGHOST:-the default host}:${PGPORT:-5432}"
fi
export REDDOT_DATABASE_URL=$database_url
unset REDDOT_KAFKA_BROKERS

"$reddot" migrate up --migrations migrations --log-level warning
seed() { "$reddot" badges apply --log-level warning "$@" >/dev/null; }
seed --user u42 --op set --path root.chat.c7 --count 3
seed --user u42 --op set --path root.chat.c9 --count 120
seed --user u42 --op set --path root.shop.sale --count 0 --icon new
seed --user u42 --op incr --path root.profile --by 1
seed --user u7 --op set --path root.feed --count 1

# --- the server --------------------------------------------------------------------------------
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
REDDOT_JWT_HS256_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
export REDDOT_JWT_HS256_SECRET
"$reddot" serve --host 127.0.0.1 --port "$port" --live-view --log-level warning >"$work/serve.log" 2>&1 &
server_pid=$!
base="http://127.0.0.1:$port"
for _ in $(seq 1 100); do
  if curl -fsS "$base/readyz" >/dev/null 2>&1; then break; fi
  kill -0 "$server_pid" 2>/dev/null || { say "reddot serve exited"; exit 1; }
  sleep 0.1
done
curl -fsS "$base/readyz" >/dev/null || { say "reddot serve is not ready after 10 s"; exit 1; }
token=$("$reddot" token --admin --expires-in 3600)
say "reddot serve on $base; running schemathesis $(schemathesis --version 2>/dev/null | awk '{print $NF}')"

# --- schemathesis ------------------------------------------------------------------------------
# A long-poll whose since is the current version rightly waits its whole wait (up to 60 s), and
# schemathesis soon learns the seeded users' versions from the answers; an event stream never
# ends. A change to both users about every second ends such waits the way a real change does
# (a long-poll answers 200 with the new version; a stream sends its change event), so the run
# stays short. A long-poll that did not wake on a change would still show as a response over 65 s.
tick() {
  while sleep 0.5; do
    for user in u42 u7; do
      "$reddot" badges apply --log-level error --user "$user" --op incr --path root.ticker >/dev/null 2>&1 || true
    done
  done
}
tick &
ticker_pid=$!

# Every check (`enabled = true` turns on all of them, as `--checks all` would), with these exceptions:
# - positive_data_acceptance, for getBadges only: its query parameters depend on each other
#   (wait needs since; paths excludes path and depth), which OpenAPI cannot state per parameter,
#   so schemathesis draws "valid" combinations that the server rightly answers 400;
# - negative_data_rejection also takes 413: a request over the body limit (16 KiB) is refused
#   for its size before its fields are read, and the document declares that answer;
# The stream is read for two events (the snapshot, then a change) or 10 s at most.
# This is a config file because `--checks all` on the command line would win over the
# per-operation settings.
cat >"$work/schemathesis.toml" <<'TOML'
[checks]
enabled = true
max_response_time = 65
negative_data_rejection.expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]

[[operations]]
include-operation-id = "getBadges"
checks.positive_data_acceptance.enabled = false

# State-dependent answers, declared in the document: an action at a seen_version (or If-Match)
# later than any version the tree has had answers 412; a delta poll from a version outside the
# log (ahead of the tree, or pruned) answers 410. And for the actions, 400 when seen_version and
# If-Match name different versions: a rule across two parameters, which OpenAPI cannot state.
[[operations]]
include-operation-id = "clearBadges"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "412", "429", "5xx"]

[[operations]]
include-operation-id = "markSeen"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "412", "429", "5xx"]

[[operations]]
include-operation-id = "getBadgeChanges"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "410", "429", "5xx"]

[[operations]]
include-operation-id = "streamBadges"
max-stream-events = 2
request-timeout = 10
TOML
# schemathesis quotes a path parameter as if it were escaped already, so a schema-valid user id
# holding '%' and two hex digits (a user id may: any visible ASCII) reaches the server as an
# escape, naming another id: '^,~Z%EF%BF%BD' arrived as '^,~Z' and U+FFFD, rightly refused with
# 400. The hook drops exactly that failure: "schema-valid request rejected" whose user id, read
# from the URL sent as the server reads it, is not a valid id. (Sending '%' as '%25' instead broke
# the negative cases, whose values schemathesis has escaped before such a hook sees them.)
cat >"$work/reddot_schemathesis_hooks.py" <<'PYTHON'
from urllib.parse import unquote, urlsplit

import schemathesis


def _valid_user_id(user):
    return 1 <= len(user) <= 128 and user != "*" and all("!" <= ch <= "~" for ch in user)


@schemathesis.hook
def filter_failure(context, failure, case, response):
    if getattr(failure, "code", None) != "ST202" or response is None or response.status_code != 400:
        return True
    segments = urlsplit(response.request.url).path.split("/")
    if len(segments) < 4 or segments[1:3] != ["v1", "users"] or "%" not in segments[3]:
        return True
    return _valid_user_id(unquote(segments[3]))
PYTHON
export PYTHONPATH="$work${PYTHONPATH:+:$PYTHONPATH}" SCHEMATHESIS_HOOKS=reddot_schemathesis_hooks
arguments=(
  --config-file "$work/schemathesis.toml"
  run "$base/openapi.yaml"
  --header "Authorization: Bearer $token"
  --max-examples "${REDDOT_SCHEMATHESIS_EXAMPLES:-100}"
  --exclude-path /v1/events
  --request-timeout 70
  --generation-database none
  --no-color
)
[ -n "${REDDOT_SCHEMATHESIS_SEED:-}" ] && arguments+=(--seed "$REDDOT_SCHEMATHESIS_SEED")
# shellcheck disable=SC2206
[ -n "${REDDOT_SCHEMATHESIS_ARGS:-}" ] && arguments+=(${REDDOT_SCHEMATHESIS_ARGS})
# In the background, so that INT or TERM reach the trap at once rather than after the run.
schemathesis "${arguments[@]}" &
schemathesis_pid=$!
status=0
wait "$schemathesis_pid" || status=$?
schemathesis_pid=
if grep -q 'request failed' "$work/serve.log"; then
  say "the server logged failed requests:"; grep 'request failed' "$work/serve.log" | head -n 20 >&2
  [ "$status" -ne 0 ] || status=1
fi
exit "$status"
