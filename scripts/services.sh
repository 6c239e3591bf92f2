# shellcheck shell=bash
# Sourced by scripts/test.sh and `make bench`: finds PostgreSQL and Redis on this machine.
#
# use_local_services: when DATABASE_URL is unset and PostgreSQL answers at 127.0.0.1:5432 (as user
# postgres, trust auth), exports DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres; the same
# for Redis at 127.0.0.1:6379 (REDIS_URL=redis://127.0.0.1:6379/0). Variables already set are kept.
# Otherwise the embedded default stays (SQLite, Celery eager) and it says so.

CAPTIONLAB_LOCAL_PG_URL="${CAPTIONLAB_LOCAL_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
CAPTIONLAB_LOCAL_REDIS_URL="${CAPTIONLAB_LOCAL_REDIS_URL:-redis://127.0.0.1:6379/0}"

_svc_py() { "${VPY:-.venv/bin/python}" "$@"; }

# postgres_answers URL: connects and runs SELECT 1 (3 s timeout).
postgres_answers() {
    _svc_py - "$1" <<'PY' >/dev/null 2>&1
import sys
import psycopg
with psycopg.connect(sys.argv[1], connect_timeout=3) as conn:
    conn.execute("SELECT 1")
PY
}

# redis_answers URL: PING -> PONG (3 s timeout).
redis_answers() {
    _svc_py - "$1" <<'PY' >/dev/null 2>&1
import sys
import redis
assert redis.Redis.from_url(sys.argv[1], socket_timeout=3, socket_connect_timeout=3).ping()
PY
}

use_local_services() {
    if [ -n "${DATABASE_URL:-}" ]; then
        echo "[services] database: DATABASE_URL from the environment"
    elif postgres_answers "$CAPTIONLAB_LOCAL_PG_URL"; then
        export DATABASE_URL="$CAPTIONLAB_LOCAL_PG_URL"
        echo "[services] database: PostgreSQL answers at 127.0.0.1:5432 -> DATABASE_URL=$DATABASE_URL"
    else
        echo "[services] database: no PostgreSQL at 127.0.0.1:5432 -> embedded SQLite (PostgreSQL-only tests skip)"
    fi
    if [ -n "${REDIS_URL:-}" ]; then
        echo "[services] broker: REDIS_URL from the environment"
    elif redis_answers "$CAPTIONLAB_LOCAL_REDIS_URL"; then
        export REDIS_URL="$CAPTIONLAB_LOCAL_REDIS_URL"
        echo "[services] broker: Redis answers at 127.0.0.1:6379 -> REDIS_URL=$REDIS_URL"
    else
        echo "[services] broker: no Redis at 127.0.0.1:6379 -> Celery eager mode (real-worker tests skip)"
    fi
}
