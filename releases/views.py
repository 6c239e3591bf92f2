"""Release pages (curators and admins): the list, the create form, a release's page with its
freezing progress, counts chart, dataset card, items and exports, and permission-checked downloads.

Views are thin: they parse a form (the create form is in ``forms.py``), call one service
(``release_create``, ``release_freeze``, ``export_create``, ``export_verify``, ``export_delete``)
and render. Polled fragments (freezing progress, the exports table) answer
htmx requests; every form also works without JavaScript.
"""
from __future__ import annotations

import json

from django.contrib import messages
from django.core.files.storage import default_storage
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.markdown import render_markdown
from annotation.models import Campaign
from captionlab import charts, roles
from captionlab.roles import role_required
from curation.models import Collection
from curation.views import render_page
from releases.models import Release, ReleaseExport, ReleaseItem

from . import ReleaseError, services
from .by_collection import of_collection
from .formats.export_manifest import MANIFEST_SUFFIX
from .forms import ReleaseForm, form_field_of
from .publish import storage_name

RELEASES_PER_PAGE = 50
ITEMS_PER_PAGE = 50
SPLITS = ("train", "val", "test")
COUNTS_COLOURS = {"images": charts.PALETTE[0], "captions": charts.KEPT}


# --- The counts chart ------------------------------------------------------------------------------


def split_counts(release: Release) -> list[dict]:
    """[{split, images, captions}] in train/val/test order, from the release's counts."""
    counts = release.counts or {}
    per_split = counts.get("splits") if isinstance(counts.get("splits"), dict) else counts
    rows = []
    for split in SPLITS:
        entry = per_split.get(split) or {}
        if not isinstance(entry, dict):
            entry = {}
        rows.append({"split": split, "images": int(entry.get("images") or 0),
                     "captions": int(entry.get("captions") or 0)})
    return rows


def counts_svg(rows: list[dict]) -> str:
    """Two bars per split (images, captions), each as long as its share of the largest count."""
    peak = max([r["images"] for r in rows] + [r["captions"] for r in rows] + [1])
    totals = {key: sum(r[key] for r in rows) for key in COUNTS_COLOURS}
    drawn = [{"label": row["split"], "attrs": {"cls": "split-row", "data_split": row["split"],
                                               "data_images": row["images"], "data_captions": row["captions"]},
              "bars": [[(row[key], colour, f"{row[key]:,} {key}", f"bar-{key}")] for key, colour in COUNTS_COLOURS.items()],
              "notes": [(f"{row[key]:,} {key}", f"({charts.fmt_pct(charts.percent(row[key], totals[key]))}%)")
                        for key in COUNTS_COLOURS]} for row in rows]
    desc = "; ".join(f"{r['split']}: {r['images']} images, {r['captions']} captions" for r in rows)
    return charts.hbar_chart("chart counts-chart", "Images and captions per split", drawn, desc=desc, bar_w=340, scale=peak,
                             legend_items=[(colour, key) for key, colour in COUNTS_COLOURS.items()])


# --- Context helpers ---------------------------------------------------------------------------------


def _percent(done: int, total: int, finished: bool) -> int:
    if finished:
        return 100
    return int(100 * done / total) if total else 0


def _release_progress(release: Release) -> dict:
    finished = release.status in (Release.Status.FROZEN, Release.Status.FAILED)
    return {"release": release, "finished": finished,
            "percent": _percent(release.items_done, release.items_total, release.status == Release.Status.FROZEN)}


def _exports(release: Release) -> list[dict]:
    rows = []
    for export in release.exports.order_by("format", "-created_at"):
        files = [{**f, "url": reverse("release-download", args=[release.pk, export.pk]) + "?file=" + f["name"]}
                 for f in (export.files or [])] if export.status == ReleaseExport.Status.DONE else []
        rows.append({"export": export, "files": files,
                     "percent": _percent(export.rows_done, export.rows_total,
                                         export.status == ReleaseExport.Status.DONE)})
    return rows


def _exports_context(release: Release, form_errors: dict | None = None, form_values: dict | None = None) -> dict:
    rows = _exports(release)
    return {"release": release, "exports": rows,
            "exports_busy": any(r["export"].status in (ReleaseExport.Status.QUEUED, ReleaseExport.Status.RUNNING)
                                or (r["export"].verification or {}).get("status") in ("queued", "running")
                                for r in rows),
            "formats": ReleaseExport.Format.choices, "export_errors": form_errors or {},
            "export_values": form_values or {}}


def _items_page(release: Release, page_number):
    items = ReleaseItem.objects.filter(release=release).order_by("position").only(
        "position", "split", "image_id", "image_sha256", "width", "height", "license", "credit", "external_id",
        "caption_id", "text", "language", "human_verified", "provenance")
    page = Paginator(items, ITEMS_PER_PAGE).get_page(page_number)
    for item in page.object_list:
        item.provenance_json = json.dumps(item.provenance, indent=2, ensure_ascii=False, sort_keys=True)
    return page


