"""Release pages (curators and admins): the list, the create form, a release's page with its
freezing progress, counts chart, dataset card, items and exports, and permission-checked downloads.

Views are thin: they parse a form, call one service (``release_create``, ``release_freeze``,
``export_create``) and render. Polled fragments (freezing progress, the exports table) answer
htmx requests; every form also works without JavaScript.
"""
from __future__ import annotations

import json

from django import forms
from django.contrib import messages
from django.core.files.storage import default_storage
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.markdown import render_markdown
from annotation.models import Campaign
from captionlab import roles
from captionlab.roles import role_required
from curation import charts
from curation.models import Caption, Collection, FilterRun, Release, ReleaseExport, ReleaseItem
from curation.views import _render

from . import ReleaseError, services
from .publish import storage_name

RELEASES_PER_PAGE = 50
ITEMS_PER_PAGE = 50
VOTE_RULE_ROWS = 3
RULE_CHOICES = [
    ("", "—"),
    ("good_1plus", "1+ GOOD votes"),
    ("good_2plus", "2+ GOOD votes"),
    ("good_3plus", "3+ GOOD votes"),
    ("fluent", "Aggregated as fluent"),
    ("label", "Aggregated label equals…"),
]
METHOD_CHOICES = [("", "default"), ("majority", "majority"), ("dawid_skene", "Dawid-Skene"),
                  ("consistent", "consistent votes only"), ("mean", "mean")]
USE_CHOICES = [("filter", "Filter: keep only passing"), ("verify", "Verify: mark passing human-verified")]
SPLITS = ("train", "val", "test")


# --- The create form -----------------------------------------------------------------------------


class ReleaseForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    collections = forms.ModelMultipleChoiceField(queryset=Collection.objects.order_by("name"),
                                                 widget=forms.SelectMultiple(attrs={"size": 6}),
                                                 help_text="The images and captions to choose from.")
    run = forms.ModelChoiceField(queryset=FilterRun.objects.none(), required=False, label="Filter run",
                                 help_text="Only captions this run kept (curator overrides applied). "
                                           "The run must be of one of the collections.")
    origins = forms.MultipleChoiceField(choices=Caption.Origin.choices, required=False,
                                        widget=forms.CheckboxSelectMultiple,
                                        help_text="None ticked: every origin but model-generated.")
    include_model_captions = forms.BooleanField(
        required=False, label="Include model-generated captions",
        help_text="Captions a captioner wrote; never in the test split (they would score a model against model "
                  "outputs).")
    languages = forms.CharField(required=False, max_length=200, help_text="Comma-separated codes, e.g. en, de. "
                                                                          "Empty: every language.")
    max_captions_per_image = forms.IntegerField(required=False, min_value=1, label="Max captions per image")
    dedup = forms.ChoiceField(choices=[("sha256", "Identical image files (sha256)"),
                                       ("phash", "Near-identical images (perceptual hash)"), ("none", "None")],
                              initial="sha256", label="Deduplicate images")
    split_train = forms.FloatField(min_value=0, max_value=1, initial=0.8, label="Train share")
    split_val = forms.FloatField(min_value=0, max_value=1, initial=0.1, label="Validation share")
    split_test = forms.FloatField(min_value=0, max_value=1, initial=0.1, label="Test share")
    seed = forms.IntegerField(initial=0, min_value=0, max_value=2**31 - 1,
                              help_text="The same seed gives the same split of the same images.")
    test_human_verified = forms.BooleanField(required=False, label="Test split holds only human-verified captions")
    missing_image = forms.ChoiceField(choices=[("skip", "Skip the image and record it in the report"),
                                               ("fail", "Fail the release")], initial="skip",
                                      label="When an image file is missing")
    freeze = forms.BooleanField(required=False, initial=True, label="Freeze right away")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["run"].queryset = (FilterRun.objects.filter(status=FilterRun.Status.DONE)
                                       .select_related("collection", "pipeline").order_by("-created_at"))
        self.fields["run"].label_from_instance = lambda run: (
            f"#{run.pk} {run.pipeline.name if run.pipeline else 'deleted pipeline'} on {run.collection.name}")
        campaigns = Campaign.objects.order_by("name")
        for i in range(1, VOTE_RULE_ROWS + 1):
            self.fields[f"vote_campaign_{i}"] = forms.ModelChoiceField(
                queryset=campaigns, required=False, label=f"Campaign {i}")
            self.fields[f"vote_rule_{i}"] = forms.ChoiceField(choices=RULE_CHOICES, required=False, label="Rule")
            self.fields[f"vote_label_{i}"] = forms.CharField(required=False, max_length=60, label="Label")
            self.fields[f"vote_method_{i}"] = forms.ChoiceField(choices=METHOD_CHOICES, required=False,
                                                                label="Aggregation")
            self.fields[f"vote_use_{i}"] = forms.ChoiceField(choices=USE_CHOICES, required=False, initial="filter",
                                                             label="Use")

    def vote_rows(self):
        return [(self[f"vote_campaign_{i}"], self[f"vote_rule_{i}"], self[f"vote_label_{i}"],
                 self[f"vote_method_{i}"], self[f"vote_use_{i}"]) for i in range(1, VOTE_RULE_ROWS + 1)]

    def clean(self):
        data = super().clean()
        for i in range(1, VOTE_RULE_ROWS + 1):
            campaign, rule = data.get(f"vote_campaign_{i}"), data.get(f"vote_rule_{i}")
            if campaign and not rule:
                self.add_error(f"vote_rule_{i}", "Choose a rule for this campaign.")
            if rule and not campaign:
                self.add_error(f"vote_campaign_{i}", "Choose the campaign whose votes the rule reads.")
            if rule == "label" and not data.get(f"vote_label_{i}"):
                self.add_error(f"vote_label_{i}", "Give the label the aggregate must equal.")
        run, collections = data.get("run"), data.get("collections")
        if run and collections and run.collection_id not in {c.pk for c in collections}:
            self.add_error("run", f"Run #{run.pk} is of {run.collection.name}, which is not selected.")
        return data

    def config(self) -> dict:
        data = self.cleaned_data
        rules, verified_by = [], []
        for i in range(1, VOTE_RULE_ROWS + 1):
            if data.get(f"vote_campaign_{i}") and data.get(f"vote_rule_{i}"):
                rule = {"campaign": data[f"vote_campaign_{i}"].pk, "rule": data[f"vote_rule_{i}"]}
                if data.get(f"vote_label_{i}"):
                    rule["label"] = data[f"vote_label_{i}"]
                if data.get(f"vote_method_{i}"):
                    rule["method"] = data[f"vote_method_{i}"]
                (verified_by if data.get(f"vote_use_{i}") == "verify" else rules).append(rule)
        languages = [code.strip() for code in (data.get("languages") or "").split(",") if code.strip()]
        return {
            "collections": [c.pk for c in data["collections"]],
            "run": data["run"].pk if data.get("run") else None,
            "vote_rules": rules,
            "verified_by": verified_by,
            "origins": list(data.get("origins") or []),
            "languages": languages,
            "max_captions_per_image": data.get("max_captions_per_image"),
            "dedup": data["dedup"],
            "splits": {"train": data["split_train"], "val": data["split_val"], "test": data["split_test"]},
            "seed": data["seed"],
            "test_human_verified": bool(data.get("test_human_verified")),
            "missing_image": data["missing_image"],
            "include_model_captions": bool(data.get("include_model_captions")),
        }


# Where a ReleaseError about a configuration key is shown on the form.
ERROR_FIELDS = {"collections": "collections", "run": "run", "vote_rules": "vote_campaign_1",
                "verified_by": "vote_campaign_1", "origins": "origins", "phash_distance": "dedup",
                "languages": "languages", "max_captions_per_image": "max_captions_per_image", "dedup": "dedup",
                "splits": "split_train", "seed": "seed", "test_human_verified": "test_human_verified",
                "missing_image": "missing_image", "name": "name", "include_model_captions": "include_model_captions"}


