from django.contrib import admin
from django.utils.html import format_html

from .models import Caption, Collection, Image, ImportIssue, ImportJob


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