def _rules_text(rules, campaigns: dict) -> str:
    return "; ".join(
        f"{campaigns.get(r.get('campaign'), '#' + str(r.get('campaign')))}: {r.get('rule')}"
        + (f" = {r['label']}" if r.get("label") else "") + (f" ({r['method']})" if r.get("method") else "")
        for r in rules or [] if isinstance(r, dict)) or "none"


def _config_rows(release: Release) -> list[tuple[str, str]]:
    config = release.config or {}
    names = dict(Collection.objects.filter(pk__in=config.get("collections") or []).values_list("pk", "name"))
    campaigns = dict(Campaign.objects.filter(
        pk__in=[r.get("campaign") for r in (config.get("vote_rules") or []) + (config.get("verified_by") or [])
                if isinstance(r, dict)]
    ).values_list("pk", "name"))
    splits = config.get("splits") or {}
    rows = [
        ("Collections", ", ".join(names.get(pk, f"#{pk} (deleted)") for pk in config.get("collections") or [])),
        ("Filter run", f"#{config['run']}" if config.get("run") else "none"),
        ("Vote rules", _rules_text(config.get("vote_rules"), campaigns)),
        ("Human verification", _rules_text(config.get("verified_by"), campaigns)),
        ("Origins", ", ".join(config.get("origins") or []) or "all"),
        ("Languages", ", ".join(config.get("languages") or []) or "all"),
        ("Max captions per image", str(config.get("max_captions_per_image") or "no cap")),
        ("Deduplication", str(config.get("dedup", ""))),
        ("Splits", " / ".join(f"{k} {splits.get(k)}" for k in SPLITS if k in splits)),
        ("Seed", str(config.get("seed", ""))),
        ("Test split", "human-verified only" if config.get("test_human_verified") else "any caption"),
        ("Missing image files", str(config.get("missing_image", ""))),
    ]
    return rows


def _detail_context(request, release: Release) -> dict:
    return {
        **_release_progress(release), **_exports_context(release),
        "config_rows": _config_rows(release), "split_rows": split_counts(release),
        "counts_chart": counts_svg(split_counts(release)) if release.status == Release.Status.FROZEN else "",
        "card_html": render_markdown(release.card),
        "report_rows": (release.report or [])[:200], "report_total": len(release.report or []),
        "page": _items_page(release, request.GET.get("page")),
        "can_freeze": release.status in (Release.Status.QUEUED, Release.Status.FAILED),
    }


# --- Views --------------------------------------------------------------------------------------------


@role_required(roles.CURATOR)
@require_GET
def release_list(request):
    """All releases, or with ``?collection=<id>`` those of one collection (by_collection.of_collection)."""
    releases = Release.objects.select_related("created_by").order_by("-created_at")
    wanted, collection, status = request.GET.get("collection", "").strip(), None, 200
    if wanted:
        if not wanted.isdigit():
            messages.error(request, f"collection is a collection's id (a whole number), not {wanted[:40]!r}.")
            status = 400
        else:
            collection = get_object_or_404(Collection, pk=int(wanted))
            releases = releases.filter(of_collection(collection.pk))
    page = Paginator(releases, RELEASES_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "releases/list.html", {"page": page, "collection": collection}, status=status)


@role_required(roles.CURATOR)
@require_http_methods(["GET", "POST"])
def release_create(request):
    if request.method == "POST":
        form = ReleaseForm(request.POST)
        if form.is_valid():
            try:
                release = services.release_create(form.cleaned_data["name"], form.config(), request.user,
                                                   description=form.cleaned_data.get("description") or "",
                                                   freeze=bool(form.cleaned_data.get("freeze")))
            except ReleaseError as exc:
                form.add_error(form_field_of(exc.field), exc.message)
            else:
                messages.success(request, f"Release “{release.name}” created"
                                 + (" and queued for freezing." if form.cleaned_data.get("freeze") else "."))
                return redirect(release.get_absolute_url())
        status = 400
    else:
        initial = {}
        if request.GET.get("collection", "").isdigit():
            initial["collections"] = [int(request.GET["collection"])]
        form = ReleaseForm(initial=initial)
        status = 200
    return render(request, "releases/create.html", {"form": form}, status=status)


@role_required(roles.CURATOR)
@require_GET
def release_detail(request, pk):
    release = get_object_or_404(Release.objects.select_related("created_by"), pk=pk)
    context = _detail_context(request, release)
    return render_page(request, "releases/detail.html", "releases/_items.html", context)


@role_required(roles.CURATOR)
@require_GET
def release_progress(request, pk):
    """The freezing progress card, polled while the release is queued or freezing; once it is
    frozen (or failed) the whole page reloads, to show counts, card and items."""
    release = get_object_or_404(Release, pk=pk)
    response = render(request, "releases/_progress.html", _release_progress(release))
    if request.htmx and release.status in (Release.Status.FROZEN, Release.Status.FAILED):
        response["HX-Refresh"] = "true"
    return response


