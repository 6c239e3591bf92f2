"""Server-rendered pages: collections, images, imports (and what a curator's home page shows of them).

Views are thin: parse, check the role, call one function, render. A view that htmx also calls
returns its fragment for htmx requests and the full page otherwise (the ``_render`` helper).
"""
from urllib.parse import urlsplit

from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET

from captionlab import roles
from captionlab.roles import role_required

from . import extensions, services
from .errors import IngestError
from .forms import CollectionForm, ImportForm
from .models import Caption, Collection, FilterDecision, FilterRun, Image, ImportIssue, ImportJob
from .pipeline.topics import image_topics

IMAGES_PER_PAGE = 60
ISSUES_PER_PAGE = 100
IMPORTS_PER_PAGE = 50
COLLECTIONS_PER_PAGE = 50


def render_page(request, template, fragment, context, status=200):
    """One view, two answers: the fragment for htmx (not boosted) requests, the page otherwise."""
    chosen = fragment if request.htmx and not request.htmx.boosted else template
    response = render(request, chosen, context, status=status)
    patch_vary_headers(response, ("HX-Request",))  # caches must keep the page and the fragment apart
    return response


def _count(model, **filters):
    """A correlated COUNT subquery per collection (cheaper than joins of images × captions)."""
    rows = model.objects.filter(**filters).order_by().values(*filters.keys()).annotate(n=Count("pk"))
    return Coalesce(Subquery(rows.values("n")[:1], output_field=IntegerField()), 0)


def _collections_with_counts():
    return Collection.objects.annotate(
        image_count=_count(Image, collection=OuterRef("pk")),
        caption_count=_count(Caption, image__collection=OuterRef("pk")),
    )


# --- Home ----------------------------------------------------------------------------------------


def curator_home_context() -> dict:
    """What a curator's (and an admin's) home page shows of curation: the latest collections and imports
    (the page itself is config.views.home)."""
    return {
        "collections": _collections_with_counts().order_by("-created_at")[:8],
        "collection_total": Collection.objects.count(),
        "imports": ImportJob.objects.select_related("collection").order_by("-created_at")[:8],
    }


# --- Collections ---------------------------------------------------------------------------------


