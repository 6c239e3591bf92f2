"""docker-compose.yml and the Dockerfile, checked without a Docker engine (none runs here).

Each service's command must name a real entry point: gunicorn's WSGI application imports (through
gunicorn's own loader, with the environment compose gives the web service), celery's ``-A`` resolves
to the platform's Celery app, every option parses with the real gunicorn and celery command-line
parsers, and the workers consume exactly the queues the settings route tasks to.
"""
import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml
from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
SERVICES = {"postgres", "redis", "web", "worker", "beat", "gpu-worker"}
APP_SERVICES = {"web", "worker", "beat", "gpu-worker"}
# Values for the variables docker-compose.yml requires, as a user would export them.
COMPOSE_VARS = {"SECRET_KEY": "compose-test-" + "k" * 50, "POSTGRES_PASSWORD": "compose-test-pw"}


def interpolate(value, variables):
    """Compose's variable substitution: $$, ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?err}."""
    if not isinstance(value, str):
        return value

    def sub(match):
        if match.group(0) == "$$":
            return "$"
        name, op, arg = match.group("name"), match.group("op"), match.group("arg") or ""
        current = variables.get(name)
        if op in (":?", "?"):
            if not current:
                raise KeyError(f"{name} is required: {arg}")
            return current
        if op == ":-":
            return current or arg
        if op == "-":
            return arg if current is None else current
        return current or ""

    return re.sub(r"\$\$|\$\{(?P<name>\w+)(?:(?P<op>:-|-|:\?|\?)(?P<arg>[^}]*))?\}", sub, value)


@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose):
    return compose["services"]


def _command(service) -> list[str]:
    command = service["command"]
    return shlex.split(command) if isinstance(command, str) else list(command)


def _environment(service, variables) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: interpolate("" if value is None else str(value), variables) for key, value in env.items()}


def routed_queues() -> set[str]:
    """Every queue the settings send tasks to: the default queue and each route's queue."""
    queues = {settings.CELERY_TASK_DEFAULT_QUEUE}
    for route in settings.CELERY_TASK_ROUTES.values():
        queues.add(route["queue"])
    return queues


def parse_celery(args: list[str]):
    """Parses a celery command line with celery's own click commands; returns (app, sub, params)."""
    from celery.app.utils import find_app
    from celery.bin.base import CLIContext
    from celery.bin.celery import celery as cli

    names = set(cli.list_commands(None))
    index = next(i for i, arg in enumerate(args) if arg in names)
    group_ctx = cli.make_context("celery", args[: index + 1], resilient_parsing=True)
    app = find_app(group_ctx.params["app"])
    group_ctx.obj = CLIContext(app=app, no_color=True, workdir=None, quiet=True)
    sub = cli.get_command(group_ctx, args[index])
    sub_ctx = sub.make_context(args[index], args[index + 1 :], parent=group_ctx)
    return app, args[index], sub_ctx.params


# --- The services -------------------------------------------------------------------------------

def test_the_six_services_exist(services):
    assert set(services) == SERVICES


def test_required_variables_fail_loudly_without_a_value(compose):
    web_env = compose["services"]["web"]["environment"]
    assert web_env["SECRET_KEY"].startswith("${SECRET_KEY:?"), "SECRET_KEY must be required, never defaulted"
    with pytest.raises(KeyError, match="SECRET_KEY"):
        interpolate(web_env["SECRET_KEY"], {})
    assert "POSTGRES_PASSWORD:?" in compose["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"]


