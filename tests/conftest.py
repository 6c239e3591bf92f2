"""Shared fixtures: named personas (Alice curates, Bob annotates, Carol administers), the shared
test data folder, and per-test media storage."""
import contextlib
import os
import socket
from pathlib import Path

import pytest
from django.contrib.auth.models import Group

from captionlab import roles
from tests.browser_helpers import CHROMIUM, CHROMIUM_ARGS, make_user
from tests.network_guard import OutsideConnection, loopback

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SHARED_PHOTOS = SHARED / "data" / "openimages-cc-by"

# CI sets CAPTIONLAB_REQUIRE_SERVICES=1 so a missing PostgreSQL or Redis fails instead of skipping.
REQUIRE_SERVICES = os.environ.get("CAPTIONLAB_REQUIRE_SERVICES") == "1"


@pytest.fixture
def shared_photos() -> Path:
    if not SHARED_PHOTOS.is_dir():
        pytest.skip(f"shared test photos not found at {SHARED_PHOTOS} (../shared is absent)")
    return SHARED_PHOTOS


@pytest.fixture(autouse=True)
def _media_root(tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "media"), "base_url": "/media/"},
        },
    }


@pytest.fixture(autouse=True)
def _model_fits_inline(settings):
    """The model-based fits run in the test process: a child process per pass would add about two
    seconds of imports to every aggregation test. tests/annotation/test_model_process.py runs the
    production path (a child process) and checks it gives the same rows."""
    settings.ANNOTATION_MODELS_PROCESS = "inline"


def _user(django_user_model, username, role=None, **extra):
    user = django_user_model.objects.create_user(username=username, password=f"{username}-pw-123", **extra)
    if role:
        group, _ = Group.objects.get_or_create(name=role)
        user.groups.add(group)
    return user


@pytest.fixture
def alice(db, django_user_model):
    """Alice is a curator."""
    return _user(django_user_model, "alice", roles.CURATOR)


@pytest.fixture
def bob(db, django_user_model):
    """Bob is an annotator."""
    return _user(django_user_model, "bob", roles.ANNOTATOR)


@pytest.fixture
def carol(db, django_user_model):
    """Carol is an admin."""
    return _user(django_user_model, "carol", roles.ADMIN)


@pytest.fixture
def dave(db, django_user_model):
    """Dave has an account but no role."""
    return _user(django_user_model, "dave")


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def bob_client(client, bob):
    client.force_login(bob)
    return client


@pytest.fixture
def eager_celery():
    """Run tasks inline for this test, whether or not REDIS_URL is set."""
    from config.celery import app

    saved = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    yield app
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved


@contextlib.contextmanager
def _celery_worker(queues):
    """A real Celery worker (a thread, solo pool) consuming ``queues`` from Redis. Skips without REDIS_URL,
    or fails when CAPTIONLAB_REQUIRE_SERVICES=1."""
    from celery.contrib.testing.worker import start_worker
    from celery.signals import task_postrun

    from config.celery import app

    if not os.environ.get("REDIS_URL"):
        if REQUIRE_SERVICES:
            pytest.fail("CAPTIONLAB_REQUIRE_SERVICES=1 but REDIS_URL is not set")
        pytest.skip("REDIS_URL is not set: no Redis broker for a real Celery worker")
    saved = app.conf.task_always_eager
    app.conf.task_always_eager = False
    # The worker runs in a thread with its own database connection: close it after each task so
    # the test database can be dropped at the end of the session.
    task_postrun.connect(_close_connections)
    try:
        with start_worker(app, pool="solo", concurrency=1, perform_ping_check=False, queues=list(queues),
                          shutdown_timeout=60):
            yield app
    finally:
        task_postrun.disconnect(_close_connections)
        app.conf.task_always_eager = saved


@pytest.fixture
def redis_worker(transactional_db):
    """A real Celery worker consuming the ``default`` and ``aggregate`` queues from Redis, as the
    production worker does."""
    with _celery_worker(["default", "aggregate"]) as app:
        yield app


@pytest.fixture
def gpu_worker(transactional_db):
    """A real Celery worker consuming the ``gpu`` queue (training, learning-loop rounds, generation, where
    the settings route "modeling.*") and ``default`` (aggregation, the loop's sweep) from Redis."""
    with _celery_worker(["gpu", "default", "aggregate"]) as app:
        yield app


def _close_connections(**kwargs):
    from django.db import connections

    connections.close_all()


@pytest.fixture(scope="session")
def _tiny_clip_source(tmp_path_factory):
    from tests.modeling.tiny_clip import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("tiny-clip-src") / "tiny-clip")


@pytest.fixture
def models_dir(tmp_path, settings):
    """An empty CAPTIONLAB_MODELS_DIR for this test (and no model loaded from an earlier one)."""
    import pack

    settings.CAPTIONLAB_MODELS_DIR = tmp_path / "models"
    settings.CAPTIONLAB_MODELS_DIR.mkdir()
    pack.clear_cache()
    yield settings.CAPTIONLAB_MODELS_DIR
    pack.clear_cache()


@pytest.fixture
def tiny_clip(db, models_dir, _tiny_clip_source):
    """A tiny CLIP (random weights, built by tests/modeling/tiny_clip.py) copied into the models dir and
    registered through the real code: the PretrainedModel row."""
    import shutil

    import pack

    shutil.copytree(_tiny_clip_source, models_dir / "tiny-clip")
    return pack.model_add_pretrained(directory="tiny-clip", name="tiny-clip", licence="MIT (random test weights)",
                                     source="built by tests/modeling/tiny_clip.py")


@pytest.fixture
def shot(tmp_path):
    """``shot(page_or_locator, name)``: a screenshot under this test's tmp_path (pytest keeps the last
    three runs' folders), never a fixed name in the system temporary folder that parallel runs share."""
    folder = tmp_path / "screens"
    folder.mkdir(exist_ok=True)

    def save(target, name: str) -> Path:
        path = folder / f"{name}.png"
        full_page = {"full_page": True} if hasattr(target, "goto") else {}  # a Page, not a Locator
        target.screenshot(path=str(path), **full_page)
        return path

    return save


@pytest.fixture
def no_outside_network(monkeypatch):
    """Any connect() to an address that is not loopback fails the test (DNS lookups too)."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    attempts = []

    def guard(real):
        def connect(self, address):
            if self.family in (socket.AF_INET, socket.AF_INET6) and not loopback(address):
                attempts.append(address)
                raise OutsideConnection(f"outside connection to {address!r}")
            return real(self, address)
        return connect

    def no_lookup(host, *args, **kwargs):
        if not loopback((host,)):
            attempts.append(host)
            raise OutsideConnection(f"DNS lookup of {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    real_getaddrinfo = socket.getaddrinfo
    monkeypatch.setattr(socket.socket, "connect", guard(real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guard(real_connect_ex))
    monkeypatch.setattr(socket, "getaddrinfo", no_lookup)
    yield attempts
    assert not attempts, f"outside connections attempted: {attempts}"


# The browser tests' fixtures (tests/test_*_browser.py): Debian's chromium driven by Playwright.

@pytest.fixture
def browser(transactional_db):
    # Everything that touches the database in this test's thread (personas, the database fixture)
    # must be set up before Playwright starts its event loop: while a loop runs, Django keeps the
    # thread's connection in a separate, async-context slot that the teardown would never close.
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


@pytest.fixture
def curator(transactional_db, django_user_model):
    return make_user(django_user_model, "alice", roles.CURATOR)


@pytest.fixture
def annotator(transactional_db, django_user_model):
    return make_user(django_user_model, "bob", roles.ANNOTATOR)
