"""Which fluency classifier version scored or reranked what.

One dict names a fluency ModelVersion wherever it is recorded (a captioner run's data summary and
version info, a generated caption's metadata, a generation job's options, a release item's
provenance): ``{"pk", "version", "trainer", "artifact_sha256"}``, plus what it did there. The pk alone
would not survive a database restore, the version number alone not a renumbering; the checksum names
the weights whatever happens to the rows.

No torch here: the web process and the release freezer import this module.
"""
from __future__ import annotations

from collections import Counter


def version_entry(version, **extra) -> dict:
    """The recorded form of a fluency ModelVersion (``extra``: role, source, counts)."""
    return {"pk": version.pk, "version": version.version, "trainer": (version.config or {}).get("trainer", ""),
            "artifact_sha256": version.artifact_sha256, **extra}


def release_versions(numbers: set[int], pks: set[int]) -> dict:
    """{("fluency", version number) | ("pk", pk): ModelVersion} of the fluency versions numbered ``numbers``
    and the versions ``pks``: what a release item's provenance names (``releases.model_provenance``, which
    modeling's ready() gives this and ``version_entry``)."""
    from django.db.models import Q

    from modeling.models import Kind, ModelVersion

    query = Q(kind=Kind.FLUENCY, version__in=numbers) | Q(pk__in=pks)
    found = {}
    for version in ModelVersion.objects.filter(query).select_related("run"):
        found[("pk", version.pk)] = version
        if version.kind == Kind.FLUENCY:
            found[("fluency", version.version)] = version
    return found


def filter_version_of(provenance: dict) -> int | None:
    """The pk of the fluency version whose filter decision scored a release item, when the release
    names it (releases frozen before fluency versions were recorded do not)."""
    for entry in ((provenance or {}).get("models") or {}).get("fluency") or ():
        if entry.get("role") == "filter" and entry.get("pk") is not None:
            return int(entry["pk"])
    return None


def training_data_versions(rows: list[dict], classifier=None, classified: int = 0) -> dict | None:
    """The fluency version that scored a captioner's training data, for ``data_summary``.

    ``rows``: the release rows with their ``fluency`` score and ``fluency_version`` (pk named by the
    release, or None); ``classifier``: the version that scored the ``classified`` rows the release had
    no score for. The version that scored most rows is the one named; when several did, all are
    listed under ``all`` so a mixed training set is visible."""
    from modeling.models import ModelVersion

    counts: Counter = Counter()
    unnamed = 0
    for r in rows:
        if r.get("fluency_version") is not None:
            counts[r["fluency_version"]] += 1
        elif r.get("fluency") is not None and not r.get("fluency_by_classifier"):
            unnamed += 1
    versions = {v.pk: v for v in ModelVersion.objects.filter(pk__in=list(counts))}
    entries = []
    for pk, n in counts.most_common():
        if pk in versions:
            entries.append(version_entry(versions[pk], source="release fluency filter", scored=n))
        else:  # named by the release, deleted since: the scores stay, their version is unknown
            unnamed += n
    if classifier is not None and classified:
        entries.append(version_entry(classifier, source="active fluency classifier", scored=classified))
    entries.sort(key=lambda e: -e["scored"])
    if not entries:
        if not unnamed:
            return None
        return {"pk": None, "version": None, "trainer": "", "artifact_sha256": "", "source": "release fluency filter",
                "scored": unnamed, "note": "the release does not name the fluency version of its filter decisions"}
    best = dict(entries[0])
    if len(entries) > 1 or unnamed:
        best["all"] = entries
        if unnamed:
            best["unnamed"] = unnamed
    return best


__all__ = ["version_entry", "release_versions", "filter_version_of", "training_data_versions"]
