"""Verify-rewrite campaigns: people check the rewrites a filter was unsure of (hypernymization's
``uncertain_rewrite``, seed 002 Section 3.4) and their verdicts go back onto the run's decisions.

- a verify_rewrite campaign selects the rewrites of a run's hypernymize step (``services.check_selection``);
- what the work page and the API show for a task (original, rewrite, uncertain mentions) is the kind's
  (``annotation.kinds.verify_rewrite.rewrite_of``);
- ``verdicts_apply``: each item with a consensus (the campaign's per-item results, ``annotation.results``)
  is written onto its source decision through the curators' override service (a Review each, the
  funnel recounted): keep and drop as such, fix as keep with the most voted fixed text as the decision's text_after
  and the run's transformed caption. A text that changed goes through the run's later chunk-level caption
  steps (an emoji strip, a length check: ``executor.rerun_later_steps``), whose decisions about it are made
  again (reviewed ones stay) and whose transformed captions follow, so that a release built from the run
  ships the fix as those steps leave it, or leaves it out when one of them drops it; what follows a drop
  verdict is taken back at once, and the funnel recounted. Idempotent: a second call finds every decision as
  the verdicts want it and changes nothing.
"""
from __future__ import annotations

from collections import Counter

from django.db import IntegrityError, transaction

from curation.models import Caption, FilterDecision

from .models import Campaign, Task
from .services import CampaignError

KIND = "verify_rewrite"
VERDICTS = ("keep", "fix", "drop")


# --- applying ------------------------------------------------------------------------------------

def _consensus(campaign: Campaign) -> dict[int, str]:
    """{task id: keep|fix|drop} of the items the campaign's results give a consensus (ties have none)."""
    from .results import ResultsError, methods_of, results_rows

    methods = methods_of(campaign)
    if not methods:
        raise CampaignError("The campaign has no aggregated results yet: aggregate it first (Recompute now).",
                            code="not_aggregated")
    try:
        _, rows = results_rows(campaign, method="majority" if "majority" in methods else methods[0])
    except ResultsError as exc:
        raise CampaignError(exc.message, code="not_aggregated") from None
    return {row["task_id"]: row["consensus"] for row in rows if row["consensus"] in VERDICTS}


def _fixed_texts(campaign: Campaign, task_ids) -> dict[int, tuple[str, Counter]]:
    """{task id: (the most voted fixed text, first given among ties; votes per label)} over the counted votes."""
    from .result_votes import counted_votes

    texts: dict[int, Counter] = {}
    labels: dict[int, Counter] = {}
    for task_id, value in (counted_votes(campaign).filter(task_id__in=task_ids)
                           .order_by("created_at", "pk").values_list("task_id", "value")):
        value = value if isinstance(value, dict) else {}
        labels.setdefault(task_id, Counter())[value.get("label")] += 1
        if value.get("label") == "fix" and value.get("text"):
            texts.setdefault(task_id, Counter())[value["text"]] += 1  # Counter keeps first-seen order on ties
    out = {}
    for task_id in task_ids:
        fixes = texts.get(task_id)
        out[task_id] = (fixes.most_common(1)[0][0] if fixes else "", labels.get(task_id, Counter()))
    return out


def _transformed_caption(decision: FilterDecision) -> Caption | None:
    """The caption the run made from this decision's rewrite (the release ships it)."""
    return (Caption.objects.filter(origin=Caption.Origin.TRANSFORMED, image_id=decision.image_id,
                                   metadata__run=decision.run_id, metadata__step=decision.step,
                                   text=decision.text_after).order_by("pk").first())


def _set_text(decision: FilterDecision, text: str) -> None:
    """The fixed text on the run's transformed caption, made when the run made none (a rewrite the filter
    dropped); its parent is the caption the run had made from the same caption at an earlier step, if any."""
    child = _transformed_caption(decision)
    if child is None:
        earlier = (Caption.objects.filter(origin=Caption.Origin.TRANSFORMED, image_id=decision.image_id,
                                          metadata__run=decision.run_id, metadata__step__lt=decision.step)
                   .order_by("-pk"))
        parent = next((c for c in earlier if decision.caption_id in {a.pk for a in c.lineage()}), None)
        parent = parent or decision.caption
        name = decision.filter_name
        child = Caption(image_id=decision.image_id, origin=Caption.Origin.TRANSFORMED, parent=parent,
                        language=parent.language, source=f"run {decision.run_id}: {name}"[:300],
                        metadata={"run": decision.run_id, "step": decision.step, "filter": name})
    child.text = text
    try:
        with transaction.atomic():
            child.save()
    except IntegrityError:
        raise CampaignError(f"Decision #{decision.pk}: the run already has the caption {text!r} for this image.",
                            code="conflict") from None


