"""Serializers of the campaign API.

Two views of most objects: the curator's (everything, including the selection, the stats and the
gold answers) and the annotator's (only what the annotator needs to work, and only their own
votes). The annotator's serializers never name a gold answer or another worker: a field left out
cannot leak.
"""
from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from curation.models import Caption

from .kinds import KINDS
from .models import Aggregate, Campaign, GoldAnswer, Membership, Task, Vote, VoteEdit

# --- campaigns ---------------------------------------------------------------------------------

PROVIDER_HELP = ("the crowd provider: inhouse (the platform's annotators, unpaid), linkout (a marketplace such as "
                 "Prolific sends participants to a start URL) or mturk (Amazon Mechanical Turk: closed by Amazon since "
                 "2026-09-30; usable only against an MTurk-compatible endpoint set in MTURK_ENDPOINT_URL)")
PLACES_HELP = "link-out only: how many participants are admitted; the next one is turned away"
PROVIDER_CONFIG_HELP = ("the provider's settings, a JSON object; unknown keys are refused. MTurk: tasks_per_assignment, "
                        "max_assignments, assignment_duration_seconds, lifetime_seconds, auto_approval_delay_seconds, "
                        "title, description, keywords, qualifications. Link-out: participant_param, study_param, "
                        "session_param, consent, completion_code, completion_code_per_assignment, completion_url, "
                        "tasks_per_assignment, minutes, fee_rate, api")
REVIEW_HELP = ("review rules, kept in provider_config.review: auto_approve (bool), min_gold_accuracy (0-1: reject an "
               "assignment below), block_below_gold_accuracy (0-1) with block_min_gold (gold items answered first): "
               "block a worker of any provider, min_seconds_per_task, min_agreement, approve_feedback, "
               "reject_feedback, bonus_cents, bonus_min_gold_accuracy")

SETTING_FIELDS = ["instructions", "annotator_question", "votes_per_item", "dynamic_overlap", "max_votes_per_item",
                  "confidence_threshold",
                  "gold_rate", "reservation_seconds", "edit_window_seconds", "priority", "qualification_pass_mark",
                  "open_to_all", "text_min_chars", "text_max_chars", "text_language", "rate_campaign",
                  "reward_cents", "budget_cents"]


class CampaignSerializer(serializers.ModelSerializer):
    """The curator's view of a campaign."""

    kind_label = serializers.SerializerMethodField()
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    task_count = serializers.IntegerField(read_only=True)
    member_count = serializers.IntegerField(read_only=True)

    places = serializers.SerializerMethodField(help_text="link-out: participants admitted at most")
    provider_note = serializers.SerializerMethodField(help_text="a warning about the provider, e.g. MTurk closed")

    class Meta:
        model = Campaign
        fields = ["id", "name", "kind", "kind_label", "collection", "status", "backend", "selection", *SETTING_FIELDS,
                  "stats", "stats_updated_at", "created_by", "created_at", "updated_at", "task_count", "member_count",
                  "provider_config", "places", "provider_note"]
        read_only_fields = ["kind", "collection", "status", "backend", "selection", "stats", "stats_updated_at",
                            "created_at", "updated_at", "provider_config"]
        extra_kwargs = {"backend": {"help_text": "the crowd provider: inhouse, linkout or mturk (Mechanical Turk: "
                                                 "closed by Amazon since 2026-09-30; usable against a configured "
                                                 "MTurk-compatible endpoint)"}}

    def get_kind_label(self, obj) -> str:
        kind = KINDS.get(obj.kind)
        return kind.label if kind else obj.kind

    def get_places(self, obj) -> int | None:
        return (obj.provider_config or {}).get("places")

    def get_provider_note(self, obj) -> str:
        from .providers.controls import provider_note

        return provider_note(obj.backend)


class ChoiceSerializer(serializers.Serializer):
    value = serializers.CharField()
    label = serializers.CharField()
    key = serializers.CharField()


