"""A captioner is never scored against its own outputs.

Generated captions go back into the collection (``origin="model"``, metadata naming the ModelVersion
that wrote them, ``modeling.generate``). Releases frozen since ``include_model_captions`` existed
never put them in a test split (``releases.model_captions``), but an older release can: its
BLEU-4 then rewards a captioner for repeating itself (0.712 against 0.332 on the same outputs).

``check_release_references(release, version_or_run)`` raises TrainingError(code="own_outputs") when
the release's test split holds captions written by the same captioner lineage: the version itself
and every captioner version of the same trainer (``captioner-lstm``, ``captioner-transformer``...),
since a new run of a trainer reproduces the style its earlier versions wrote into the collection.
Captions of other lineages in a test split are not refused here; the run records flag test splits
that are not human-verified.

No torch here: the web process calls it when a run is created.
"""
from __future__ import annotations

from ..trainers.base import TrainingError


def _trainer_of(version_or_run) -> tuple[str, set[int]]:
    """(trainer name, pks of the versions that are this run or version itself)."""
    from ..models import ModelVersion, TrainingRun

    if isinstance(version_or_run, ModelVersion):
        return str((version_or_run.config or {}).get("trainer", "")), {version_or_run.pk}
    if isinstance(version_or_run, TrainingRun):
        own = set(ModelVersion.objects.filter(run=version_or_run).values_list("pk", flat=True))
        return str((version_or_run.config or {}).get("trainer", "")), own
    return str(version_or_run or ""), set()


def generated_test_references(release) -> dict[int, int]:
    """{ModelVersion pk: test references} of the model-generated captions in the release's test split
    (the item's provenance names its captioner; else the lineage's model captions name it in their
    metadata)."""
    from django.db.models import Q

    from curation.models import Caption
    from releases.models import ReleaseItem

    counts: dict[int, int] = {}
    unnamed: dict[int, list[int]] = {}  # item -> model caption ids of its lineage
    model_items = (ReleaseItem.objects.filter(release=release, split="test")
                   .filter(Q(provenance__origin="model") | Q(provenance__lineage__contains=[{"origin": "model"}]))
                   .values_list("pk", "provenance"))
    for pk, provenance in model_items.iterator(chunk_size=2000):
        named = ((provenance.get("models") or {}).get("captioner") or {}).get("pk")
        if isinstance(named, int):
            counts[named] = counts.get(named, 0) + 1
        else:
            unnamed[pk] = [n["caption"] for n in provenance.get("lineage") or ()
                           if n.get("origin") == "model" and n.get("caption") is not None]
    ids = {c for captions in unnamed.values() for c in captions}
    metadata = dict(Caption.objects.filter(pk__in=ids).values_list("pk", "metadata")) if ids else {}
    for captions in unnamed.values():
        for caption in captions:
            named = (metadata.get(caption) or {}).get("model_version")
            if isinstance(named, int):
                counts[named] = counts.get(named, 0) + 1
                break
    return counts


def check_release_references(release, version_or_run) -> None:
    """Refuse (TrainingError, code own_outputs) a release whose test references a captioner of this
    lineage wrote; ``version_or_run``: a ModelVersion, a TrainingRun or a trainer name."""
    from ..models import Kind, ModelVersion

    if release is None:
        return
    trainer, own = _trainer_of(version_or_run)
    generated = generated_test_references(release)
    if not generated:
        return
    ours = [v for v in ModelVersion.objects.filter(pk__in=list(generated), kind=Kind.CAPTIONER).order_by("version")
            if v.pk in own or (trainer and (v.config or {}).get("trainer") == trainer)]
    if not ours:
        return
    n = sum(generated[v.pk] for v in ours)
    names = ", ".join(f"captioner v{v.version}" for v in ours)
    raise TrainingError(
        f"The test split of release {release.name!r} holds {n} caption(s) written by {names} "
        f"({trainer or 'this captioner'}): scoring it against its own outputs would reward repeating them. "
        "Freeze a new release (model captions are never test references now) and use that one.",
        code="own_outputs")


__all__ = ["check_release_references", "generated_test_references"]