@role_required(roles.CURATOR)
@require_POST
def release_freeze(request, pk):
    release = get_object_or_404(Release, pk=pk)
    try:
        services.release_freeze(release)
    except ReleaseError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Freezing queued.")
    return redirect(release.get_absolute_url())


@role_required(roles.CURATOR)
@require_http_methods(["GET", "POST"])
def release_exports(request, pk):
    """GET: the exports table (polled while an export runs). POST: export one format."""
    release = get_object_or_404(Release, pk=pk)
    if request.method == "GET":
        return render(request, "releases/_exports.html", _exports_context(release))
    fmt = request.POST.get("format", "")
    options, values = export_options(request.POST, fmt)
    try:
        export = services.export_create(release, fmt, options, request.user)
    except ReleaseError as exc:
        key = fmt if fmt in ReleaseExport.Format.values and exc.field != "release" else "general"
        context = _exports_context(release, {key: exc.message}, values)
        if request.htmx:
            return render(request, "releases/_exports.html", context, status=400)
        messages.error(request, exc.message)
        return redirect(release.get_absolute_url() + "#exports")
    if request.htmx:
        export.refresh_from_db()
        return render(request, "releases/_exports.html", _exports_context(release))
    messages.success(request, f"Export #{export.pk} ({export.get_format_display()}): {export.get_status_display()}.")
    return redirect(release.get_absolute_url() + "#exports")


def export_options(post, fmt: str) -> tuple[dict, dict]:
    """The export form's fields as service options (checked by the service), and the values to
    show again on an error."""
    values = {key: post.get(key, "").strip() for key in ("images", "missing_images", "image_archive",
                                                          "samples_per_shard", "shard_mb")}
    options = {key: values[key] for key in ("images", "missing_images") if values[key]}
    if fmt == ReleaseExport.Format.WEBDATASET:
        options["samples_per_shard"] = values["samples_per_shard"]
    elif values["images"] != "none" and values["image_archive"]:
        options["image_archive"] = values["image_archive"]
    if values["shard_mb"] and (values["images"] != "none" or fmt == ReleaseExport.Format.WEBDATASET):
        try:
            options["shard_size"] = int(float(values["shard_mb"]) * 1024 * 1024)
        except ValueError:
            options["shard_size"] = values["shard_mb"]  # refused by the service, with its message
    return options, values


def _export_action(request, pk, export_id, action, done: str):
    """Run one service on one export of the release; the exports fragment (htmx) or a redirect."""
    release = get_object_or_404(Release, pk=pk)
    export = get_object_or_404(ReleaseExport, pk=export_id, release=release)
    errors = {}
    try:
        action(export)
    except ReleaseError as exc:
        errors = {"general": exc.message}
    if request.htmx:
        return render(request, "releases/_exports.html", _exports_context(release, errors),
                      status=400 if errors else 200)
    if errors:
        messages.error(request, errors["general"])
    else:
        messages.success(request, done.format(export=export))
    return redirect(release.get_absolute_url() + "#exports")


@role_required(roles.CURATOR)
@require_POST
def export_verify(request, pk, export_id):
    """Re-export and verify: write the files again and compare every sha256 (a task)."""
    return _export_action(request, pk, export_id, services.export_verify,
                          "Export #{export.pk}: re-export and verify queued.")


@role_required(roles.CURATOR)
@require_POST
def export_delete(request, pk, export_id):
    """Delete an export and its files."""
    return _export_action(request, pk, export_id, services.export_delete,
                          "Export #{export.pk} and its files deleted.")


def serve_export_file(export: ReleaseExport, name: str | None):
    """The response for one file of a done export: streamed from a local disk (as an attachment),
    or a redirect to a short-lived signed URL on S3. ``name`` may be left out when the export has one
    file besides its manifest (an export without images in a one-file format)."""
    if export.status != ReleaseExport.Status.DONE:
        raise Http404("This export is not finished.")
    names = [f["name"] for f in export.files or []]
    if not name:
        main = [n for n in names if not n.endswith(MANIFEST_SUFFIX)] or names
        if len(main) != 1:
            raise Http404("This export has several files: name one with ?file=.")
        name = main[0]
    if name not in names:
        raise Http404("This export has no such file.")
    stored = storage_name(export, name)
    download_name = f"release-{export.release_id}-{name.replace('/', '-')}"
    try:
        default_storage.path(stored)
    except NotImplementedError:
        url = default_storage.url(stored, parameters={
            "ResponseContentType": "application/octet-stream",
            "ResponseContentDisposition": f'attachment; filename="{download_name}"'})
        return HttpResponseRedirect(url)
    try:
        handle = default_storage.open(stored, "rb")
    except FileNotFoundError:
        raise Http404("The file is missing from storage.") from None
    response = FileResponse(handle, as_attachment=True, filename=download_name,
                            content_type="application/octet-stream")
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response


@role_required(roles.CURATOR)
@require_GET
def export_download(request, pk, export_id):
    export = get_object_or_404(ReleaseExport, pk=export_id, release_id=pk)
    return serve_export_file(export, request.GET.get("file"))
