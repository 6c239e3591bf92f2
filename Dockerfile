# syntax=docker/dockerfile:1
# CaptionLab image: one image for web (gunicorn), worker, beat and gpu-worker (docker-compose.yml).
#
#   docker compose build && docker compose up
#
# torch==2.13.0 is installed from PyPI, which on x86_64 Linux is the CUDA build the gpu-worker
# uses. For a smaller CPU-only image pass the PyTorch CPU index through pip's own variable:
#   docker compose build --build-arg PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu

# --- Front-end assets from the npm registry (htmx), pinned by package-lock.json ---------------
FROM node:20-slim AS assets
WORKDIR /assets
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --loglevel=error

# --- The platform -----------------------------------------------------------------------------
FROM python:3.11-slim
ARG PIP_EXTRA_INDEX_URL=
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    CAPTIONLAB_VAR_DIR=/app/var \
    MEDIA_ROOT=/data/media \
    STATIC_ROOT=/app/staticfiles

WORKDIR /app
COPY requirements.txt ./
RUN pip install -r requirements.txt

COPY . .
COPY --from=assets /assets/node_modules/htmx.org/dist/htmx.min.js static/vendor/htmx.min.js

# collectstatic needs settings to load: a throwaway random key for this one step only (never in the image's
# environment; the production profile refuses to start without a strong SECRET_KEY at run time).
RUN SECRET_KEY="$(python -c 'import secrets; print(secrets.token_urlsafe(50))')" \
    CAPTIONLAB_PROFILE=production ALLOWED_HOSTS=localhost CAPTIONLAB_VAR_DIR=/tmp/build-var \
    python manage.py collectstatic --noinput -v 0 \
 && rm -rf /tmp/build-var

# An unprivileged user owns only what it writes: var/ (beat schedule) and the media volume.
RUN groupadd --system --gid 10001 captionlab \
 && useradd --system --uid 10001 --gid captionlab --home-dir /app --shell /usr/sbin/nologin captionlab \
 && mkdir -p /app/var /data/media \
 && chown -R captionlab:captionlab /app/var /data/media \
 && chmod 0755 scripts/docker-entrypoint.sh
USER captionlab

EXPOSE 8000
ENTRYPOINT ["scripts/docker-entrypoint.sh"]
CMD ["gunicorn", "config.wsgi:application", "-c", "config/gunicorn.conf.py", "--bind", "0.0.0.0:8000", "--preload", "--access-logfile", "-"]