class CampaignAnnotatorSerializer(serializers.ModelSerializer):
    """The annotator's view: what to do and how, never the selection, the stats or anyone else's work."""

    kind_label = serializers.SerializerMethodField()
    target = serializers.SerializerMethodField()
    choices = serializers.SerializerMethodField()
    question = serializers.SerializerMethodField(help_text="what the annotator is asked about each item")

    class Meta:
        model = Campaign
        fields = ["id", "name", "kind", "kind_label", "target", "choices", "question", "status", "instructions",
                  "reservation_seconds", "edit_window_seconds", "text_min_chars", "text_max_chars", "text_language"]
        read_only_fields = fields

    def get_kind_label(self, obj) -> str:
        kind = KINDS.get(obj.kind)
        return kind.label if kind else obj.kind

    def get_target(self, obj) -> str:
        kind = KINDS.get(obj.kind)
        return kind.target if kind else ""

    def get_question(self, obj) -> str:
        return obj.question if obj.kind in KINDS else obj.annotator_question

    @extend_schema_field(ChoiceSerializer(many=True))
    def get_choices(self, obj) -> list[dict]:
        kind = KINDS.get(obj.kind)
        return [c.__dict__ for c in kind.choices] if kind else []


class CampaignCreateSerializer(serializers.Serializer):
    """A new campaign: a name, a kind, a selection of items, settings and members."""

    name = serializers.CharField(max_length=200)
    # A CharField, not a ChoiceField: an enum named "kind" would collide in the schema with the
    # import kinds of the curation API.
    kind = serializers.CharField(max_length=32, help_text="one of: " + ", ".join(sorted(KINDS)))
    collection = serializers.IntegerField(help_text="id of the collection the items come from")
    run = serializers.IntegerField(required=False, allow_null=True, help_text="a filter run over the collection")
    step = serializers.IntegerField(required=False, allow_null=True, min_value=0,
                                    help_text="the run's step whose decisions select the items")
    outcome = serializers.ChoiceField(choices=["keep", "drop"], required=False, allow_blank=True)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=60,
                                   help_text="only the step's decisions with this reason, e.g. uncertain_rewrite "
                                             "(needs run and step)")
    score_min = serializers.FloatField(required=False, allow_null=True)
    score_max = serializers.FloatField(required=False, allow_null=True)
    origin = serializers.ChoiceField(choices=Caption.Origin.choices, required=False, allow_blank=True)
    sample = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    seed = serializers.IntegerField(required=False, default=0)
    members = serializers.ListField(child=serializers.CharField(max_length=150), required=False, default=list,
                                    help_text="usernames of annotators")
    status = serializers.ChoiceField(choices=[Campaign.Status.DRAFT, Campaign.Status.RUNNING],
                                     default=Campaign.Status.DRAFT)
    instructions = serializers.CharField(required=False, allow_blank=True, max_length=50_000)
    annotator_question = serializers.CharField(required=False, allow_blank=True, max_length=300,
                                               help_text="the question annotators read on each item; empty: the "
                                                         "kind's own question")
    votes_per_item = serializers.IntegerField(required=False, min_value=1, max_value=50)
    dynamic_overlap = serializers.BooleanField(required=False)
    max_votes_per_item = serializers.IntegerField(required=False, min_value=1, max_value=50)
    confidence_threshold = serializers.FloatField(required=False, min_value=0.5, max_value=1.0)
    gold_rate = serializers.FloatField(required=False, min_value=0.0, max_value=0.5)
    reservation_seconds = serializers.IntegerField(required=False, min_value=30, max_value=86400)
    edit_window_seconds = serializers.IntegerField(required=False, min_value=0, max_value=86400)
    priority = serializers.ChoiceField(choices=Campaign.Priority.choices, required=False)
    qualification_pass_mark = serializers.FloatField(required=False, allow_null=True, min_value=0.0, max_value=1.0)
    open_to_all = serializers.BooleanField(required=False)
    text_min_chars = serializers.IntegerField(required=False, min_value=0, max_value=5000)
    text_max_chars = serializers.IntegerField(required=False, min_value=10, max_value=5000)
    text_language = serializers.CharField(required=False, max_length=16)
    rate_campaign = serializers.PrimaryKeyRelatedField(queryset=Campaign.objects.all(), required=False,
                                                       allow_null=True)
    reward_cents = serializers.IntegerField(required=False, min_value=0, max_value=100_000,
                                            help_text="reward per assignment (link-out: per participant), cents")
    budget_cents = serializers.IntegerField(required=False, min_value=0, max_value=100_000_000,
                                            help_text="rewards, bonuses and fees together never exceed it, cents")
    backend = serializers.ChoiceField(choices=Campaign.Backend.choices, required=False, help_text=PROVIDER_HELP)
    places = serializers.IntegerField(required=False, allow_null=True, help_text=PLACES_HELP)
    provider_config = serializers.JSONField(required=False, help_text=PROVIDER_CONFIG_HELP)
    review = serializers.JSONField(required=False, help_text=REVIEW_HELP)

    def validate_kind(self, value):
        if value not in KINDS:
            raise serializers.ValidationError(f"Unknown campaign kind {value!r}; choose one of "
                                              f"{', '.join(sorted(KINDS))}.")
        return value

    def validate_members(self, names):
        return resolve_annotators(names)

    SELECTION = ("collection", "run", "step", "outcome", "reason", "score_min", "score_max", "origin", "sample", "seed")

    def validate(self, attrs):
        lo, hi = attrs.get("score_min"), attrs.get("score_max")
        if lo is not None and hi is not None and lo > hi:
            raise serializers.ValidationError({"score_max": ["The score range is empty: the maximum is below the "
                                                             "minimum."]})
        if (lo is not None or hi is not None) and (attrs.get("run") is None or attrs.get("step") is None):
            raise serializers.ValidationError({"score_min": ["A score range needs a filter run and a step."]})
        if attrs.get("step") is not None and attrs.get("run") is None:
            raise serializers.ValidationError({"step": ["A step needs a filter run."]})
        if (attrs.get("reason") or "").strip() and (attrs.get("run") is None or attrs.get("step") is None):
            raise serializers.ValidationError({"reason": ["Selecting decisions by reason needs a filter run and a "
                                                          "step."]})
        lo_chars, hi_chars = attrs.get("text_min_chars"), attrs.get("text_max_chars")
        if lo_chars is not None and hi_chars is not None and lo_chars > hi_chars:
            raise serializers.ValidationError({"text_max_chars": ["The length limit is below the minimum length."]})
        return attrs


