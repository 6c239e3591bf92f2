"""The demo: one user per role and a collection of real photographs with noisy alt-text captions.

The photographs are the sample images that ship inside the installed scikit-image package
(``skimage/data``); nothing is downloaded and no image is kept in this repository. They go through
the real ingest: a folder (eager mode) or a zip upload (real workers) with a ``captions.csv``
sidecar, read by ``curation.tasks.run_import`` like any curator's import.

Licences and credits are those scikit-image states for each image in the docstrings of
``skimage/data/_fetchers.py``; where it states none, the licence is left empty (a curator sees it).

Everything is idempotent: groups and users are reused (each run sets fresh passwords), the
collection is reused, and the import is skipped once it is complete (a re-import would add nothing
either: images are deduplicated by sha256, captions by image + text + source).
"""
from __future__ import annotations

import csv
import importlib.util
import io
import secrets
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.files import File
from django.db import transaction

from captionlab import roles

from . import services
from .models import Caption, Collection, Image, ImportJob

COLLECTION_NAME = "Demo: scikit-image photographs"
COLLECTION_DESCRIPTION = (
    "Sample photographs shipped inside the scikit-image package, each with a few noisy "
    "web-alt-text-style captions (file names, boilerplate, wrong facts) and one plausible "
    "caption, for trying the curation filters and the crowd campaigns."
)
SOURCE_NAME = "scikit-image-demo"  # recorded on every caption; the dedup key, so keep it stable
SIDECAR = "captions.csv"

# (role, username, is_staff, is_superuser)
USERS = (
    (roles.ANNOTATOR, "demo-annotator", False, False),
    (roles.ANNOTATOR, "demo-annotator-2", False, False),  # campaigns need two voices
    (roles.CURATOR, "demo-curator", False, False),
    (roles.ADMIN, "demo-admin", True, True),
)

_NOT_STATED = "scikit-image sample data; source and licence not stated by scikit-image"
_MIDDLEBURY = (
    "Middlebury 2014 stereo dataset (D. Scharstein, H. Hirschmueller, Y. Kitajima, G. Krathwohl, "
    "N. Nesic, X. Wang, P. Westling), via scikit-image; licence not stated by scikit-image"
)


@dataclass(frozen=True)
class DemoImage:
    file: str  # the file in skimage/data
    license: str
    credit: str
    captions: tuple[str, ...]
    jpeg: bool = False  # imported as a JPEG, as photo sites serve photographs (scikit-image ships PNG)

    @property
    def name(self) -> str:
        """The file's name in the import (the sidecar's ``file`` column, the image's ``file_name``)."""
        return str(Path(self.file).with_suffix(".jpg")) if self.jpeg else self.file


