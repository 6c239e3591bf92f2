"""Collections of real photos (../shared/data) and captions for the model-pack tests."""
from __future__ import annotations

import hashlib
from pathlib import Path

from django.core.files.base import ContentFile

from curation.models import Caption, Collection, Image


def photo_collection(photos: Path, name: str = "Open Images sample", limit: int | None = None,
                     captions: dict[int, list[str]] | None = None, broken: int = 0) -> Collection:
    """A collection with one Image per real JPEG (file in storage), each with a caption, plus ``broken`` images
    whose files are not images at all."""
    collection = Collection.objects.create(name=name)
    files = sorted(photos.glob("*.jpg"))[:limit]
    for i, path in enumerate(files):
        data = path.read_bytes()
        image = Image(collection=collection, format="JPEG", status=Image.Status.READY, external_id=path.stem,
                      sha256=hashlib.sha256(data).hexdigest())
        image.file.save(path.name, ContentFile(data), save=True)
        for text in (captions or {}).get(i, [f"photo {path.stem}"]):
            Caption.objects.create(image=image, text=text, origin=Caption.Origin.ALT_TEXT)
    for i in range(broken):
        data = b"\xff\xd8\xff not really a jpeg " + str(i).encode()
        image = Image(collection=collection, format="JPEG", status=Image.Status.READY, external_id=f"broken-{i}",
                      sha256=hashlib.sha256(data).hexdigest())
        image.file.save(f"broken-{i}.jpg", ContentFile(data), save=True)
        Caption.objects.create(image=image, text=f"a broken file {i}", origin=Caption.Origin.ALT_TEXT)
    return collection