def form_field_of(error_field: str | None) -> str | None:
    """``vote_rules[1].campaign`` -> ``vote_campaign_2``; ``splits.test`` -> ``split_test``."""
    if not error_field:
        return None
    head = error_field.split("[")[0].split(".")[0]
    if head in ("vote_rules", "verified_by") and "[" in error_field:
        try:
            index = int(error_field.split("[")[1].split("]")[0])
        except ValueError:
            index = 0
        part = error_field.split(".")[-1] if "." in error_field else "campaign"
        part = part if part in ("campaign", "rule", "label", "method") else "campaign"
        if 0 <= index < VOTE_RULE_ROWS:
            return f"vote_{part}_{index + 1}"
    if head == "splits" and "." in error_field and error_field.split(".")[1] in SPLITS:
        return f"split_{error_field.split('.')[1]}"
    return ERROR_FIELDS.get(head)


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
    width, label_w, bar_x, bar_w = 640, 90, 100, 400
    top, group_h, bar_h = 16, 58, 18
    height = top + group_h * len(rows) + 24
    peak = max([r["images"] for r in rows] + [r["captions"] for r in rows] + [1])
    total_i = sum(r["images"] for r in rows)
    total_c = sum(r["captions"] for r in rows)
    colours = {"images": "#3b5bdb", "captions": charts.COLOURS["kept"]}
    out = [f'<svg class="chart counts-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="100%" role="img" aria-labelledby="counts-title counts-desc" '
           f'font-family="system-ui, sans-serif" font-size="13">',
           '<title id="counts-title">Images and captions per split</title>',
           '<desc id="counts-desc">' + escape("; ".join(
               f"{r['split']}: {r['images']} images, {r['captions']} captions" for r in rows)) + "</desc>"]
    for i, row in enumerate(rows):
        y = top + i * group_h
        out.append(f'<g class="split-row" data-split="{escape(row["split"])}" data-images="{row["images"]}" '
                   f'data-captions="{row["captions"]}">')
        out.append(charts._text(label_w, y + bar_h + 8, row["split"], anchor="end", weight="600", fill="#1c2330"))
        for j, key in enumerate(("images", "captions")):
            count = row[key]
            whole = total_i if key == "images" else total_c
            by = y + j * (bar_h + 4)
            w = bar_w * count / peak
            if count and w < 1:
                w = 1.0
            out.append(f'<rect x="{bar_x}" y="{by}" width="{bar_w}" height="{bar_h}" rx="3" '
                       f'fill="{charts.COLOURS["track"]}"/>')
            if count:
                out.append(f'<rect class="bar-{key}" x="{bar_x}" y="{by}" width="{w:.1f}" height="{bar_h}" rx="3" '
                           f'fill="{colours[key]}"><title>{escape(f"{count:,} {key}")}</title></rect>')
            share = charts.fmt_pct(charts.percent(count, whole))
            out.append(charts._text(bar_x + bar_w + 8, by + bar_h - 4, f"{count:,} {key} ({share}%)", size=12,
                                    fill="#1c2330"))
        out.append("</g>")
    ly = top + group_h * len(rows) + 10
    for j, key in enumerate(("images", "captions")):
        lx = bar_x + j * 110
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" rx="2" fill="{colours[key]}"/>')
        out.append(charts._text(lx + 17, ly, key, size=12, fill="#1c2330"))
    out.append("</svg>")
    return mark_safe("".join(out))


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
    releases = Release.objects.select_related("created_by").order_by("-created_at")
    page = Paginator(releases, RELEASES_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "releases/list.html", {"page": page})


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
    return _render(request, "releases/detail.html", "releases/_items.html", context)


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
    options, values = {}, {}
    if fmt == ReleaseExport.Format.WEBDATASET:
        values = {"samples_per_shard": request.POST.get("samples_per_shard", "").strip(),
                  "shard_mb": request.POST.get("shard_mb", "").strip()}
        options["samples_per_shard"] = values["samples_per_shard"]
        if values["shard_mb"]:
            try:
                options["shard_size"] = int(float(values["shard_mb"]) * 1024 * 1024)
            except ValueError:
                options["shard_size"] = values["shard_mb"]  # refused by the service, with its message
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


def serve_export_file(export: ReleaseExport, name: str | None):
    """The response for one file of a done export: streamed from a local disk (as an attachment),
    or a redirect to a short-lived signed URL on S3. ``name`` may be left out for a single file."""
    if export.status != ReleaseExport.Status.DONE:
        raise Http404("This export is not finished.")
    names = [f["name"] for f in export.files or []]
    if not name:
        if len(names) != 1:
            raise Http404("This export has several files: name one with ?file=.")
        name = names[0]
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
