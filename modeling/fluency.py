"""Fluency scores from a registered fluency classifier (seed 004): ``score`` and ``rerank``.

``score(texts)`` gives f, the classifier's probability that each sentence is fluent (the seed's four-way
LSTM averages its branches; the encoder head reads a sentence encoder's vector),
with the active ModelVersion of kind "fluency" (or the version given). The model is loaded once per
process (modeling.registry caches it by version and checksum) and run in batches on the CPU.
``rerank(candidates)`` orders candidate captions by f, highest first (the seed's "late translation
rerank": a captioner's beam candidates ordered by their estimated fluency).
"""
from __future__ import annotations

from .models import Kind, ModelVersion
from .trainers.base import TrainingError

BATCH = 1024


class NoFluencyModel(TrainingError):
    """No fluency classifier version is active (and none was given)."""

    def __init__(self, message: str = "No fluency classifier is active: train one and activate it on the "
                                      "models page."):
        super().__init__(message, code="no_active_version")


def resolve(version=None) -> ModelVersion:
    """The ModelVersion to use: the one given (a ModelVersion, its pk or its version number) or the
    active fluency version; NoFluencyModel when there is none."""
    from .registry import active_version

    if version is None:
        found = active_version(Kind.FLUENCY)
        if found is None:
            raise NoFluencyModel()
        return found
    if isinstance(version, ModelVersion):
        if version.kind != Kind.FLUENCY:
            raise TrainingError(f"{version} is not a fluency classifier.", code="bad_config")
        return version
    found = ModelVersion.objects.filter(kind=Kind.FLUENCY, version=int(version)).first()
    if found is None:
        raise NoFluencyModel(f"There is no fluency classifier version {int(version)}.")
    return found


def score(texts: list[str], version=None, sources: list[str | None] | None = None,
          batch_size: int = BATCH) -> list[float]:
    """f in [0, 1] per text (1 = fluent). ``sources``: the source-language sentences where known
    (the model's source branches are averaged in only for those)."""
    from .registry import load_version

    texts = list(texts)
    if not texts:
        return []
    if sources is not None and len(sources) != len(texts):
        raise ValueError("sources must have one entry per text")
    trainer, model, info = load_version(resolve(version), device="cpu")
    out: list[float] = []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start:start + batch_size]
        src = sources[start:start + batch_size] if sources is not None else None
        fs = trainer.score_texts(model, info, chunk, sources=src, device="cpu")
        out += [round(float(f), 6) for f in fs]
    return out


def rerank(candidates: list[str], version=None, sources: list[str | None] | None = None) -> list[tuple[str, float]]:
    """``[(text, f)]`` ordered by f, highest first; ties keep the candidates' order."""
    candidates = list(candidates)
    fs = score(candidates, version=version, sources=sources)
    order = sorted(range(len(candidates)), key=lambda n: (-fs[n], n))
    return [(candidates[n], fs[n]) for n in order]


__all__ = ["NoFluencyModel", "resolve", "score", "rerank"]
