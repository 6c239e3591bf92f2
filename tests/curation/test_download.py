"""Image downloads: SSRF checks on every hop, size and time limits, and failures in the report."""
import http.server
import threading
import time

import pytest

from curation.ingest import download
from curation.ingest.report import RowError
from curation.models import Collection, Image, ImportJob

from .helpers import jpeg_bytes, run_import

JPEG = jpeg_bytes(size=(80, 60))


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict = {}

    def do_GET(self):
        route = self.routes.get(self.path.split("?")[0])
        if route is None:
            self.send_error(404)
            return
        kind, value = route
        if kind == "redirect":
            self.send_response(302)
            self.send_header("Location", value)
            self.end_headers()
        elif kind == "trickle":
            # One byte at a time, each well inside any per-read timeout: only a wall clock stops it.
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.end_headers()
            try:
                for byte in JPEG[: int(value * 10)]:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass
        elif kind == "slow":
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.end_headers()
            self.wfile.write(JPEG[:100])
            self.wfile.flush()
            time.sleep(value)
        else:
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.send_header("Content-Length", str(len(value)))
            self.end_headers()
            self.wfile.write(value)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """A local image server on 127.0.0.1 (the only address these tests send traffic to)."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    _Handler.routes = {}
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield base, _Handler.routes
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def allow_local(settings):
    settings.DOWNLOAD_ALLOWED_PRIVATE_NETWORKS = ["127.0.0.1/32"]


@pytest.mark.parametrize("url, kind", [
    ("http://127.0.0.1/a.jpg", "loopback"),
    ("http://localhost/a.jpg", "loopback"),
    ("http://[::1]/a.jpg", "loopback"),
    ("http://10.0.0.5/a.jpg", "private"),
    ("http://192.168.1.20/a.jpg", "private"),
    ("http://172.16.0.1/a.jpg", "private"),
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://[fe80::1]/a.jpg", "link-local"),
    ("http://[::ffff:127.0.0.1]/a.jpg", "loopback"),
    ("http://0.0.0.0/a.jpg", "non-public"),
    ("http://100.64.0.1/a.jpg", "non-public"),
])
def test_urls_whose_host_is_not_public_are_refused_before_any_connection(url, kind, monkeypatch):
    monkeypatch.setattr(download.socket, "create_connection", lambda *a, **k: pytest.fail("connected"))
    with pytest.raises(RowError) as err:
        download.fetch(url)
    assert err.value.code == "blocked_address"
    assert kind.split("-")[0] in err.value.message or kind == "non-public"


@pytest.mark.parametrize("url", ["ftp://example.org/a.jpg", "file:///etc/passwd", "javascript:alert(1)",
                                 "gopher://example.org/", "//example.org/a.jpg", "http://user:pw@example.org/a.jpg"])
def test_urls_that_are_not_plain_http_or_https_are_refused(url):
    with pytest.raises(RowError) as err:
        download.fetch(url)
    assert err.value.code == "bad_url"


def test_an_allowed_network_downloads_and_verifies_the_image(server, allow_local):
    base, routes = server
    routes["/photo.jpg"] = ("body", JPEG)
    assert download.fetch(f"{base}/photo.jpg").data == JPEG


def test_redirects_are_checked_again_at_every_hop(server, allow_local, monkeypatch):
    base, routes = server
    routes["/to-metadata"] = ("redirect", "http://169.254.169.254/latest/meta-data/iam")
    routes["/to-private"] = ("redirect", "http://10.1.2.3/internal.jpg")
    routes["/to-ok"] = ("redirect", "/photo.jpg")
    routes["/photo.jpg"] = ("body", JPEG)
    for path in ("/to-metadata", "/to-private"):
        with pytest.raises(RowError) as err:
            download.fetch(base + path)
        assert err.value.code == "blocked_address"
    assert download.fetch(base + "/to-ok").data == JPEG


def test_a_download_over_the_size_cap_is_cut_off(server, allow_local):
    base, routes = server
    routes["/big.jpg"] = ("body", b"\xff" * 5000)
    with pytest.raises(RowError) as err:
        download.fetch(f"{base}/big.jpg", max_bytes=1000)
    assert err.value.code == "too_large"


def test_a_download_slower_than_the_timeout_is_abandoned(server, allow_local):
    base, routes = server
    routes["/slow.jpg"] = ("slow", 60)
    start = time.monotonic()
    with pytest.raises(RowError) as err:
        download.fetch(f"{base}/slow.jpg", timeout=0.5)
    assert err.value.code == "timeout"
    # it gave up on its deadline, not when the server finished (a wide margin: a busy machine is slow)
    assert time.monotonic() - start < 30


def test_a_server_trickling_bytes_is_stopped_at_the_wall_clock_deadline(server, allow_local):
    base, routes = server
    routes["/trickle.jpg"] = ("trickle", 60)  # 60 s of one byte per 0.1 s
    start = time.monotonic()
    with pytest.raises(RowError) as err:
        download.fetch(f"{base}/trickle.jpg", timeout=1.0)
    elapsed = time.monotonic() - start
    assert err.value.code == "timeout"
    assert "longer than 1 s" in err.value.message
    # stopped at the 1 s deadline, not when the server stopped trickling (a wide margin for a busy machine)
    assert elapsed < 30, f"the download held the slot {elapsed:.1f} s against a 1 s deadline"


@pytest.mark.django_db
def test_a_tsv_import_downloads_good_images_and_reports_each_failure_by_line(
        tmp_path, server, allow_local, eager_celery, django_capture_on_commit_callbacks):
    base, routes = server
    routes["/ok.jpg"] = ("body", JPEG)
    routes["/same.jpg"] = ("body", JPEG)
    routes["/text.jpg"] = ("body", b"<html>not an image</html>")
    routes["/meta"] = ("redirect", "http://169.254.169.254/")
    tsv = tmp_path / "cc.tsv"
    tsv.write_text(
        f"a dog on the beach\t{base}/ok.jpg\n"
        f"the same photo under another address\t{base}/same.jpg\n"
        f"a page pretending to be a photo\t{base}/text.jpg\n"
        f"gone\t{base}/missing.jpg\n"
        f"metadata\t{base}/meta\n"
        "private\thttp://192.168.0.10/x.jpg\n"
    )
    collection = Collection.objects.create(name="downloads")
    with django_capture_on_commit_callbacks(execute=True):
        job = run_import(collection, ImportJob.Kind.TSV, tsv)
    job.refresh_from_db()
    assert job.status == ImportJob.Status.DONE
    assert (job.downloads_total, job.downloads_done, job.downloads_failed) == (6, 2, 4)
    codes = {issue.line: issue.code for issue in job.issues.all()}
    assert codes == {2: "duplicate_image", 3: "not_an_image", 4: "http_error", 5: "blocked_address", 6: "blocked_address"}
    image = Image.objects.get(collection=collection, status=Image.Status.READY)
    assert sorted(image.captions.values_list("text", flat=True)) == ["a dog on the beach", "the same photo under another address"]
    assert Image.objects.filter(collection=collection, status=Image.Status.FAILED).count() == 4
