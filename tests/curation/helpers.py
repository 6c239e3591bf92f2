"""Small builders of real-looking inputs for ingest tests."""
import csv
import io
import time
import zipfile
from pathlib import Path

from PIL import Image as PILImage

from curation.ingest.runner import import_run
from curation.models import Collection, ImportJob


def png_bytes(size=(64, 48), color=(200, 30, 30)) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", size, color).save(out, "PNG")
    return out.getvalue()


def jpeg_bytes(size=(64, 48), color=(20, 120, 220)) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", size, color).save(out, "JPEG", quality=90)
    return out.getvalue()


def make_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)  # ZipInfo keeps names as given, even ../ and absolute ones
            zf.writestr(info, data)
    return path


def sidecar_csv(rows: list[dict]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def run_import(collection: Collection, kind: str, path: Path, **options) -> ImportJob:
    """Create an import of a server path and run it in this process, as the Celery task would."""
    job = ImportJob.objects.create(collection=collection, kind=kind, source_path=str(path),
                                   source_name=path.name, options=options)
    return import_run(job.pk)


def issues_by_line(job: ImportJob) -> dict:
    return {issue.line: issue.code for issue in job.issues.all()}


def wait_until(predicate, seconds: float, what: str, step: float = 0.1):
    """Poll ``predicate`` until it is true; fail the test after ``seconds``."""
    import pytest

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step)
    pytest.fail(f"timed out waiting for {what}")
