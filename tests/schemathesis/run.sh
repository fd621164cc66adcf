#!/usr/bin/env bash
# schemathesis against a live certlabel server: every 5xx, response-schema violation, undocumented
# status or content type, and accepted schema-invalid request fails the run.
#
#   tests/schemathesis/run.sh                      # a fresh SQLite database in a temp dir
#   VENV=/path/to/venv tests/schemathesis/run.sh   # another virtualenv than .venv
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/certlabel_st tests/schemathesis/run.sh
#   ST_MAX_EXAMPLES=50 ST_SEED=7 tests/schemathesis/run.sh   # more cases, another seed
#
# The database is seeded by tests/schemathesis/seed.py (the demo project, labelling started,
# a manager's and an annotator's token); the server is gunicorn with DEBUG off on a free port.
# A given DATABASE_URL must name a scratch database: it is migrated and filled, never dropped.
# Exit status: schemathesis's (0 when both tokens' runs pass).
set -euo pipefail

cd "$(dirname "$0")/../.."
# The virtualenv: $VENV (as the Makefile and .ci/run set it), else .venv.
PY="${VENV:-.venv}/bin/python"
BIN=$(cd "$(dirname "$PY")" && pwd)  # absolute: the runs below start in the temp dir
MAX_EXAMPLES="${ST_MAX_EXAMPLES:-5}"
SEED="${ST_SEED:-20261201}"

work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

export DATABASE_URL="${DATABASE_URL:-sqlite:///$work/schemathesis.sqlite3}"
export CERTLABEL_RELEASE_ROOT="$work/releases"
export CERTLABEL_MAIL_DIR="$work/mail"  # invitations' e-mails, written as files
export CELERY_BROKER_URL="memory://" CELERY_TASK_ALWAYS_EAGER=true
unset CELERY_RESULT_BACKEND
export CERTLABEL_LOG_FORMAT=kv

echo "schemathesis: seeding $DATABASE_URL"
tokens=$("$PY" tests/schemathesis/seed.py 2>"$work/seed.log") || { cat "$work/seed.log"; exit 1; }
manager=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["manager"])' "$tokens")
annotator=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["annotator"])' "$tokens")

port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
echo "schemathesis: starting gunicorn on 127.0.0.1:$port"
DJANGO_DEBUG=false DJANGO_SECRET_KEY="schemathesis-$(date +%s)-0123456789abcdefghijklmnop" \
  DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost" DJANGO_SECURE_COOKIES=false \
  "$BIN/gunicorn" labeling.wsgi:application --bind "127.0.0.1:$port" --workers 1 --threads 1 \
  --timeout 120 --log-level warning >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 60); do
  "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
    "http://127.0.0.1:$port/accounts/login/" 2>/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; exit 1; }
  sleep 1
done

status=0
for who in manager annotator; do
  token=${!who}
  echo "schemathesis: $who token, $MAX_EXAMPLES examples per operation, seed $SEED"
  (cd "$work" && "$BIN/schemathesis" run "http://127.0.0.1:$port/api/schema/" \
    --header "Authorization: Token $token" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,negative_data_rejection \
    --phases examples,coverage,fuzzing \
    --max-examples "$MAX_EXAMPLES" --seed "$SEED" --workers 1 --request-timeout 60 \
    --suppress-health-check all --generation-database none --no-color ${ST_ARGS:-}) || status=$?
done
if [ "$status" -ne 0 ]; then
  echo "schemathesis: failures (server log follows)"
  tail -n 100 "$work/server.log"
fi
exit "$status"