def verdicts_apply(*, campaign: Campaign, user=None) -> dict:
    """Write the campaign's verdicts onto the source decisions; returns counts per what happened:
    {"keep", "fix", "drop", "unchanged", "no_consensus"}."""
    from curation import services as curation_services
    from curation.pipeline import executor

    if campaign.kind != KIND:
        raise CampaignError("Only a verify-rewrite campaign has verdicts to apply.", code="wrong_kind")
    verdicts = _consensus(campaign)
    tasks = dict(campaign.tasks.filter(role=Task.Role.REAL, source_decision__isnull=False)
                 .values_list("pk", "source_decision"))
    counts = {"keep": 0, "fix": 0, "drop": 0, "unchanged": 0, "no_consensus": len(set(tasks) - set(verdicts))}
    fixed = _fixed_texts(campaign, [t for t in tasks if t in verdicts])
    note = f"verify-rewrite campaign #{campaign.pk} “{campaign.name}”"
    with transaction.atomic():  # the decisions locked: a second apply at the same time waits, then finds them done
        decisions = (FilterDecision.objects.select_related("run", "caption").select_for_update(of=("self",))
                     .in_bulk([tasks[t] for t in tasks if t in verdicts]))
        to_review: dict[str, list[FilterDecision]] = {"keep": [], "drop": []}
        texts_set: list[FilterDecision] = []  # whose text changed: the later steps decide again
        for task_id in sorted(t for t in tasks if t in verdicts):
            decision = decisions.get(tasks[task_id])
            if decision is None:
                continue
            label = verdicts[task_id]
            text, votes = fixed[task_id]
            details = dict(decision.details or {})
            original = (details.get("verified") or {}).get("original_rewrite", decision.text_after)
            want_text = {"fix": text or original, "keep": original}.get(label, decision.text_after)
            verified = {"campaign": campaign.pk, "votes": dict(sorted((k, v) for k, v in votes.items() if k)),
                        "label": label, "original_rewrite": original}
            outcome = "drop" if label == "drop" else "keep"
            if (decision.final_outcome == outcome and decision.text_after == want_text
                    and details.get("verified") == verified):
                counts["unchanged"] += 1
                continue
            # A Review for every verdict, a keep of a kept decision too, so the decision's history and the
            # release's provenance say the rewrite was checked, by which campaign, applied by whom (the
            # service clears an override equal to the filter's outcome).
            to_review[outcome].append(decision)
            if outcome == "keep" and want_text and (want_text != decision.text_after
                                                     or _transformed_caption(decision) is None):
                _set_text(decision, want_text)  # a release from the run ships it, as the later steps leave it
                texts_set.append(decision)
            details["verified"] = verified
            FilterDecision.objects.filter(pk=decision.pk).update(text_after=want_text, details=details)
            counts[label] += 1
        for outcome, chosen in to_review.items():
            if chosen:
                curation_services.decisions_override(decisions=chosen, outcome=outcome, note=note, user=user)
        reviewed = [d for chosen in to_review.values() for d in chosen]
        for run_id in sorted({d.run_id for d in reviewed}):
            # Now, not only in the reconcile task the overrides queue after this commits (which then finds
            # nothing to do): the page that applied the verdicts shows the run as a release will take it.
            executor.rerun_later_steps(run_id, [d.pk for d in texts_set if d.run_id == run_id],
                                       image_ids=[d.image_id for d in reviewed if d.run_id == run_id])
    return counts


def counts_text(counts: dict) -> str:
    """The counts of ``verdicts_apply`` in words (the campaign page's message, the command's output)."""
    return (f"{counts['keep']} kept, {counts['fix']} fixed, {counts['drop']} dropped, {counts['unchanged']} "
            f"already as verified, {counts['no_consensus']} without a consensus yet.")


__all__ = ["counts_text", "verdicts_apply", "KIND"]