class CampaignUpdateSerializer(serializers.ModelSerializer):
    """Settings a curator may change while a campaign is a draft or paused."""

    class Meta:
        model = Campaign
        fields = ["name", *SETTING_FIELDS]
        extra_kwargs = {"reservation_seconds": {"min_value": 30, "max_value": 86400},
                        "votes_per_item": {"min_value": 1, "max_value": 50},
                        "max_votes_per_item": {"min_value": 1, "max_value": 50},
                        "confidence_threshold": {"min_value": 0.5, "max_value": 1.0},
                        "gold_rate": {"min_value": 0.0, "max_value": 0.5},
                        "qualification_pass_mark": {"min_value": 0.0, "max_value": 1.0},
                        "text_max_chars": {"min_value": 10, "max_value": 5000},
                        "instructions": {"max_length": 50_000}}

    def validate_rate_campaign(self, value):
        if value is not None and self.instance is not None and value.pk == self.instance.pk:
            raise serializers.ValidationError("A campaign cannot feed itself.")
        return value


class CampaignPatchSerializer(CampaignUpdateSerializer):
    """The PATCH body as documented: the settings above plus the crowd controls (validated by
    ``annotation.providers.controls``, as on the pages and in the command)."""

    backend = serializers.ChoiceField(choices=Campaign.Backend.choices, required=False, help_text=PROVIDER_HELP)
    places = serializers.IntegerField(required=False, allow_null=True, help_text=PLACES_HELP)
    provider_config = serializers.JSONField(required=False, help_text=PROVIDER_CONFIG_HELP)
    review = serializers.JSONField(required=False, help_text=REVIEW_HELP)

    class Meta(CampaignUpdateSerializer.Meta):
        fields = [*CampaignUpdateSerializer.Meta.fields, "backend", "places", "provider_config", "review"]


