"""Admin pages of releases (read-only: releases are frozen by their pages, API and command)."""
from django.contrib import admin

from curation.admin import ReadOnlyAdmin

from .models import Release, ReleaseExport, ReleaseItem


class ReleaseExportInline(admin.TabularInline):
    model = ReleaseExport
    fields = ["format", "status", "rows_done", "rows_total", "sha256"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    max_num = 0


@admin.register(Release)
class ReleaseAdmin(ReadOnlyAdmin):
    list_display = ["id", "name", "status", "items_total", "content_hash", "created_by", "frozen_at"]
    list_filter = ["status"]
    search_fields = ["name", "description", "content_hash"]
    inlines = [ReleaseExportInline]


@admin.register(ReleaseItem)
class ReleaseItemAdmin(ReadOnlyAdmin):
    list_display = ["id", "release", "position", "split", "short_text", "human_verified"]
    list_filter = ["split", "human_verified"]
    search_fields = ["=release__id", "text"]
    raw_id_fields = ["release", "image", "caption"]
    show_full_result_count = False

    @admin.display(description="text")
    def short_text(self, obj):
        return obj.text[:80]