def test_web_runs_gunicorn_on_the_platform_wsgi_application_with_preload(services, tmp_path):
    from gunicorn.config import Config

    command = _command(services["web"])
    assert command[0] == "gunicorn"
    assert (Path(sys.executable).parent / "gunicorn").exists() or shutil.which("gunicorn")
    parsed = Config().parser().parse_args(command[1:])  # argparse: an unknown option exits
    assert parsed.preload_app is True
    assert parsed.args == ["config.wsgi:application"]
    # the platform's gunicorn settings (worker class, threads, memory), as the load benchmark runs them
    assert parsed.config == "config/gunicorn.conf.py" and (ROOT / parsed.config).is_file()

    # Import it as gunicorn does, in a fresh process with the environment compose gives web.
    env = {
        "PATH": os.environ.get("PATH", ""),
        **_environment(services["web"], COMPOSE_VARS),
        "CAPTIONLAB_VAR_DIR": str(tmp_path / "var"),
        "MEDIA_ROOT": str(tmp_path / "media"),
    }
    assert env["CAPTIONLAB_PROFILE"] == "production"
    code = (
        "import sys; from gunicorn.util import import_app; "
        f"app = import_app({parsed.args[0]!r}); "
        "assert callable(app), app; "
        "import config.wsgi as w; assert app is w.application; "
        "heavy = sorted(m for m in ('torch', 'spacy') if m in sys.modules); "
        "assert not heavy, f'the web process imported {heavy}'; print('ok')"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")


@pytest.mark.parametrize("name", ["worker", "beat", "gpu-worker"])
def test_celery_services_name_the_platform_app(services, name):
    from config.celery import app as platform_app

    command = _command(services[name])
    assert command[0] == "celery"
    assert (Path(sys.executable).parent / "celery").exists() or shutil.which("celery")
    app, sub, params = parse_celery(command[1:])
    assert app is platform_app and app.main == "captionlab"
    assert sub == ("beat" if name == "beat" else "worker")


def test_worker_queues_are_the_queues_the_settings_route_to(services):
    assert routed_queues() == {"default", "filters", "aggregate", "gpu"}
    _, _, worker = parse_celery(_command(services["worker"])[1:])
    _, _, gpu = parse_celery(_command(services["gpu-worker"])[1:])
    assert set(worker["queues"]) == {"default", "filters", "aggregate"}
    assert set(gpu["queues"]) == {"gpu"}
    assert set(worker["queues"]) | set(gpu["queues"]) == routed_queues()


def test_every_registered_task_goes_to_a_consumed_queue(services):
    from config.celery import app

    app.loader.import_default_modules()
    consumed = set()
    for name in ("worker", "gpu-worker"):
        consumed |= set(parse_celery(_command(services[name])[1:])[2]["queues"])
    tasks = [t for t in app.tasks if not t.startswith("celery.")]
    assert tasks, "no platform tasks registered"
    for task in tasks:
        route = app.amqp.router.route({}, task)
        assert route["queue"].name in consumed, f"{task} goes to {route['queue'].name}, which no worker consumes"


def test_an_unknown_celery_option_is_caught(services):
    with pytest.raises(click.UsageError):
        parse_celery(["-A", "config", "worker", "--no-such-option"])


def test_only_the_gpu_worker_reserves_an_nvidia_gpu(services):
    devices = services["gpu-worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert any(d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", []) for d in devices)
    for name, service in services.items():
        if name != "gpu-worker":
            assert "devices" not in str(service.get("deploy", {})), f"{name} must not reserve a GPU"
            assert "runtime" not in service
    assert "deploy" not in services["web"]


def test_app_services_share_one_image_environment_and_media(services):
    for name in APP_SERVICES:
        service = services[name]
        assert service["build"] in (".", {"context": "."}) or service["build"].get("context") == "."
        env = _environment(service, COMPOSE_VARS)
        assert env["CAPTIONLAB_PROFILE"] == "production"
        assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:5432/" in env["DATABASE_URL"]
        assert env["REDIS_URL"].startswith("redis://redis:6379")
        assert any(str(v).endswith(":/data/media") for v in service["volumes"]), name
        deps = service["depends_on"]
        assert deps["postgres"]["condition"] == "service_healthy"
        assert deps["redis"]["condition"] == "service_healthy"
    assert _environment(services["web"], COMPOSE_VARS)["CAPTIONLAB_MIGRATE"] == "1"


