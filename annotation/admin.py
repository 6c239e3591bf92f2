"""Every annotation model in the Django admin, with list filters and search, for admins who need
to look at or repair a campaign by hand. Votes and their audit trail are read-mostly: the pages
are where people work, the admin is the back door. Ledger entries are read-only here: money moves
only through ``annotation.providers.money``, which keeps each payment once (its token)."""
from django.contrib import admin

from .models import (
    Aggregate,
    Assignment,
    Campaign,
    GoldAnswer,
    LedgerEntry,
    Membership,
    Reservation,
    Task,
    Vote,
    VoteEdit,
    Worker,
)


class MembershipInline(admin.TabularInline):
    model = Membership
    fields = ["worker", "blocked", "blocked_reason", "votes", "gold_seen", "gold_correct", "reliability", "qualified"]
    raw_id_fields = ["worker"]
    extra = 0
    show_change_link = True


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "status", "backend", "collection", "votes_per_item", "created_by", "created_at"]
    list_filter = ["status", "kind", "backend", "priority", "dynamic_overlap", "open_to_all"]
    search_fields = ["name", "instructions"]
    raw_id_fields = ["collection", "rate_campaign", "created_by"]
    readonly_fields = ["stats", "stats_updated_at", "created_at", "updated_at"]
    inlines = [MembershipInline]


@admin.register(Worker)
class WorkerAdmin(admin.ModelAdmin):
    list_display = ["id", "__str__", "provider", "external_id", "blocked", "created_at"]
    list_filter = ["provider", "blocked"]
    search_fields = ["user__username", "external_id"]
    raw_id_fields = ["user"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["campaign", "worker", "blocked", "votes", "gold_seen", "gold_correct", "reliability", "qualified"]
    list_filter = ["blocked", "qualified", "campaign"]
    search_fields = ["campaign__name", "worker__user__username", "worker__external_id", "blocked_reason"]
    raw_id_fields = ["campaign", "worker", "assignment"]


class GoldAnswerInline(admin.StackedInline):
    model = GoldAnswer
    extra = 0


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["id", "campaign", "role", "status", "votes_count", "reserved_count", "votes_required", "priority"]
    list_filter = ["role", "status", "campaign"]
    search_fields = ["caption__text", "image__external_id", "=id"]
    raw_id_fields = ["campaign", "image", "caption"]
    inlines = [GoldAnswerInline]


@admin.register(GoldAnswer)
class GoldAnswerAdmin(admin.ModelAdmin):
    list_display = ["task", "value", "tolerance"]
    list_filter = ["task__role", "task__campaign"]
    search_fields = ["feedback", "task__caption__text"]
    raw_id_fields = ["task"]


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["id", "campaign", "worker", "state", "tasks_done", "seconds", "started_at", "last_seen_at"]
    list_filter = ["state", "campaign"]
    search_fields = ["provider_assignment_id", "provider_job_id", "worker__user__username", "worker__external_id"]
    raw_id_fields = ["campaign", "worker"]


@admin.register(Reservation)
class ReservationAdmin(admin.ModelAdmin):
    list_display = ["id", "campaign", "task", "worker", "created_at", "expires_at"]
    list_filter = ["campaign"]
    search_fields = ["worker__user__username", "worker__external_id", "=task__id"]
    raw_id_fields = ["task", "worker", "campaign", "assignment"]


class VoteEditInline(admin.TabularInline):
    model = VoteEdit
    readonly_fields = ["old_value", "new_value", "edited_at"]
    extra = 0
    can_delete = False


@admin.register(Vote)
class VoteAdmin(admin.ModelAdmin):
    list_display = ["id", "campaign", "task", "worker", "role", "value", "correct", "seconds", "created_at"]
    list_filter = ["role", "correct", "campaign"]
    search_fields = ["worker__user__username", "worker__external_id", "=task__id"]
    raw_id_fields = ["task", "worker", "campaign", "assignment", "caption"]
    readonly_fields = ["created_at", "updated_at"]
    inlines = [VoteEditInline]


@admin.register(VoteEdit)
class VoteEditAdmin(admin.ModelAdmin):
    list_display = ["vote", "old_value", "new_value", "edited_at"]
    list_filter = ["vote__campaign"]
    search_fields = ["=vote__id", "vote__worker__user__username"]
    raw_id_fields = ["vote"]


@admin.register(Aggregate)
class AggregateAdmin(admin.ModelAdmin):
    list_display = ["task", "part", "method", "label", "confidence", "n_votes", "updated_at"]
    list_filter = ["method", "task__campaign"]
    search_fields = ["=task__id", "part"]
    raw_id_fields = ["task"]


@admin.register(LedgerEntry)
class LedgerEntryAdmin(admin.ModelAdmin):
    list_display = ["id", "campaign", "kind", "state", "amount_cents", "token", "provider", "worker", "created_at",
                    "paid_at"]
    list_filter = ["kind", "state", "provider", "campaign"]
    search_fields = ["token", "note", "job__external_id", "assignment__provider_assignment_id",
                     "worker__external_id", "worker__user__username"]
    raw_id_fields = ["campaign", "job", "assignment", "worker"]
    date_hierarchy = "created_at"

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # view-only: the list and each entry can be read, nothing saved

    def has_delete_permission(self, request, obj=None):
        return False
