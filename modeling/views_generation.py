"""Curator pages of generation jobs: the compare page's "Human evaluation" form makes a job (captions by
the selected captioner runs, optionally reranked by fluency, then the campaign) and redirects to the
job's page, whose progress card polls itself with htmx until the job is done or failed.

No torch here, nor in what these views import: the beam search runs in the job's Celery task.
"""
from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_POST

from captionlab.roles import role_required

from . import generation_job
from .models import GenerationJob, Kind, ModelVersion, TrainingRun

EVAL_KINDS = (("quality", "GOOD / BAD"), ("good_common_bad", "Good / Common / Bad"),
              ("relevance_fluency", "Relevance + fluency (runs shuffled together)"))


def _run_ids(values) -> list[int] | None:
    ids = []
    for value in values:
        if not str(value).isdigit():
            return None
        ids.append(int(value))
    return list(dict.fromkeys(ids))


def _positive_int(value):
    """A whole number from a form field; None when blank; ValueError otherwise."""
    value = (value or "").strip()
    return int(value) if value else None


@require_POST
@role_required("curator")
def evaluation_campaign(request):
    """Make the job and send it to the gpu queue; the person waits on the job's page, not here."""
    ids = _run_ids(request.POST.getlist("runs"))
    if not ids:
        messages.error(request, "Select at least one finished captioner run.")
        return redirect(reverse("training-compare"))
    back = reverse("training-compare") + "?" + "&".join(f"runs={pk}" for pk in ids)
    kind = request.POST.get("eval_kind", "")
    if kind not in dict(EVAL_KINDS):
        messages.error(request, "Choose how the captions are judged.")
        return redirect(back)
    try:
        beam_size = _positive_int(request.POST.get("beam_size"))
    except ValueError:
        messages.error(request, "The beam size must be a whole number.")
        return redirect(back)
    try:
        job = generation_job.job_create(runs=ids, eval_kind=kind, name=request.POST.get("name", ""),
                                        user=request.user, rerank=request.POST.get("rerank") == "on",
                                        beam_size=beam_size)
    except generation_job.GenerationError as exc:
        messages.error(request, f"The campaign was not created: {exc}")
        return redirect(back)
    generation_job.job_enqueue(job)
    messages.success(request, f"Generating the captions of {len(ids)} run(s); the campaign follows.")
    return redirect(reverse("generation-job-detail", args=[job.pk]))


def _job_context(job: GenerationJob) -> dict:
    runs = {r.pk: r for r in TrainingRun.objects.filter(pk__in=job.runs or [])}
    finished = job.status in (GenerationJob.Status.DONE, GenerationJob.Status.FAILED)
    return {"job": job, "runs": [runs[pk] for pk in job.runs or [] if pk in runs], "finished": finished,
            "percent": generation_job.percent(job), "fluency": (job.options or {}).get("fluency_version"),
            "eval_label": dict(EVAL_KINDS).get(job.eval_kind, "captions only")}


@role_required("curator")
def job_detail(request, pk):
    """The job's page; for htmx (its progress card polling) the card alone."""
    job = get_object_or_404(GenerationJob.objects.select_related("campaign", "created_by"), pk=pk)
    template = "modeling/generation_progress.html" if request.htmx else "modeling/generation_job.html"
    response = render(request, template, _job_context(job))
    patch_vary_headers(response, ("HX-Request",))  # caches must keep the page and the fragment apart
    return response


def compare_context() -> dict:
    """What the compare page's evaluation form needs: the kinds, and the fluency version a rerank uses."""
    return {"eval_kinds": EVAL_KINDS,
            "fluency_active": ModelVersion.objects.filter(kind=Kind.FLUENCY, active=True).first()}