IMAGES: tuple[DemoImage, ...] = (
    DemoImage(
        "astronaut.png",
        "Public domain (NASA)",
        "NASA Great Images database, https://flic.kr/p/r9qvLn (Eileen Collins)",
        (
            "stock photo: astronaut Eileen Collins in her orange launch suit - click to enlarge picture",
            "IMG_2041.JPG",
            "A smiling astronaut in an orange flight suit poses beside her helmet, a flag and a model of the space shuttle.",
        ),
        jpeg=True,
    ),
    DemoImage(
        "camera.png",
        "CC0",
        "Lav Varshney (photographer), via scikit-image",
        (
            "cameraman_final_v2.png",
            "Profile photo | man with a video camera on a tripod",
            "A man in a dark coat looks through a video camera mounted on a tripod on a grassy field.",
        ),
        jpeg=True,
    ),
    DemoImage(
        "chelsea.png",
        "CC0",
        "Stefan van der Walt (photographer), via scikit-image (Chelsea the cat)",
        (
            "Cat sleeping on a wooden table, Bangkok, 12 March 2008",
            "Chelsea the cat!!! soooo cute #caturday",
            "Close-up of a tabby cat with green eyes looking to the side.",
        ),
        jpeg=True,
    ),
    DemoImage(
        "coffee.png",
        "CC0",
        "Rachel Michetti (photographer), courtesy of Pikolo Espresso Bar, via scikit-image",
        (
            "DSC_0457",
            "Buy espresso cups online - free shipping on orders over $50",
            "A cup of espresso on a red saucer with a spoon, on a wooden table.",
        ),
        jpeg=True,
    ),
    DemoImage(
        "coins.png",
        "No known copyright restrictions",
        "Brooklyn Museum Collection, https://www.brooklynmuseum.org/opencollection/archives/image/51611",
        (
            "Greek coins from Pompeii",
            "embedded image permalink",
            "Rows of ancient coins laid out on a grey background.",
        ),
        jpeg=True,
    ),
    DemoImage(
        "hubble_deep_field.jpg",
        "Public domain (NASA)",
        "NASA, HubbleSite, http://hubblesite.org/newscenter/archive/releases/2012/37/image/a/",
        (
            "hubble xdf 2012 wallpaper 1920x1080 HD free download",
            "Hubble's deepest view of the universe - NASA/ESA, 2012",
            "Thousands of small colourful galaxies scattered across a black sky.",
        ),
    ),
    DemoImage(
        "motorcycle_left.png",
        "",
        _MIDDLEBURY,
        (
            "motorcycle_left.png",
            "For sale: red Yamaha Maxim, runs great, garage kept, call 555-0142",
            "A red motorcycle parked in a garage in front of metal shelves.",
        ),
        jpeg=True,
    ),
    DemoImage(
        "motorcycle_right.png",
        "",
        _MIDDLEBURY,
        (
            "Stereo pair, right view",
            "A red motorbike with a black seat stands on a concrete floor in a workshop.",
        ),
        jpeg=True,
    ),
    DemoImage(
        "rocket.jpg",
        "Public domain (SpaceX)",
        "SpaceX Photos, https://www.flickr.com/photos/spacexphotos/16511594820/ (Falcon 9 carrying DSCOVR)",
        (
            "Falcon 9 / DSCOVR launch, Cape Canaveral, 2015 - SpaceX Photos",
            "rocket",
            "A white rocket stands on the launch pad between tall towers at dusk.",
        ),
    ),
    DemoImage(
        "moon.png",
        "",
        _NOT_STATED,
        (
            "Surface of the moon",
            "moon.png - 512x512 - 49 KB",
            "Craters on a grey, dusty lunar surface.",
        ),
        jpeg=True,
    ),
    DemoImage(
        "grass.png",
        "CC0",
        "linolafett, DeviantArt, https://www.deviantart.com/linolafett/art/Grass-01-434853879",
        (
            "Grass 01 texture by linolafett",
            "seamless grass texture free download for games",
            "A close-up of dense blades of grass in black and white.",
        ),
        jpeg=True,
    ),
    DemoImage(
        "gravel.png",
        "CC0",
        "CC0Textures, https://cc0textures.com/view.php?tex=Gravel04",
        (
            "Gravel04 - CC0Textures",
            "click here to enlarge",
            "Small stones of gravel filling the whole frame.",
        ),
        jpeg=True,
    ),
    DemoImage(
        "brick.png",
        "CC0",
        "CC0Textures, https://cc0textures.com/view.php?tex=Bricks25",
        (
            "bricks25_col.jpg",
            "Brick wall",
            "A wall of long grey bricks seen at an angle.",
        ),
        jpeg=True,
    ),
    DemoImage(
        "retina.jpg",
        "CC0 1.0",
        "Mikael Häggström, Wikimedia Commons, "
        "https://commons.wikimedia.org/wiki/File:Fundus_photograph_of_normal_left_eye.jpg",
        (
            "File:Fundus photograph of normal left eye.jpg - Wikimedia Commons",
            "eye",
            "A photograph of the back of a human eye showing the optic disc and blood vessels.",
        ),
    ),
    DemoImage(
        "page.png",
        "",
        _NOT_STATED,
        (
            "scan0001.png",
            "Region-based segmentation - tutorial page",
            "A printed book page with a paragraph about region-based segmentation and a line of code.",
        ),
    ),
    DemoImage(
        "text.png",
        "Public domain",
        "Wikipedia, https://en.wikipedia.org/wiki/File:Corner.png",
        (
            "Corner.png",
            "math homework help!!!!",
            "Handwritten equations on a sheet of lined paper, photographed at an angle.",
        ),
    ),
)


@dataclass
class DemoUser:
    role: str
    username: str
    password: str
    created: bool


@dataclass
class DemoResult:
    users: list[DemoUser] = field(default_factory=list)
    collection: Collection | None = None
    job: ImportJob | None = None
    import_skipped: bool = False
    missing_files: list[str] = field(default_factory=list)


