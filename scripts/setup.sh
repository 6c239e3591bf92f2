#!/usr/bin/env bash
# Sets up a CaptionLab checkout; safe to run again and again (each step is skipped when done).
#
#   1. .venv (python3 -m venv) with requirements-dev.txt, re-installed only when the requirement
#      files change (their hash is kept in .venv/.captionlab-requirements.sha256);
#   2. npm packages from package-lock.json (npm ci), again only when the lock changes;
#   3. htmx copied from node_modules into static/vendor/ (served by the platform: no CDN);
#   4. `manage.py migrate --noinput` on whatever database the environment names
#      (SQLite in var/ by default). SETUP_MIGRATE=0 skips it (`make test` does: pytest makes its
#      own test database).
#
# It never runs `playwright install`: the browser tests use Debian's chromium (/usr/bin/chromium).
# torch==2.13.0 comes from the CPU wheel that pip's find-links point at on the build machines.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PYTHON="${PYTHON:-}"
VENV="$ROOT/.venv"
VPY="$VENV/bin/python"

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

hash_files() { cat "$@" | sha256sum | cut -d' ' -f1; }

# --- 1. Python ------------------------------------------------------------------------------
if [ ! -x "$VPY" ]; then
    if [ -z "$PYTHON" ]; then
        for candidate in python3.11 python3; do
            if command -v "$candidate" >/dev/null 2>&1; then PYTHON="$candidate"; break; fi
        done
    fi
    [ -n "$PYTHON" ] || die "Python 3.11 is needed (python3.11 or python3 on PATH)."
    "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
        || die "$("$PYTHON" --version 2>&1) is too old: CaptionLab needs Python 3.11 or newer."
    say "creating .venv with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv "$VENV"
fi

REQ_STAMP="$VENV/.captionlab-requirements.sha256"
req_hash="$(hash_files requirements.txt requirements-dev.txt)"
if [ -f "$REQ_STAMP" ] && [ "$(cat "$REQ_STAMP")" = "$req_hash" ]; then
    say "Python packages up to date (requirements unchanged)"
else
    # pip's own progress, one line per package with a running count and each download's size
    # (a first install is about 150 packages and 2.5 GB in .venv, torch the largest: minutes).
    total="$(grep -hE '^[A-Za-z0-9]' requirements.txt requirements-dev.txt | wc -l | tr -d ' ')"
    say "installing Python packages from requirements-dev.txt ($total pinned here, ~150 with their dependencies, ~2.5 GB)"
    rm -f "$REQ_STAMP"
    "$VPY" -m pip install --disable-pip-version-check --progress-bar off -r requirements-dev.txt 2>&1 \
        | awk '/^(Collecting|Requirement already satisfied)/ { n++; printf "[setup]   %4d  %s\n", n, $0; fflush(); next }
               /Downloading|^Installing collected|^Successfully installed|^ERROR|error:/ { print "[setup]         " $0; fflush() }'
    say "Python packages installed: .venv is $(du -sh "$VENV" 2>/dev/null | cut -f1)"
    echo "$req_hash" > "$REQ_STAMP"
fi

# --- 2. npm packages --------------------------------------------------------------------------
HTMX_SRC="node_modules/htmx.org/dist/htmx.min.js"
HTMX_DST="static/vendor/htmx.min.js"
NPM_STAMP="node_modules/.captionlab-lock.sha256"
if command -v npm >/dev/null 2>&1; then
    if [ -f package-lock.json ]; then
        lock_hash="$(hash_files package.json package-lock.json)"
        if [ -f "$NPM_STAMP" ] && [ "$(cat "$NPM_STAMP")" = "$lock_hash" ] && [ -f "$HTMX_SRC" ]; then
            say "npm packages up to date (package-lock.json unchanged)"
        else
            say "installing npm packages (npm ci)"
            npm ci --no-audit --no-fund --loglevel=error
            echo "$lock_hash" > "$NPM_STAMP"
        fi
    else
        say "no package-lock.json: npm install"
        npm install --no-audit --no-fund --loglevel=error
    fi
elif [ -f "$HTMX_DST" ]; then
    say "warning: npm not found; keeping the existing $HTMX_DST"
else
    die "npm (Node.js) is needed to install htmx from the npm registry."
fi

# --- 3. htmx into static files ----------------------------------------------------------------
if [ -f "$HTMX_SRC" ]; then
    mkdir -p static/vendor
    if ! cmp -s "$HTMX_SRC" "$HTMX_DST"; then
        cp "$HTMX_SRC" "$HTMX_DST"
        say "copied htmx $(node -p 'require("./node_modules/htmx.org/package.json").version' 2>/dev/null || true) to $HTMX_DST"
    fi
fi
[ -f "$HTMX_DST" ] || die "$HTMX_DST is missing after setup."

# --- 4. database ------------------------------------------------------------------------------
if [ "${SETUP_MIGRATE:-1}" != "0" ]; then
    say "migrating the database ($(if [ -n "${DATABASE_URL:-}" ]; then echo "DATABASE_URL"; else echo "SQLite in ${CAPTIONLAB_VAR_DIR:-var}/"; fi))"
    "$VPY" manage.py migrate --noinput -v 0
fi

say "done"
