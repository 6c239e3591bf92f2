"""The kinds that rate several candidate captions of one image at once, in a per-worker shuffled
order: relevance and fluency 1-5 (seed 004) and Good / Common / Bad per generated caption (seed 000)."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass

from .base import Choice, Kind, VoteInvalid

DIMENSION_LABELS = {"label": "Rating", "relevance": "Relevance", "fluency": "Fluency"}


@dataclass(frozen=True)
class CandidatesKind(Kind):
    """Several captions of one image shown together in a per-worker shuffled order, each rated on
    every dimension: ``{"ratings": {"<caption id>": {"<dimension>": value}}}``."""

    dimensions: tuple[str, ...] = ("label",)
    scale_values: tuple = ()  # allowed values of each dimension

    widget = "candidates"
    shows_caption = False

    @property
    def numeric(self) -> bool:
        return self.scale != "nominal"

    def validate(self, value, task):
        ratings = value.get("ratings") if isinstance(value, dict) else None
        if not isinstance(ratings, dict):
            raise VoteInvalid("The vote needs a rating for every candidate caption.")
        expected = {str(c) for c in task.candidates or []}
        given = {str(k) for k in ratings}
        if given != expected:
            raise VoteInvalid("The vote must rate exactly the candidate captions shown.")
        clean = {}
        for cid, dims in ratings.items():
            if not isinstance(dims, dict) or set(dims) != set(self.dimensions):
                raise VoteInvalid(f"Each candidate needs {', '.join(self.dimensions)}.")
            row = {}
            for dim in self.dimensions:
                v = dims[dim]
                if isinstance(v, str) and v.isdigit():
                    v = int(v)
                if isinstance(v, bool) or v not in self.scale_values:
                    raise VoteInvalid(f"{dim} must be one of {', '.join(map(str, self.scale_values))}.")
                row[dim] = v
            clean[str(cid)] = row
        return {"ratings": clean}

    def label_of(self, value):
        return None

    def parts(self, value):
        ratings = value.get("ratings", {}) if isinstance(value, dict) else {}
        return {f"{cid}:{dim}": v for cid, dims in ratings.items() for dim, v in dims.items()}

    def candidate_order(self, task, worker_id: int) -> list[int]:
        order = list(task.candidates or [])
        random.Random(f"{task.pk}:{worker_id}").shuffle(order)
        return order

    # --- the work page -----------------------------------------------------------------------
    def options(self) -> list[tuple]:
        """The kind's choices, or else its scale's values (shown as they are, keyed by themselves)."""
        if self.choices:
            return super().options()
        return [(v, str(v), str(v)) for v in self.scale_values]

    def widget_context(self, task, value: dict, worker_id: int) -> dict:
        """One row per candidate in the worker's order, with a radio group per dimension."""
        from curation.models import Caption

        order = self.candidate_order(task, worker_id)
        captions = Caption.objects.in_bulk(order)
        ratings = value.get("ratings") or {}
        rows = []
        for number, cid in enumerate((c for c in order if c in captions), start=1):
            given = ratings.get(str(cid)) or {}
            dims = []
            for dim in self.dimensions:
                picked = given.get(dim)
                dims.append({
                    "name": dim, "label": DIMENSION_LABELS.get(dim, dim.replace("_", " ").capitalize()),
                    "field": f"r-{cid}-{dim}",
                    "options": [{"value": v, "label": label, "key": key,
                                 "checked": picked is not None and str(picked) == str(v)}
                                for v, label, key in self.options()],
                })
            rows.append({"caption": captions[cid], "number": number, "dims": dims})
        return {"rows": rows}

    def value_from_post(self, post, candidates: list | None):
        ratings, missing = {}, 0
        for cid in candidates or []:
            row = {}
            for dim in self.dimensions:
                picked = post.get(f"r-{cid}-{dim}", "")
                if picked == "":
                    missing += 1
                else:
                    row[dim] = picked
            ratings[str(cid)] = row
        if missing:
            raise VoteInvalid(f"Rate every caption on every line: {missing} rating{'s' if missing != 1 else ''} "
                              "missing.")
        return {"ratings": ratings}

    def posted_value(self, post, candidates: list | None) -> dict:
        return {"ratings": {str(cid): {dim: post.get(f"r-{cid}-{dim}") for dim in self.dimensions
                                       if post.get(f"r-{cid}-{dim}")} for cid in candidates or []}}

    def display(self, value) -> list[str]:
        from curation.models import Caption

        value = value if isinstance(value, dict) else {}
        captions = Caption.objects.in_bulk([int(c) for c in (value.get("ratings") or {}) if str(c).isdigit()])
        labels = dict((v, label) for v, label, _ in self.options())
        lines = []
        for cid, dims in (value.get("ratings") or {}).items():
            caption = captions.get(int(cid)) if str(cid).isdigit() else None
            rated = ", ".join(f"{DIMENSION_LABELS.get(d, d)} {labels.get(v, v)}" for d, v in dims.items())
            lines.append(f"“{caption.text if caption else cid}”: {rated}")
        return lines

    def unsaved(self, value: dict) -> str:
        return ""

    # --- the gold page ----------------------------------------------------------------------------
    def gold_from_form(self, raw: str):
        """JSON: a rating of every candidate."""
        try:
            return json.loads(raw or "")
        except ValueError:
            raise VoteInvalid('The expected answer must be JSON such as {"ratings": {"<caption id>": '
                              '{...}}}.') from None

    def gold_form_text(self, gold, task) -> str:
        if gold is not None:
            return json.dumps(gold.value)
        return json.dumps({"ratings": {str(c): {d: "" for d in self.dimensions} for c in task.candidates}})

    # --- the JSON API --------------------------------------------------------------------------
    def _caption_payload(self, task) -> dict | None:
        return None  # the captions are the candidates


RELEVANCE_FLUENCY = CandidatesKind(
    name="relevance_fluency", label="Relevance and fluency 1-5 of candidate captions", target="candidates",
    seed="004", scale="ordinal",
    description="Candidate captions of one image, shown together in a shuffled order; rate each for "
                "relevance to the image and for fluency from 1 (worst) to 5 (best) (seed 004, Table 6).",
    question="Rate each caption for how well it fits the image (relevance) and how well it reads (fluency), "
             "from 1 (worst) to 5 (best).",
    dimensions=("relevance", "fluency"), scale_values=(1, 2, 3, 4, 5),
)
GOOD_COMMON_BAD = CandidatesKind(
    name="good_common_bad", label="Good / Common / Bad per generated caption", target="candidates", seed="000",
    description="Each generated caption: Good (informative and specific to this image), Common (true but "
                "generic) or Bad (wrong) (seed 000, Table 2).",
    question="Rate each caption: Good (informative and specific to this image), Common (true but could fit "
             "many images) or Bad (wrong).",
    choices=(Choice("good", "Good", "1"), Choice("common", "Common", "2"), Choice("bad", "Bad", "3")),
    dimensions=("label",), scale_values=("good", "common", "bad"),
)

__all__ = ["CandidatesKind", "DIMENSION_LABELS", "RELEVANCE_FLUENCY", "GOOD_COMMON_BAD"]
