#!/bin/sh
# Entry point of the CaptionLab image: with CAPTIONLAB_MIGRATE=1 (the web service) it applies the
# migrations first, then runs the service's command (gunicorn, celery worker, celery beat).
set -eu
if [ "${CAPTIONLAB_MIGRATE:-0}" = "1" ]; then
    python manage.py migrate --noinput
fi
exec "$@"
