"""The settings profiles, each loaded in a fresh process with a clean environment.

* production: `check --deploy` reports nothing with a strong key; no SECRET_KEY (or no
  ALLOWED_HOSTS), a known-weak or short key, or DEBUG=true refuses to start with a message that names it;
  gunicorn binds loopback unless GUNICORN_BIND says otherwise;
* development (the default): SQLite in CAPTIONLAB_VAR_DIR and Celery eager with no DATABASE_URL /
  REDIS_URL; PostgreSQL and a broker when they are given.
"""
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

DUMP = """
import json, django
django.setup()
from django.conf import settings as s
db = s.DATABASES["default"]
print("JSON" + json.dumps({
    "profile": s.PROFILE, "debug": s.DEBUG, "engine": db["ENGINE"], "name": str(db["NAME"]),
    "host": db.get("HOST", ""), "eager": s.CELERY_TASK_ALWAYS_EAGER, "broker": s.CELERY_BROKER_URL,
    "backend": s.CELERY_RESULT_BACKEND, "secret_key": s.SECRET_KEY, "storage": s.STORAGES["default"]["BACKEND"],
    "allowed_hosts": s.ALLOWED_HOSTS, "nosniff": s.SECURE_CONTENT_TYPE_NOSNIFF,
}))
"""


@pytest.fixture
def clean_env(tmp_path):
    """Only what a process needs to start: no DATABASE_URL, REDIS_URL, SECRET_KEY, DEBUG..."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "CAPTIONLAB_VAR_DIR": str(tmp_path / "var"),
    }


@pytest.fixture
def production_env(clean_env):
    return {
        **clean_env,
        "CAPTIONLAB_PROFILE": "production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "example.org",
    }


def run(args, env, timeout=120):
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def manage(env, *args):
    return run([sys.executable, "manage.py", *args], env)


def load_settings(env) -> dict:
    proc = run([sys.executable, "-c", DUMP], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("JSON"))
    return json.loads(line[4:])


# --- Production -----------------------------------------------------------------------------------

def test_production_check_deploy_reports_nothing(production_env):
    assert "DEBUG" not in production_env
    proc = manage(production_env, "check", "--deploy", "--fail-level", "WARNING")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "System check identified no issues" in output, output
    assert "WARNINGS" not in output and "ERRORS" not in output


def test_production_refuses_to_start_without_secret_key(production_env):
    del production_env["SECRET_KEY"]
    proc = manage(production_env, "check")
    assert proc.returncode != 0
    assert "ImproperlyConfigured" in proc.stderr
    assert "SECRET_KEY is not set" in proc.stderr


def test_production_refuses_an_empty_secret_key(production_env):
    production_env["SECRET_KEY"] = ""
    proc = manage(production_env, "check")
    assert proc.returncode != 0 and "SECRET_KEY" in proc.stderr


def test_production_refuses_to_start_without_allowed_hosts(production_env):
    del production_env["ALLOWED_HOSTS"]
    proc = manage(production_env, "check")
    assert proc.returncode != 0
    assert "ALLOWED_HOSTS" in proc.stderr


@pytest.mark.parametrize("key", ["changeme", "secret", "django-insecure-" + "x1" * 30, "too-short", "a" * 60])
def test_production_refuses_a_known_weak_or_short_secret_key(production_env, key):
    proc = manage({**production_env, "SECRET_KEY": key}, "check")
    assert proc.returncode != 0 and "SECRET_KEY is" in proc.stderr and "refuses it" in proc.stderr


def test_production_refuses_debug(production_env):
    proc = manage({**production_env, "DEBUG": "true"}, "check")
    assert proc.returncode != 0 and "DEBUG=true is refused" in proc.stderr


def test_development_keeps_any_key_and_debug(clean_env):
    values = load_settings({**clean_env, "SECRET_KEY": "changeme", "DEBUG": "true"})
    assert values["secret_key"] == "changeme" and values["debug"] is True


def test_gunicorn_binds_loopback_unless_told_otherwise():
    conf = ROOT / "config" / "gunicorn.conf.py"
    code = f"import runpy; print(runpy.run_path({str(conf)!r})['bind'])"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    assert run([sys.executable, "-c", code], env).stdout.strip() == "127.0.0.1:8000"
    assert run([sys.executable, "-c", code], {**env, "GUNICORN_BIND": "0.0.0.0:9000"}).stdout.strip() == "0.0.0.0:9000"


def test_production_settings(production_env):
    values = load_settings(production_env)
    assert values["profile"] == "production"
    assert values["debug"] is False
    assert values["secret_key"] == production_env["SECRET_KEY"]
    assert values["allowed_hosts"] == ["example.org"]
    assert values["nosniff"] is True


def test_unknown_profile_is_refused(clean_env):
    proc = manage({**clean_env, "CAPTIONLAB_PROFILE": "prod"}, "check")
    assert proc.returncode != 0 and "CAPTIONLAB_PROFILE" in proc.stderr


# --- Development: the embedded default, and the real services ----------------------------------

def test_default_is_sqlite_and_eager_celery(clean_env, tmp_path):
    values = load_settings(clean_env)
    assert values["profile"] == "development"
    assert values["debug"] is True
    assert values["engine"] == "django.db.backends.sqlite3"
    assert Path(values["name"]) == tmp_path / "var" / "db.sqlite3"
    assert values["eager"] is True
    assert values["broker"].startswith("memory://")
    assert values["backend"] is None
    assert values["storage"] == "django.core.files.storage.FileSystemStorage"


def test_development_key_is_random_per_checkout_and_stable(clean_env, tmp_path):
    first = load_settings(clean_env)["secret_key"]
    key_file = tmp_path / "var" / "dev-secret-key"
    assert key_file.read_text().strip() == first and len(first) >= 50
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert load_settings(clean_env)["secret_key"] == first
    other = {**clean_env, "CAPTIONLAB_VAR_DIR": str(tmp_path / "other-var")}
    assert load_settings(other)["secret_key"] != first


def test_database_url_selects_postgresql(clean_env):
    env = {**clean_env, "DATABASE_URL": "postgres://captionlab:pw@db.example.org:5432/captionlab"}
    values = load_settings(env)
    assert values["engine"] == "django.db.backends.postgresql"
    assert values["name"] == "captionlab"
    assert values["host"] == "db.example.org"
    assert values["eager"] is True  # still no REDIS_URL


def test_redis_url_turns_off_eager_mode(clean_env):
    env = {**clean_env, "REDIS_URL": "redis://redis.example.org:6379/0"}
    values = load_settings(env)
    assert values["eager"] is False
    assert values["broker"] == values["backend"] == "redis://redis.example.org:6379/0"


def test_storage_backend_s3_and_unknown(clean_env):
    values = load_settings({**clean_env, "STORAGE_BACKEND": "s3", "AWS_STORAGE_BUCKET_NAME": "captions"})
    assert values["storage"] == "storages.backends.s3.S3Storage"
    proc = manage({**clean_env, "STORAGE_BACKEND": "ftp"}, "check")
    assert proc.returncode != 0 and "STORAGE_BACKEND" in proc.stderr


DUMP_COOKIES = """
import json, django
django.setup()
from django.conf import settings as s
print("JSON" + json.dumps({"session_secure": s.SESSION_COOKIE_SECURE, "csrf_secure": s.CSRF_COOKIE_SECURE,
                           "redirect": s.SECURE_SSL_REDIRECT, "hsts": s.SECURE_HSTS_SECONDS}))
"""


def _cookies(env) -> dict:
    proc = run([sys.executable, "-c", DUMP_COOKIES], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("JSON"))[4:])


def test_production_behind_tls_sends_secure_cookies_and_hsts(production_env):
    values = _cookies(production_env)
    assert values == {"session_secure": True, "csrf_secure": True, "redirect": True, "hsts": 31_536_000}


def test_the_http_only_local_mode_is_explicit_and_warned_about(production_env):
    env = {**production_env, "CAPTIONLAB_HTTP_ONLY": "true"}
    values = _cookies(env)
    assert values == {"session_secure": False, "csrf_secure": False, "redirect": False, "hsts": 0}
    proc = manage(env, "check", "--deploy")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "captionlab.W001" in output and "travel in clear" in output
    assert "security.W012" not in output  # one explicit warning instead of Django's four


def test_the_compose_stack_names_its_http_mode():
    text = (ROOT / "docker-compose.yml").read_text()
    assert "CAPTIONLAB_HTTP_ONLY:" in text and "TLS" in text
