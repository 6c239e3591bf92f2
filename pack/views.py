"""Pages of the model pack: registered pretrained models (list, register form for admins, detail with every
file's sha256 and a re-check), and embedding jobs (start from a collection page, a live progress card).

No torch here: registering reads headers and hashes files; loading and encoding run in the job's task.
"""
from __future__ import annotations

from django import forms
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

import pack
from captionlab.roles import has_role, role_required
from curation.models import Collection

from .embeddings import jobs
from .models import EmbeddingJob, PretrainedModel


class RegisterForm(forms.Form):
    directory = forms.CharField(max_length=1000, help_text="A folder under the models directory (or an absolute path)")
    name = forms.SlugField(max_length=80, help_text="Lower-case letters, digits, '-' or '_'")
    licence = forms.CharField(max_length=300, help_text="e.g. MIT, Apache-2.0: recorded with every release that uses it")
    source = forms.CharField(max_length=2000, required=False, widget=forms.Textarea(attrs={"rows": 2}),
                             help_text="Where the files came from")


def _is_admin(user) -> bool:
    return user.is_superuser or has_role(user, "admin")


@role_required("curator")
def pretrained_list(request):
    """Every registered model; admins register a directory here (curators read)."""
    pack.ensure_packaged()
    form = RegisterForm(request.POST or None)
    if request.method == "POST":
        if not _is_admin(request.user):
            messages.error(request, "Only admins register model directories.")
            return redirect("pretrained-list")
        if form.is_valid():
            try:
                model = pack.model_add_pretrained(user=request.user, **form.cleaned_data)
            except pack.PackError as exc:
                form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            else:
                messages.success(request, f"Registered {model.key}: {model.parameters:,} parameters, "
                                          f"{len(model.files)} files.")
                return redirect(model.get_absolute_url())
    context = {"models": PretrainedModel.objects.all(), "form": form, "can_register": _is_admin(request.user),
               "models_dir": pack.models_dir()}
    return render(request, "pack/pretrained_list.html", context, status=400 if form.errors else 200)


@role_required("curator")
def pretrained_detail(request, pk):
    model = get_object_or_404(PretrainedModel, pk=pk)
    check = None
    if request.method == "POST":
        try:
            pack.verify(model)
            check = {"ok": True, "message": f"All {len(model.files)} files match their sha256; no pickles."}
        except pack.PackError as exc:
            check = {"ok": False, "message": exc.message}
    files = sorted(model.files.items())
    return render(request, "pack/pretrained_detail.html",
                  {"model": model, "files": files, "check": check, "path": pack.resolve(model.directory),
                   "jobs": model.jobs.select_related("collection")[:20]})


@require_POST
@role_required("curator")
def collection_embed(request, pk):
    collection = get_object_or_404(Collection, pk=pk)
    try:
        job = jobs.job_create(collection=collection, model=request.POST.get("model") or None, user=request.user)
    except pack.PackError as exc:
        messages.error(request, exc.message)
        return redirect(collection.get_absolute_url())
    if job.status == EmbeddingJob.Status.QUEUED and job.started_at is None:
        jobs.job_enqueue(job)
    return redirect(job.get_absolute_url())


@role_required("curator")
def embedding_job_detail(request, pk):
    """The job's page; htmx polls its progress card (the card alone) until the job ends."""
    job = get_object_or_404(EmbeddingJob.objects.select_related("model", "collection", "created_by"), pk=pk)
    context = {"job": job, "percent": jobs.percent(job), "stale": jobs.is_stale(job),
               "finished": job.status in (EmbeddingJob.Status.DONE, EmbeddingJob.Status.FAILED)}
    if request.htmx and not request.htmx.boosted:
        return render(request, "pack/embedding_progress.html", context)
    return render(request, "pack/embedding_job.html", context)


def collection_panel(collection) -> dict:
    """What the collection page's model-pack panel shows: the models to embed with and the latest jobs."""
    return {"clip_models": PretrainedModel.objects.filter(kind=PretrainedModel.Kind.CLIP),
            "embedding_jobs": EmbeddingJob.objects.filter(collection=collection).select_related("model")[:5]}
