from django.contrib import admin
from django.utils.html import format_html

from .models import (
    Caption,
    Collection,
    FilterArtifact,
    FilterDecision,
    FilterRun,
    Image,
    ImportIssue,
    ImportJob,
    Pipeline,
    Review,
    RunChunk,
)


@admin.register(Collection)
class CollectionAdmin(admin.ModelAdmin):
    list_display = ["name", "source_kind", "language", "created_by", "created_at"]
    list_filter = ["source_kind", "language"]
    search_fields = ["name", "description"]


class CaptionInline(admin.TabularInline):
    model = Caption
    fk_name = "image"
    fields = ["text", "origin", "language", "source", "parent"]
    raw_id_fields = ["parent"]
    extra = 0
    show_change_link = True


@admin.register(Image)
class ImageAdmin(admin.ModelAdmin):
    list_display = ["id", "thumb", "collection", "status", "format", "width", "height", "external_id", "created_at"]
    list_filter = ["status", "format", "collection", "license"]
    search_fields = ["external_id", "sha256", "source_url", "credit"]
    readonly_fields = ["sha256", "phash", "width", "height", "format", "file_size", "import_job", "import_line"]
    raw_id_fields = ["import_job"]
    inlines = [CaptionInline]

    @admin.display(description="")
    def thumb(self, obj):
        if not obj.thumbnail:
            return "-"
        return format_html('<img src="/media/images/{}/thumb" style="height:40px">', obj.pk)


@admin.register(Caption)
class CaptionAdmin(admin.ModelAdmin):
    list_display = ["id", "short_text", "origin", "language", "source", "image"]
    list_filter = ["origin", "language", "image__collection"]
    search_fields = ["text", "source", "external_id"]
    raw_id_fields = ["image", "parent", "import_job"]

    @admin.display(description="text")
    def short_text(self, obj):
        return obj.text[:80]


class ImportIssueInline(admin.TabularInline):
    model = ImportIssue
    fields = ["line", "item", "code", "message", "severity"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    max_num = 0


@admin.register(ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "collection", "status", "source_name", "rows_read", "rows_imported", "rows_skipped", "created_at"]
    list_filter = ["kind", "status", "collection"]
    search_fields = ["source_name", "error"]
    readonly_fields = [f.name for f in ImportJob._meta.fields]
    inlines = [ImportIssueInline]


@admin.register(ImportIssue)
class ImportIssueAdmin(admin.ModelAdmin):
    list_display = ["job", "line", "item", "code", "severity"]
    list_filter = ["code", "severity"]
    search_fields = ["item", "message"]
    raw_id_fields = ["job"]


# --- Pipelines, runs, decisions, releases -----------------------------------------------------------
#
# For looking things up. What changes them goes through the pages, the API and the commands, which check
# it and keep what depends on it right: a pipeline's steps are validated, an override is a Review with a
# recount of the funnel and the later steps reconciled, a release is frozen. Here they are read-only,
# except a pipeline's name and description. The decision and release item tables hold a row per item
# and step: no full counts, no filters over images or captions, ids instead of drop-downs.


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Pipeline)
class PipelineAdmin(admin.ModelAdmin):
    list_display = ["name", "preset", "step_count", "created_by", "updated_at"]
    list_filter = ["preset"]
    search_fields = ["name", "description"]
    fields = ["name", "description", "preset", "steps", "created_by", "updated_at"]
    readonly_fields = ["preset", "steps", "created_by", "updated_at"]  # steps: through the editor, which checks them

    @admin.display(description="steps")
    def step_count(self, obj):
        return len(obj.steps or [])

    def has_add_permission(self, request):
        return False


class RunChunkInline(admin.TabularInline):
    model = RunChunk
    fields = ["index", "status", "attempts", "seconds", "error"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    max_num = 0
    show_change_link = False


@admin.register(FilterRun)
class FilterRunAdmin(ReadOnlyAdmin):
    list_display = ["id", "pipeline", "collection", "status", "chunks_done", "chunks_total", "chunks_failed",
                    "items_done", "created_at", "finished_at"]
    list_filter = ["status", "collection"]
    search_fields = ["pipeline__name", "collection__name", "error"]
    list_select_related = ["pipeline", "collection"]
    inlines = [RunChunkInline]


@admin.register(FilterDecision)
class FilterDecisionAdmin(ReadOnlyAdmin):
    list_display = ["id", "run", "step", "filter_name", "image_id", "caption_id", "outcome", "override", "reason",
                    "score"]
    list_filter = ["outcome", "override", "filter_name"]
    search_fields = ["=run__id", "=caption__id", "=image__id", "reason"]
    raw_id_fields = ["run", "image", "caption"]
    show_full_result_count = False  # a run writes a dozen rows per caption: no COUNT over the table


@admin.register(Review)
class ReviewAdmin(ReadOnlyAdmin):
    list_display = ["id", "decision", "outcome", "user", "created_at"]
    list_filter = ["outcome"]
    search_fields = ["note", "user__username", "=decision__run__id"]
    raw_id_fields = ["decision", "user"]


@admin.register(FilterArtifact)
class FilterArtifactAdmin(ReadOnlyAdmin):
    list_display = ["filter_name", "version", "collection", "sha256", "created_at"]
    list_filter = ["filter_name"]
