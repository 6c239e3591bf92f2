#!/usr/bin/env bash
# The body of `make test` (after scripts/setup.sh): Debian chromium when possible, PostgreSQL and
# Redis when this machine runs them, then the whole pytest suite. Extra arguments go to pytest
# (`make test PYTEST_ARGS="-k ingest -x"`).
#
# pytest's exit code 5 ("no tests were collected") is a failure here, never a silent success.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VPY="$ROOT/.venv/bin/python"
[ -x "$VPY" ] || { echo "[test] .venv is missing: run scripts/setup.sh (or make test)" >&2; exit 1; }

bash scripts/install-chromium.sh

# shellcheck source=scripts/services.sh
. scripts/services.sh
use_local_services

if [ "${CAPTIONLAB_REQUIRE_SERVICES:-0}" = "1" ]; then
    case "${DATABASE_URL:-}" in
        postgres://*|postgresql://*|pgsql://*) ;;
        *) echo "[test] CAPTIONLAB_REQUIRE_SERVICES=1 but DATABASE_URL is not PostgreSQL" >&2; exit 1 ;;
    esac
    postgres_answers "$DATABASE_URL" || { echo "[test] PostgreSQL does not answer at DATABASE_URL" >&2; exit 1; }
    [ -n "${REDIS_URL:-}" ] && redis_answers "$REDIS_URL" \
        || { echo "[test] CAPTIONLAB_REQUIRE_SERVICES=1 but Redis does not answer at REDIS_URL" >&2; exit 1; }
fi

echo "[test] pytest on $(if [ -n "${DATABASE_URL:-}" ]; then echo PostgreSQL; else echo SQLite; fi)" \
     "with Celery $(if [ -n "${REDIS_URL:-}" ]; then echo "via Redis"; else echo "eager"; fi)"
set +e
# shellcheck disable=SC2086
"$VPY" -m pytest ${PYTEST_ARGS:-} "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "[test] pytest collected no tests (exit 5): that is a failure" >&2
    exit 1
fi
exit "$rc"