# --- Users ------------------------------------------------------------------------------------

def ensure_groups() -> None:
    """The role groups; the data migration creates them with their permissions, this only fills a gap."""
    for role in roles.ROLES:
        Group.objects.get_or_create(name=role)


@transaction.atomic
def ensure_users() -> list[DemoUser]:
    """Creates or updates the demo users and gives each a fresh random password."""
    ensure_groups()
    User = get_user_model()
    result = []
    for role, username, is_staff, is_superuser in USERS:
        user, created = User.objects.get_or_create(
            username=username, defaults={"email": f"{username}@example.org"}
        )
        password = secrets.token_urlsafe(12)
        user.set_password(password)
        user.is_active = True
        user.is_staff = is_staff
        user.is_superuser = is_superuser
        user.save()
        user.groups.add(Group.objects.get(name=role))
        result.append(DemoUser(role, username, password, created))
    return result


# --- Photographs ------------------------------------------------------------------------------

def skimage_data_dir() -> Path:
    """skimage/data of the installed scikit-image, found without importing the package."""
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("scikit-image is not installed (pip install -r requirements.txt)")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def available_images(data_dir: Path | None = None) -> tuple[list[DemoImage], list[str]]:
    data_dir = data_dir or skimage_data_dir()
    present = [img for img in IMAGES if (data_dir / img.file).is_file()]
    missing = [img.file for img in IMAGES if not (data_dir / img.file).is_file()]
    return present, missing


def sidecar_csv(images: list[DemoImage]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["file", "caption", "license", "credit"])
    for img in images:
        for caption in img.captions:
            writer.writerow([img.name, caption, img.license, img.credit])
    return out.getvalue()


def image_bytes(img: DemoImage, data_dir: Path) -> bytes:
    """The file as the import reads it: scikit-image's own bytes, or for ``jpeg`` photographs a JPEG
    encoded by Pillow (quality 90; the same Pillow gives the same bytes, so a re-import finds the same
    sha256). Two scans stay PNG, and the conceptual-captions format filter drops them as the paper's
    pipeline would; before the conversion it dropped all but three of the photographs too."""
    if not img.jpeg:
        return (data_dir / img.file).read_bytes()
    from PIL import Image as PILImage

    with PILImage.open(data_dir / img.file) as im:
        out = io.BytesIO()
        (im if im.mode in ("L", "RGB") else im.convert("RGB")).save(out, "JPEG", quality=90)
    return out.getvalue()