@role_required(roles.CURATOR)
@require_GET
def collection_list(request):
    page = Paginator(_collections_with_counts().order_by("name"), COLLECTIONS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    return render(request, "collections/list.html", {"page": page})


@role_required(roles.CURATOR)
def collection_create(request):
    form = CollectionForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            collection = services.collection_create(
                name=form.cleaned_data["name"], user=request.user, **form.service_fields()
            )
        except IngestError as error:
            form.add_error("name", error.message)
        else:
            return redirect(collection)
    return render(request, "collections/create.html", {"form": form}, status=400 if form.errors else 200)


@role_required(roles.CURATOR)
@require_GET
def collection_detail(request, pk):
    collection = get_object_or_404(_collections_with_counts(), pk=pk)
    status = request.GET.get("status", "")
    if status not in Image.Status.values:
        status = ""
    images = collection.images.annotate(caption_count=Count("captions")).order_by("pk")
    if status:
        images = images.filter(status=status)
    by_status = dict(
        collection.images.order_by().values_list("status").annotate(n=Count("pk")).values_list("status", "n")
    )
    context = {
        "collection": collection,
        "page": Paginator(images, IMAGES_PER_PAGE).get_page(request.GET.get("page")),
        "status": status,
        "status_tabs": [("", "All", collection.image_count)]
        + [(value, label, by_status.get(value, 0)) for value, label in Image.Status.choices],
        "imports": collection.imports.order_by("-created_at")[:5],
    }
    context.update(extensions.collection_extras(collection))  # releases: the header's "Releases (n)" link
    return render_page(request, "collections/detail.html", "collections/_grid.html", context)


# --- Images --------------------------------------------------------------------------------------


def _http_url(url: str) -> str | None:
    """The URL when it is safe to make a link of it (http or https), else None: shown as text."""
    try:
        scheme = urlsplit(url.strip()).scheme.lower()
    except ValueError:
        return None
    return url.strip() if scheme in ("http", "https") else None


def run_verdicts(image: Image, lineages: list[tuple[Caption, list[Caption]]]) -> dict[int, list[dict]]:
    """What the filter runs made of each caption: {caption pk: [{run, pipeline, outcome, step, filter,
    reason, overridden, of_parent, of_image}]}, the final outcome with curators' overrides (dropped at
    the first step that dropped the caption or its image, else kept). Runs decide raw captions; a
    transformed caption's verdict is that of the caption it was made from, in the run that made it: a
    run-level step after the transform (duplicate images, rare entity types) or a curator's override can
    drop the raw caption, and its transformed text then goes with it (releases take a run's transformed
    text only where the run kept the raw caption). The page says so next to the transformed text."""
    decided_of = {}  # caption pk -> (the caption the runs decided on, the run that made it or None)
    for caption, lineage in lineages:
        decided = next((c for c in lineage if c.origin != Caption.Origin.TRANSFORMED), lineage[-1])
        run = (caption.metadata or {}).get("run") if caption.origin == Caption.Origin.TRANSFORMED else None
        decided_of[caption.pk] = (decided.pk, run if isinstance(run, int) else None)
    fields = ("caption_id", "run_id", "run__pipeline__name", "run__status", "step", "filter_name", "outcome",
              "override", "reason")
    rows = [(*row, None) for row in FilterDecision.objects.filter(
        caption_id__in={d for d, _ in decided_of.values()}).values_list(*fields)]
    # The image's own rows, with what a duplicate step says it duplicates (details: {"of": image id}).
    image_rows = list(FilterDecision.objects.filter(image=image, caption__isnull=True)
                      .values_list(*fields, "details__of"))
    runs = {}  # run id -> (pipeline, finished)
    first_drop: dict[tuple[int | None, int], tuple] = {}  # (caption or None for the image, run) -> its first drop
    for caption_id, run_id, pipeline, status, step, name, outcome, override, reason, of in sorted(
            rows + image_rows, key=lambda r: (r[1], r[4])):
        runs[run_id] = (pipeline, status in (FilterRun.Status.DONE, FilterRun.Status.FAILED))
        if (override or outcome) == "drop":
            first_drop.setdefault((caption_id, run_id), (step, name, reason, bool(override),
                                                         of if isinstance(of, int) else None))
    decided_in = {(caption_id, run_id) for caption_id, run_id, *_ in rows}
    result = {}
    for pk, (decided, made_by) in decided_of.items():
        verdicts = []
        for run_id, (pipeline, finished) in sorted(runs.items()):
            if made_by is not None and run_id != made_by:
                continue
            drops = [(d, False) for d in [first_drop.get((decided, run_id))] if d]
            drops += [(d, True) for d in [first_drop.get((None, run_id))] if d]
            if not drops and (decided, run_id) not in decided_in:
                continue  # the run never reached this caption (a run over other captions of the image)
            verdict = {"run": run_id, "pipeline": pipeline, "finished": finished, "outcome": "keep", "step": None,
                       "filter": "", "reason": "", "overridden": False, "of_parent": decided != pk, "of_image": False,
                       "duplicate_of": None}
            if drops:
                (step, name, reason, overridden, of), of_image = min(drops, key=lambda d: d[0][0])
                verdict.update(outcome="drop", step=step, filter=name, reason=reason, overridden=overridden,
                               of_image=of_image, duplicate_of=of)
            verdicts.append(verdict)
        if verdicts:
            result[pk] = verdicts
    return result


@role_required(roles.CURATOR)
@require_GET
def image_detail(request, pk):
    image = get_object_or_404(Image.objects.select_related("collection", "import_job"), pk=pk)
    captions = list(image.captions.select_related("parent", "import_job").order_by("pk"))
    siblings = image.collection.images.order_by("pk").values_list("pk", flat=True)
    lineages = [(caption, caption.lineage()) for caption in captions]
    verdicts = run_verdicts(image, lineages)
    context = {
        "image": image,
        "source_link": _http_url(image.source_url),
        "captions": [(caption, lineage, verdicts.get(caption.pk, [])) for caption, lineage in lineages],
        "previous_pk": siblings.filter(pk__lt=image.pk).order_by("-pk").first(),
        "next_pk": siblings.filter(pk__gt=image.pk).first(),
        "metadata": sorted(image.metadata.items()) if isinstance(image.metadata, dict) else [],
        "topics": image_topics(image),
    }
    return render(request, "images/detail.html", context)


# --- Imports -------------------------------------------------------------------------------------


@role_required(roles.CURATOR)
@require_GET
def import_list(request):
    jobs = ImportJob.objects.select_related("collection", "created_by").order_by("-created_at")
    page = Paginator(jobs, IMPORTS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "imports/list.html", {"page": page})


@role_required(roles.CURATOR)
def import_create(request):
    if request.method == "POST":
        form = ImportForm(request.POST, request.FILES)
        if form.is_valid():
            data = form.cleaned_data
            try:
                # A new collection lands only together with its import.
                with transaction.atomic():
                    collection = data["collection"] or services.collection_create(
                        name=data["new_collection"], user=request.user
                    )
                    job = services.import_create(
                        collection=collection, kind=data["kind"], upload=data["file"],
                        user=request.user, options=form.options(),
                    )
            except IngestError as error:
                form.add_error("new_collection" if error.code == "duplicate" else None, error.message)
            else:
                return redirect(job)
        return render(request, "imports/create.html", {"form": form}, status=400)
    initial = {}
    if request.GET.get("collection", "").isdigit():
        initial["collection"] = Collection.objects.filter(pk=request.GET["collection"]).first()
    return render(request, "imports/create.html", {"form": ImportForm(initial=initial)})


def _import_report(request, job):
    issues = ImportIssue.objects.filter(job=job).order_by("line", "pk")
    return Paginator(issues, ISSUES_PER_PAGE).get_page(request.GET.get("page"))


@role_required(roles.CURATOR)
@require_GET
def import_detail(request, pk):
    job = get_object_or_404(ImportJob.objects.select_related("collection", "created_by"), pk=pk)
    context = {"job": job, "page": _import_report(request, job)}
    return render_page(request, "imports/detail.html", "imports/_report.html", context)


@role_required(roles.CURATOR)
@require_GET
def import_progress(request, pk):
    """The progress card alone, polled every second by htmx until the job has finished.

    The fragment carries its own hx-trigger while the job runs and none once it has finished, so
    the polling stops by itself; the finishing answer also tells the page to reload the report.
    """
    job = get_object_or_404(ImportJob.objects.select_related("collection"), pk=pk)
    response = render(request, "imports/_progress.html", {"job": job})
    if job.finished and request.htmx:
        response["HX-Trigger"] = "import-finished"
    return response
