"""A text a person set at a transform step of a finished run (a verified rewrite's fix) goes through the run's
later steps, as the text the filter wrote once did.

The later chunk-level caption steps decide again on the new text: their decisions about those captions are
taken back (reviewed ones stay, a curator's word being final) and ``reconcile`` runs the chunk steps over the
captions' images again, the set text going on in place of the filter's, so that a later step's decision
(outcome, reason, text) follows from it, a later drop takes back what follows it, and the funnel is
recounted. Run-level steps are not run again (``reconcile`` keeps what they did not judge). Then each
caption's chain of transformed captions (raw -> cropped -> hypernymized -> stripped) is made to follow the
decisions: the caption a release ships is the end of that chain.
"""
from __future__ import annotations

from django.db.models import Exists, OuterRef

from ...models import Caption, FilterDecision, FilterRun, Review, text_hash
from ..base import DROP
from .funnel import funnel_lock
from .runlevel import reconcile


def rerun_later_steps(run_id: int, decision_ids, image_ids=()) -> int:
    """The run's chunk-level caption steps after each of ``decision_ids`` (caption decisions whose text a
    person set) decide again on that text; every chunk step over those images and ``image_ids`` (decisions
    whose final outcome changed) follows the final outcomes (``reconcile``). Returns the items the chunk
    steps went over (0 for a run not finished: its chunks still decide)."""
    run = FilterRun.objects.get(pk=run_id)
    if run.status != FilterRun.Status.DONE:
        return 0
    changed = list(FilterDecision.objects.filter(pk__in=list(decision_ids), run=run, caption__isnull=False)
                   .values_list("step", "image_id", "caption_id"))
    later = {position: [i for i, s in enumerate(run.snapshot) if i > position and not s["run_level"]
                        and s["target"] != "image"] for position in {step for step, _, _ in changed}}
    unreviewed = ~Exists(Review.objects.filter(decision_id=OuterRef("pk")))
    with funnel_lock(run.pk):
        for position, steps in later.items():
            captions = [caption_id for step, _, caption_id in changed if step == position]
            if steps and captions:
                doomed = FilterDecision.objects.filter(unreviewed, run=run, caption_id__in=captions, step__in=steps,
                                                       override="")
                doomed._raw_delete(doomed.db)  # no signals, no cascade: reviewed decisions are excluded
        computed: dict[int, list[tuple[int, str]]] = {}
        went_over = reconcile(run.pk, [*{image_id for _, image_id, _ in changed}, *image_ids], transforms=computed)
        relink_chains(run, [caption_id for _, _, caption_id in changed], computed)
    return went_over


def relink_chains(run: FilterRun, caption_ids: list[int], computed: dict | None = None) -> None:
    """Make each caption's chain of the run's transformed captions the one the steps made: ``computed``
    ({caption id: [(step, new text)]}, what the chunk steps just did to a surviving caption; a reviewed
    later decision keeps the text columns of its own time), else the one its decisions describe. At each
    transform, the caption with that text (found, or made when the caption is still alive) is the
    child of the one before; the run's other transformed children of a chain caption (made from a text
    that no longer reaches that step) stay as records, no longer the run's (``metadata["superseded_in_run"]``
    instead of ``metadata["run"]``), so a release never follows them."""
    transforms = [i for i, s in enumerate(run.snapshot) if s["transform"] and not s["run_level"]
                  and s["target"] != "image"]
    chains: dict[int, list[tuple[int, str]]] = {}
    for caption_id, step, before, after in (
            FilterDecision.objects.filter(run=run, caption_id__in=caption_ids, step__in=transforms)
            .exclude(text_after="").exclude(FilterDecision.final_is(DROP)).order_by("caption_id", "step")
            .values_list("caption_id", "step", "text_before", "text_after")):
        if after != before:
            chains.setdefault(caption_id, []).append((step, after))
    chains.update(computed or {})
    for caption in Caption.objects.filter(pk__in=caption_ids):
        node, lineage = caption, {caption.pk}
        alive = _alive(run, caption)
        for step, text in chains.get(caption.pk, []):
            child = _chain_child(run, caption, node, lineage, step, text, make=alive)
            if child is None:
                break
            _supersede(run, node, keep=child.pk)
            node = child
            lineage.add(child.pk)
        _supersede(run, node, keep=None)  # the chain ends here: what hangs below is made from another text


def _alive(run: FilterRun, caption: Caption) -> bool:
    """Whether the run's final outcomes keep the caption (no drop of it or of its image at any step)."""
    dropped = FilterDecision.objects.filter(FilterDecision.final_is(DROP), run=run)
    return not (dropped.filter(caption_id=caption.pk).exists()
                or dropped.filter(caption__isnull=True, image_id=caption.image_id).exists())


def _chain_child(run: FilterRun, caption: Caption, node: Caption, lineage: set[int], step: int, text: str,
                 make: bool) -> Caption | None:
    """The run's caption of ``text`` at ``step`` as the child of ``node``: found by its unique key (image,
    text, source) and put back under ``node`` when it hangs elsewhere in this caption's lineage or was
    superseded; made when missing and ``make``. None when missing, or when another caption's chain
    holds it (two raw captions of an image that a step made the same text)."""
    name = run.snapshot[step]["filter"]
    source = f"run {run.pk}: {name}"[:300]
    metadata = {"run": run.pk, "step": step, "filter": name}
    child = Caption.objects.filter(image_id=caption.image_id, text_hash=text_hash(text), source=source).first()
    if child is None:
        if not make:
            return None
        return Caption.objects.create(image_id=caption.image_id, text=text, language=caption.language,
                                      origin=Caption.Origin.TRANSFORMED, parent=node, source=source, metadata=metadata)
    ours = (child.metadata or {}).get("run") != run.pk or child.parent_id in lineage
    if not ours:
        return None
    if child.parent_id != node.pk or {k: (child.metadata or {}).get(k) for k in metadata} != metadata:
        child.parent = node
        child.metadata = {k: v for k, v in (child.metadata or {}).items() if k != "superseded_in_run"} | metadata
        child.save(update_fields=["parent", "metadata"])
    return child


def _supersede(run: FilterRun, node: Caption, keep: int | None) -> None:
    """The run's transformed children of ``node`` other than ``keep`` are no longer the run's."""
    stale = (Caption.objects.filter(parent=node, origin=Caption.Origin.TRANSFORMED, metadata__run=run.pk)
             .exclude(pk=keep or 0))
    for child in stale:
        metadata = {k: v for k, v in (child.metadata or {}).items() if k != "run"}
        child.metadata = {**metadata, "superseded_in_run": run.pk}
        child.save(update_fields=["metadata"])