def build_folder(folder: Path, images: list[DemoImage], data_dir: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for img in images:
        (folder / img.name).write_bytes(image_bytes(img, data_dir))
    (folder / SIDECAR).write_text(sidecar_csv(images), encoding="utf-8")
    return folder


def build_zip(path: Path, images: list[DemoImage], data_dir: Path) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for img in images:
            zf.writestr(img.name, image_bytes(img, data_dir))
        zf.writestr(SIDECAR, sidecar_csv(images))
    return path


# --- The collection and its import ------------------------------------------------------------

def ensure_collection(user=None) -> Collection:
    collection = Collection.objects.filter(name=COLLECTION_NAME).first()
    if collection is None:
        collection = services.collection_create(
            name=COLLECTION_NAME,
            user=user,
            description=COLLECTION_DESCRIPTION,
            source_kind=Collection.SourceKind.WEB_ALT_TEXT,
            language="en",
        )
    return collection


def _is_complete(collection: Collection, images: list[DemoImage]) -> bool:
    want_captions = sum(len(img.captions) for img in images)
    have_images = collection.images.filter(status=Image.Status.READY).count()
    have_captions = Caption.objects.filter(image__collection=collection, source=SOURCE_NAME).count()
    return have_images >= len(images) and have_captions >= want_captions


def eager() -> bool:
    """Whether tasks run inline (no broker), as the Celery app is configured right now."""
    from celery import current_app as app  # the platform's app (config/celery.py), current once settings load

    return bool(app.conf.task_always_eager)


def start_import(collection: Collection, images: list[DemoImage], data_dir: Path, user=None) -> ImportJob:
    """Eager mode under autocommit (``manage.py demo``): a temporary folder, read inline before it
    is removed. Otherwise (real workers, or a caller's open transaction that defers the task to its
    commit): a zip upload, kept in storage, which a worker on another machine (docker compose)
    reads like any upload."""
    options = {"origin": Caption.Origin.ALT_TEXT, "sidecar": SIDECAR, "language": "en"}
    with tempfile.TemporaryDirectory(prefix="captionlab-demo-") as tmp:
        if eager() and not transaction.get_connection().in_atomic_block:
            folder = build_folder(Path(tmp) / "scikit-image-demo", images, data_dir)
            return services.import_create(
                collection=collection, kind=ImportJob.Kind.IMAGES, source_path=str(folder),
                source_name=SOURCE_NAME, options=options, user=user,
            )
        archive = build_zip(Path(tmp) / "scikit-image-demo.zip", images, data_dir)
        with archive.open("rb") as fh:
            return services.import_create(
                collection=collection, kind=ImportJob.Kind.IMAGES, upload=File(fh, name=archive.name),
                source_name=SOURCE_NAME, options=options, user=user,
            )


def wait_for(job: ImportJob, *, timeout: float = 600.0, out=None) -> ImportJob:
    """Waits for a job run by workers, with a progress line on the terminal."""
    out = out or sys.stdout
    tty = hasattr(out, "isatty") and out.isatty()
    deadline = time.monotonic() + timeout
    last = None
    while True:
        job.refresh_from_db()
        line = (f"import #{job.pk}: {job.get_status_display():<20} {job.percent:3d}% "
                f"rows {job.rows_read}/{job.rows_total if job.rows_total is not None else '?'}")
        if tty:
            bar = "#" * (job.percent // 4)
            out.write(f"\r[{bar:<25}] {line}")
            out.flush()
        elif line != last:
            out.write(line + "\n")
        last = line
        if job.finished:
            if tty:
                out.write("\n")
            return job
        if time.monotonic() > deadline:
            if tty:
                out.write("\n")
            raise TimeoutError(
                f"import #{job.pk} is still {job.status} after {timeout:.0f}s: is a worker running? "
                "(`make worker` with the same DATABASE_URL and REDIS_URL)"
            )
        time.sleep(0.5)


def load(*, wait: bool = True, timeout: float = 600.0, reimport: bool = False, out=None) -> DemoResult:
    """The whole demo; returns what it did (the command prints it)."""
    result = DemoResult()
    result.users = ensure_users()
    curator = get_user_model().objects.get(username="demo-curator")
    data_dir = skimage_data_dir()
    images, result.missing_files = available_images(data_dir)
    if not images:
        raise RuntimeError(f"none of the demo photographs were found in {data_dir}")
    result.collection = ensure_collection(curator)

    pending = result.collection.imports.filter(
        source_name=SOURCE_NAME,
        status__in=[ImportJob.Status.QUEUED, ImportJob.Status.RUNNING, ImportJob.Status.DOWNLOADING],
    ).first()
    if pending is not None and not eager():
        result.job = pending  # an earlier run queued it; wait for that one instead of queueing again
    elif not reimport and _is_complete(result.collection, images):
        result.import_skipped = True
        result.job = result.collection.imports.filter(source_name=SOURCE_NAME).first()
        return result
    else:
        result.job = start_import(result.collection, images, data_dir, user=curator)

    result.job.refresh_from_db()
    # In eager mode the import has already run, unless the caller holds a transaction open (the
    # task then runs on commit): waiting would never end, so only wait for real workers.
    if wait and not result.job.finished and not eager():
        if not workers_consuming("default"):
            raise RuntimeError(
                f"Import #{result.job.pk} is queued, but no Celery worker consumes the 'default' queue on "
                f"{settings.CELERY_BROKER_URL}: start one (`make worker`, with the same DATABASE_URL and REDIS_URL) "
                "and it will run the import; or pass --no-wait to queue it and return at once.")
        result.job = wait_for(result.job, timeout=timeout, out=out)
    return result


def workers_consuming(queue: str, timeout: float = 2.0) -> list[str]:
    """Names of the running Celery workers that consume ``queue`` (asked over the broker; [] when none
    answers within ``timeout`` seconds)."""
    from celery import current_app as app  # the platform's app (config/celery.py), current once settings load

    try:
        replies = app.control.inspect(timeout=timeout).active_queues() or {}
    except Exception:  # noqa: BLE001 - a broker that cannot be reached: nobody consumes anything
        return []
    return sorted(name for name, queues in replies.items() if any(q.get("name") == queue for q in queues or []))