def test_every_variable_given_to_the_platform_is_one_it_reads(services):
    settings_text = (ROOT / "config" / "settings.py").read_text()
    read_elsewhere = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}  # boto3 reads them itself
    entrypoint = (ROOT / "scripts" / "docker-entrypoint.sh").read_text()
    gunicorn_conf = (ROOT / "config" / "gunicorn.conf.py").read_text()
    for name in APP_SERVICES:
        for key in _environment(services[name], COMPOSE_VARS):
            assert (f'"{key}"' in settings_text or key in read_elsewhere or key in entrypoint
                    or (name == "web" and f'"{key}"' in gunicorn_conf)), (
                f"{name}: {key} is read by nothing (a typo?)"
            )


def test_data_lives_in_volumes_and_services_have_healthchecks(compose, services):
    assert {"pgdata", "media"} <= set(compose["volumes"])
    assert any(str(v).startswith("pgdata:") for v in services["postgres"]["volumes"])
    for name in ("postgres", "redis", "web", "worker", "gpu-worker"):
        assert services[name]["healthcheck"]["test"], name
    assert "ports" not in services["postgres"] and "ports" not in services["redis"]


def test_docker_compose_config_validates_when_a_client_can(tmp_path):
    docker = shutil.which("docker")
    if not docker:
        pytest.skip("no docker client")
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("the docker client has no compose plugin here")
    env = {**os.environ, **COMPOSE_VARS}
    proc = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "--quiet"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


# --- The Dockerfile -------------------------------------------------------------------------------

def _dockerfile_instructions():
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            yield keyword.upper(), rest.strip()


def _dockerignored(path: str) -> bool:
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines() if p.strip() and not p.startswith("#")]
    parts = Path(path).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatch(prefix, pattern) for pattern in patterns for prefix in prefixes)


def test_dockerfile_base_user_and_entry_point():
    instructions = list(_dockerfile_instructions())
    froms = [rest for kw, rest in instructions if kw == "FROM"]
    assert any(f.split()[0] == "python:3.11-slim" for f in froms)
    users = [rest for kw, rest in instructions if kw == "USER"]
    assert users and users[-1] not in ("root", "0"), "the image must run as a non-root user"
    entrypoint = json.loads(next(rest for kw, rest in instructions if kw == "ENTRYPOINT"))
    script = ROOT / entrypoint[0]
    assert script.is_file() and os.access(script, os.X_OK), entrypoint
    cmd = json.loads(next(rest for kw, rest in instructions if kw == "CMD"))
    assert cmd[:2] == ["gunicorn", "config.wsgi:application"] and "--preload" in cmd


def test_dockerfile_copies_files_that_exist_and_are_not_ignored():
    copied = []
    for keyword, rest in _dockerfile_instructions():
        if keyword != "COPY" or "--from=" in rest:
            continue
        *sources, _dest = [a for a in rest.split() if not a.startswith("--")]
        copied += sources
    assert "requirements.txt" in copied and "package-lock.json" in copied
    for source in copied:
        if source == ".":
            continue
        assert (ROOT / source).exists(), f"the Dockerfile copies {source}, which does not exist"
        assert not _dockerignored(source), f"{source} is excluded by .dockerignore"
    for needed in ("manage.py", "config/wsgi.py", "config/celery.py", "scripts/docker-entrypoint.sh",
                   "requirements.txt", "templates", "static"):
        assert (ROOT / needed).exists(), needed
        assert not _dockerignored(needed), f"{needed} is excluded by .dockerignore"
    for secret in (".env", ".venv", ".git", "var"):
        assert _dockerignored(secret), f"{secret} must stay out of the build context"


def test_dockerfile_htmx_comes_from_the_npm_lock():
    lock = json.loads((ROOT / "package-lock.json").read_text())
    version = lock["packages"]["node_modules/htmx.org"]["version"]
    assert version.startswith("2."), version
    text = DOCKERFILE.read_text()
    assert "npm ci" in text and "node_modules/htmx.org/dist/htmx.min.js" in text


def test_dockerfile_secret_key_only_for_collectstatic():
    for keyword, rest in _dockerfile_instructions():
        if keyword in ("ENV", "ARG"):
            assert "SECRET_KEY" not in rest, "no SECRET_KEY may be baked into the image"
        if keyword == "RUN" and "SECRET_KEY" in rest:
            assert "collectstatic" in rest