class StatusSerializer(serializers.Serializer):
    # A CharField: the campaign's status enum is already in the schema through CampaignSerializer.
    status = serializers.CharField(max_length=10, help_text="one of: " + ", ".join(Campaign.Status.values))

    def validate_status(self, value):
        if value not in Campaign.Status.values:
            raise serializers.ValidationError(f"Unknown status {value!r}; choose one of "
                                              f"{', '.join(Campaign.Status.values)}.")
        return value


class ProgressSerializer(serializers.Serializer):
    """Curators get the campaign's counts; an annotator gets their own (``done``, ``remaining``)."""

    tasks = serializers.IntegerField(required=False)
    tasks_done = serializers.IntegerField(required=False)
    votes = serializers.IntegerField(required=False)
    votes_required = serializers.IntegerField(required=False)
    percent = serializers.IntegerField(required=False)
    done = serializers.IntegerField(required=False)
    remaining = serializers.IntegerField(required=False)


def resolve_annotators(names) -> list:
    """Users for usernames; every name must be an active user with the annotator (or curator) role."""
    from captionlab.roles import ANNOTATOR, CURATOR, has_role

    names = list(dict.fromkeys(n.strip() for n in names if n and n.strip()))
    users = {u.username: u for u in get_user_model().objects.filter(username__in=names, is_active=True)}
    unknown = [n for n in names if n not in users]
    if unknown:
        raise serializers.ValidationError(f"No active user named {', '.join(unknown)}.")
    roleless = [n for n in names if not (has_role(users[n], ANNOTATOR) or has_role(users[n], CURATOR))]
    if roleless:
        raise serializers.ValidationError(f"Not an annotator: {', '.join(roleless)}.")
    return [users[n] for n in names]


class MembersSerializer(serializers.Serializer):
    usernames = serializers.ListField(child=serializers.CharField(max_length=150), min_length=1, max_length=1000)

    def validate_usernames(self, names):
        return resolve_annotators(names)


class MembersResultSerializer(serializers.Serializer):
    added = serializers.IntegerField()
    members = serializers.ListField(child=serializers.CharField())


class AggregateQueuedSerializer(serializers.Serializer):
    queued = serializers.BooleanField()
    task_id = serializers.CharField(allow_null=True)


# --- tasks, votes, aggregates ------------------------------------------------------------------


class AggregateSerializer(serializers.ModelSerializer):
    class Meta:
        model = Aggregate
        fields = ["id", "task", "part", "method", "label", "confidence", "n_votes", "details", "updated_at"]
        read_only_fields = fields


class TaskAggregateSerializer(serializers.ModelSerializer):
    class Meta:
        model = Aggregate
        fields = ["part", "method", "label", "confidence", "n_votes"]
        read_only_fields = fields


class TaskSerializer(serializers.ModelSerializer):
    """A task as the curator sees it: counters, role, gold answer and consensus labels."""

    caption_text = serializers.SerializerMethodField()
    gold = serializers.SerializerMethodField()
    aggregates = TaskAggregateSerializer(many=True, read_only=True)

    class Meta:
        model = Task
        fields = ["id", "role", "status", "image", "caption", "caption_text", "candidates", "votes_required",
                  "votes_count", "reserved_count", "priority", "model_score", "source_decision", "position",
                  "created_at", "done_at", "gold", "aggregates"]
        read_only_fields = fields

    def get_caption_text(self, obj) -> str | None:
        return obj.caption.text if obj.caption_id else None

    def get_gold(self, obj) -> dict | None:
        gold = getattr(obj, "gold", None) if obj.role != Task.Role.REAL else None
        return {"value": gold.value, "feedback": gold.feedback, "tolerance": gold.tolerance} if gold else None


class VoteEditSerializer(serializers.ModelSerializer):
    class Meta:
        model = VoteEdit
        fields = ["old_value", "new_value", "edited_at"]
        read_only_fields = fields


class VoteSerializer(serializers.ModelSerializer):
    """A vote as the curator sees it, with its worker, role, correctness and edits."""

    worker_name = serializers.SerializerMethodField()
    edits = VoteEditSerializer(many=True, read_only=True)

    class Meta:
        model = Vote
        fields = ["id", "task", "worker", "worker_name", "assignment", "role", "value", "correct", "seconds",
                  "caption", "created_at", "updated_at", "edits"]
        read_only_fields = fields

    def get_worker_name(self, obj) -> str:
        return str(obj.worker)


