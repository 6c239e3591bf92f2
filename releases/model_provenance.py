"""Which models scored or made a release item, named in its provenance (and so in the manifest and the
content hash): ``provenance["models"]["fluency"]``, the fluency classifier versions, each with its role,
and ``provenance["models"]["captioner"]`` for a caption a captioner generated.

Roles of a fluency version: ``filter`` (its score decided the item in the run's fluency step),
``rerank`` (it chose the caption among a captioner's beam candidates) and ``captioner training
data`` (it scored the data the captioner that wrote the caption was trained on). Each entry is
modeling.captioning.provenance.version_entry: pk, version, trainer, artifact sha256.

The model versions live in the app above releases (modeling): its ``ready()`` registers a provider
(``register_provider``) that finds them and writes their entries; releases never import it.

``annotate`` runs once per batch of items, before they are written: a few queries per batch, none
per item. Items that no model touched are left as they are.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class Provider(NamedTuple):
    """``find(fluency version numbers, version pks) -> {("fluency", number) | ("pk", pk): version}``, where a
    version has ``pk``, ``kind``, ``version``, ``config``, ``run_id``; ``entry(version, **extra) -> dict``, the
    recorded form of a version (``{"pk", "version", "trainer", "artifact_sha256", **extra}``)."""

    find: Callable[[set, set], dict]
    entry: Callable[..., dict]


_provider: Provider | None = None


def register_provider(find: Callable[[set, set], dict], entry: Callable[..., dict]) -> None:
    """Called by the app that holds the model versions (modeling's ``ready()``)."""
    global _provider
    _provider = Provider(find, entry)


def annotate(items: list, run=None) -> list:
    """``items`` (unsaved ReleaseItem objects) with the model versions added to their provenance."""
    filtered = _filter_versions(items, run)
    generated = _generated(items)
    if not filtered and not generated:
        return items
    versions = _versions(filtered, generated)
    for item in items:
        fluency = []
        for caption_id in _lineage_ids(item):
            number = filtered.get(caption_id)
            if number is not None and ("fluency", number) in versions:
                fluency.append(_entry(versions[("fluency", number)], role="filter"))
            if caption_id in generated:
                captioner, more = _generated_entries(generated[caption_id], versions)
                if captioner:
                    item.provenance.setdefault("models", {})["captioner"] = captioner
                fluency += more
        if fluency:
            unique = {(e["pk"], e["role"]): e for e in fluency}
            item.provenance.setdefault("models", {})["fluency"] = sorted(unique.values(),
                                                                         key=lambda e: (e["role"], e["pk"] or 0))
    return items


def _lineage_ids(item) -> list[int]:
    return [node["caption"] for node in item.provenance.get("lineage") or () if node.get("caption") is not None]


def _filter_versions(items, run) -> dict[int, int]:
    """{caption id: version number of the fluency classifier its fluency decision names}."""
    from curation.models import FilterDecision

    if run is None:
        return {}
    ids = {cid for item in items if "fluency" in ((item.provenance.get("models") or {}).get("scored_by") or ())
           for cid in _lineage_ids(item)}
    if not ids:
        return {}
    rows = (FilterDecision.objects.filter(run=run, filter_name="fluency", caption_id__in=ids)
            .values_list("caption_id", "details__model_version"))
    return {cid: int(number) for cid, number in rows if isinstance(number, int)}


def _generated(items) -> dict[int, dict]:
    """{caption id: metadata} of the captions in the items' lineages that a captioner generated."""
    from curation.models import Caption

    ids = {node["caption"] for item in items for node in item.provenance.get("lineage") or ()
           if node.get("origin") == Caption.Origin.MODEL}
    if not ids:
        return {}
    return dict(Caption.objects.filter(pk__in=ids).values_list("pk", "metadata"))


def _versions(filtered: dict, generated: dict) -> dict:
    """{("fluency", version number) | ("pk", pk): model version} of every version named, from the registered
    provider (none registered: no versions, and the items are left as they are)."""
    if _provider is None:
        return {}
    numbers = set(filtered.values())
    pks = set()
    for meta in generated.values():
        pks.add(meta.get("model_version"))
        for key in ("fluency_version", "training_fluency_version"):
            if isinstance(meta.get(key), dict):
                pks.add(meta[key].get("pk"))
    return _provider.find(numbers, {pk for pk in pks if isinstance(pk, int)})


def _generated_entries(meta: dict, versions: dict) -> tuple[dict | None, list[dict]]:
    """The captioner that wrote a caption, and the fluency versions that reranked it or scored the
    captioner's training data (from the caption's metadata, else from the captioner's version)."""
    captioner = versions.get(("pk", meta.get("model_version")))
    fluency = []
    rerank = meta.get("fluency_version")
    if isinstance(rerank, dict) and ("pk", rerank.get("pk")) in versions:
        fluency.append(_entry(versions[("pk", rerank["pk"])], role="rerank"))
    training = meta.get("training_fluency_version")
    if captioner is not None and not training:
        training = ((captioner.config or {}).get("info") or {}).get("fluency_version")
    if isinstance(training, dict):
        named = versions.get(("pk", training.get("pk")))
        fluency.append(_entry(named, role="captioner training data") if named else
                       {**{k: training.get(k) for k in ("pk", "version", "trainer", "artifact_sha256")},
                        "role": "captioner training data"})
    if captioner is None:
        return None, fluency
    entry = _entry(captioner, run=captioner.run_id)
    entry.pop("role", None)
    return entry, fluency


def _entry(version, **extra) -> dict:
    return _provider.entry(version, **extra)


__all__ = ["annotate", "register_provider", "Provider"]
