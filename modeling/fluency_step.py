"""The fluency filter (seed 004): keep captions the active fluency classifier finds fluent.

A pipeline step that needs the modeling app's classifier, so it lives here and is a plug-in: ModelingConfig.ready()
registers it into curation's step registry (curation.pipeline.registry), in every process (web, Celery workers,
the in-process executor) before any pipeline runs; curation never imports modeling.

Score f is the four-way LSTM classifier's averaged probability of "fluent" (modeling.fluency.score,
with the active ModelVersion of kind "fluency", or the version number given in ``version``). A caption
is kept when f > ``threshold`` (0.5, the seed's rule) with reason ``fluent``, dropped with reason
``not_fluent`` otherwise; empty text is dropped with ``empty``. The decision details carry f, the
threshold and the model version, so a run says which model decided.

With no active fluency version (and none given) the filter keeps nothing and drops nothing: every
decision is "na" with reason ``no_fluency_model`` - a missing model is visible, never a silent keep.

The filter scores the caption's own text (the source-sentence branches of the model are used only
where a source is known, which an item in a pipeline does not carry; the classifier then averages the
branches it has). torch and the model load lazily, in workers only, on the first batch.
"""
from __future__ import annotations

from curation.pipeline.base import Decision, Filter, Item, drop, keep, not_applicable


class FluencyFilter(Filter):
    name = "fluency"
    version = 1
    label = "Fluency (seed 004)"
    description = ("Keeps captions whose fluency score f from the active fluency classifier is above the "
                   "threshold; 'na' with no_fluency_model when no classifier version is active.")
    target = "caption"
    defaults = {"threshold": 0.5, "version": None, "batch_size": 256}
    text_only = True  # f depends on the text alone

    def __init__(self, params: dict | None = None, state=None):
        super().__init__(params, state)
        try:
            threshold = float(self.params["threshold"])
        except (TypeError, ValueError):
            raise ValueError("fluency: threshold must be a number between 0 and 1") from None
        if not 0.0 <= threshold <= 1.0:
            raise ValueError("fluency: threshold must be a number between 0 and 1")
        self.params["threshold"] = threshold
        version = self.params.get("version")
        if version not in (None, ""):
            try:
                self.params["version"] = int(version)
            except (TypeError, ValueError):
                raise ValueError("fluency: version must be a fluency classifier version number") from None
        else:
            self.params["version"] = None

    def _model_version(self):
        from .fluency import NoFluencyModel, resolve

        try:
            return resolve(self.params["version"])
        except NoFluencyModel:
            return None

    def apply(self, items: list[Item]) -> list[Decision]:
        version = self._model_version()
        if version is None:
            wanted = self.params["version"]
            note = {"version": wanted} if wanted is not None else {}
            return [not_applicable("no_fluency_model", **note) for _ in items]
        from .fluency import score

        threshold = self.params["threshold"]
        out: list[Decision | None] = [None] * len(items)
        todo: dict[str, list[int]] = {}
        for n, item in enumerate(items):
            text = item.text or ""
            if not text.strip():
                out[n] = drop("empty", model_version=version.version)
            else:
                todo.setdefault(text, []).append(n)
        texts = list(todo)
        fs = score(texts, version=version, batch_size=int(self.params["batch_size"])) if texts else []
        for text, f in zip(texts, fs):
            details = {"f": round(f, 4), "threshold": threshold, "model_version": version.version}
            for n in todo[text]:
                out[n] = (keep("fluent", f, **details) if f > threshold else drop("not_fluent", f, **details))
        return out