class OwnVoteSerializer(serializers.ModelSerializer):
    """The annotator's own vote. No role and no correctness: on a gold item either would say which
    items are gold and, for two choices, what the gold answer is."""

    editable_until = serializers.SerializerMethodField()
    edits = VoteEditSerializer(many=True, read_only=True)

    class Meta:
        model = Vote
        fields = ["id", "task", "value", "seconds", "created_at", "updated_at", "editable_until", "edits"]
        read_only_fields = fields

    def get_editable_until(self, obj) -> str | None:
        if obj.role in (Task.Role.TRAINING, Task.Role.QUALIFICATION) or obj.caption_id:
            return None
        return (obj.created_at + timedelta(seconds=obj.campaign.edit_window_seconds)).isoformat()


class VoteEditRequestSerializer(serializers.Serializer):
    value = serializers.JSONField(help_text="the new value, as for a vote")


class GoldSerializer(serializers.ModelSerializer):
    """A gold, training or qualification answer (curators only)."""

    role = serializers.CharField(source="task.role", read_only=True)

    class Meta:
        model = GoldAnswer
        fields = ["id", "task", "role", "value", "feedback", "tolerance"]
        read_only_fields = fields


class GoldCreateSerializer(serializers.Serializer):
    task = serializers.IntegerField(help_text="a task of this campaign")
    # All roles (one enum in the schema); services.set_gold refuses "real" with a message.
    role = serializers.ChoiceField(choices=Task.Role.choices, help_text="gold, training or qualification")
    value = serializers.JSONField(help_text="the expected answer, as a vote would give it")
    feedback = serializers.CharField(required=False, allow_blank=True, max_length=5000, default="")
    tolerance = serializers.FloatField(required=False, min_value=0.0, default=0.0)


class WorkerSerializer(serializers.ModelSerializer):
    """A campaign member with their quality figures (curators only)."""

    worker = serializers.IntegerField(source="worker_id", read_only=True)
    name = serializers.SerializerMethodField()
    provider = serializers.CharField(source="worker.provider", read_only=True)
    gold_accuracy = serializers.FloatField(read_only=True, allow_null=True)
    agreement_with_consensus = serializers.SerializerMethodField()
    alpha = serializers.SerializerMethodField(help_text="Krippendorff's alpha of this worker with the rest "
                                                        "(annotation.aggregation.agreement.worker_alpha)")
    median_seconds = serializers.SerializerMethodField()

    class Meta:
        model = Membership
        fields = ["worker", "name", "provider", "votes", "seconds", "median_seconds", "gold_seen", "gold_correct",
                  "gold_accuracy", "reliability", "alpha", "agreement_with_consensus", "qualified", "qualification_score",
                  "training_done_at", "blocked", "blocked_reason", "joined_at"]
        read_only_fields = fields

    def _stats(self, obj) -> dict:
        return (self.context.get("worker_stats") or {}).get(obj.worker_id, {})

    def get_name(self, obj) -> str:
        return str(obj.worker)

    def get_agreement_with_consensus(self, obj) -> float | None:
        return self._stats(obj).get("agreement_with_consensus")

    def get_median_seconds(self, obj) -> float | None:
        return self._stats(obj).get("median_seconds")

    def get_alpha(self, obj) -> float | None:
        return self._stats(obj).get("alpha")


class BlockSerializer(serializers.Serializer):
    blocked = serializers.BooleanField(default=True)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=300, default="")


class BlockResultSerializer(serializers.Serializer):
    worker = serializers.IntegerField()
    blocked = serializers.BooleanField()
    reason = serializers.CharField(allow_blank=True)
    tasks_reopened = serializers.IntegerField()


class AgreementSerializer(serializers.Serializer):
    computed_at = serializers.CharField(allow_null=True)
    n_votes = serializers.IntegerField(allow_null=True)
    agreement = serializers.JSONField()
    workers = serializers.JSONField()
    label_distribution = serializers.JSONField()
    seed_figures = serializers.JSONField()
