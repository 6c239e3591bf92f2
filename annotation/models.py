"""The crowd: campaigns, tasks, workers, assignments, votes, gold answers and aggregates.

One model serves every backend: an in-house annotator, a link-out marketplace worker and a
Mechanical Turk worker are all ``Worker`` rows; their votes are ``Vote`` rows unique per
(task, worker). Routing keeps two counters on the task row (``votes_count`` and
``reserved_count``) that are only ever changed while that row is locked, which is what makes
"exactly the required number of votes" hold under concurrency (see ``annotation.routing``).
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse

from curation.models import Caption, Collection, FilterRun, Image


class Campaign(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        RUNNING = "running", "Running"
        PAUSED = "paused", "Paused"
        FINISHED = "finished", "Finished"

    class Backend(models.TextChoices):
        INHOUSE = "inhouse", "In-house annotators"
        LINKOUT = "linkout", "Link-out marketplace"
        MTURK = "mturk", "Amazon Mechanical Turk"

    class Priority(models.TextChoices):
        ORDER = "order", "In selection order"
        RANDOM = "random", "Random"
        UNCERTAIN = "uncertain", "Model score nearest 0.5 first"
        ENTROPY = "entropy", "Highest vote entropy first"

    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=32, help_text="a kind from annotation.kinds")
    collection = models.ForeignKey(Collection, on_delete=models.PROTECT, related_name="campaigns")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    backend = models.CharField(max_length=10, choices=Backend.choices, default=Backend.INHOUSE)
    instructions = models.TextField(blank=True, help_text="Markdown; rendered without raw HTML")
    annotator_question = models.CharField(
        max_length=300, blank=True,
        help_text="the question annotators read on each item; empty: the kind's own question")
    selection = models.JSONField(default=dict, blank=True, help_text="how the tasks were drawn")
    votes_per_item = models.PositiveSmallIntegerField(default=3)
    dynamic_overlap = models.BooleanField(default=False)
    max_votes_per_item = models.PositiveSmallIntegerField(default=5)
    confidence_threshold = models.FloatField(default=0.8)
    gold_rate = models.FloatField(default=0.0, help_text="share of served tasks that are gold items")
    reservation_seconds = models.PositiveIntegerField(default=600)
    edit_window_seconds = models.PositiveIntegerField(default=120)
    priority = models.CharField(max_length=10, choices=Priority.choices, default=Priority.ORDER)
    qualification_pass_mark = models.FloatField(null=True, blank=True,
                                                help_text="share of qualification items to get right")
    open_to_all = models.BooleanField(default=False, help_text="every annotator may join")
    text_min_chars = models.PositiveIntegerField(default=10)
    text_max_chars = models.PositiveIntegerField(default=300)
    text_language = models.CharField(max_length=16, default="en")
    rate_campaign = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="fed_by", help_text="written captions are sent here")
    reward_cents = models.PositiveIntegerField(default=0)
    budget_cents = models.PositiveIntegerField(default=0)
    provider_config = models.JSONField(default=dict, blank=True,
                                       help_text="the crowd provider's settings (HIT layout, qualifications, "
                                                 "completion code, fee rate...)")
    public_token = models.CharField(max_length=64, null=True, blank=True, unique=True,
                                    help_text="secret slug of the public start URL of an external campaign")
    stats = models.JSONField(default=dict, blank=True, help_text="latest aggregation and agreement figures")
    stats_updated_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("campaign-detail", args=[self.pk])

    @property
    def kind_spec(self):
        from .kinds import get_kind

        return get_kind(self.kind)

    @property
    def question(self) -> str:
        """What the work page asks the annotator: this campaign's wording, or the kind's question
        (never the kind's description, which is written for curators)."""
        return self.annotator_question.strip() or self.kind_spec.question


class Worker(models.Model):
    """Somebody who votes: an in-house user, or a marketplace / MTurk worker id."""

    class Provider(models.TextChoices):
        INHOUSE = "inhouse", "In-house"
        LINKOUT = "linkout", "Link-out marketplace"
        MTURK = "mturk", "Mechanical Turk"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="worker")
    provider = models.CharField(max_length=10, choices=Provider.choices, default=Provider.INHOUSE)
    external_id = models.CharField(max_length=100, blank=True)
    blocked = models.BooleanField(default=False, help_text="blocked from every campaign")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(fields=["provider", "external_id"], condition=~Q(external_id=""),
                                    name="worker_unique_external_id"),
        ]

    def __str__(self):
        if self.user_id:
            return self.user.get_username()
        return f"{self.provider}:{self.external_id}"


class Membership(models.Model):
    """A worker in a campaign: training, qualification, block state and quality figures."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="memberships")
    worker = models.ForeignKey(Worker, on_delete=models.CASCADE, related_name="memberships")
    training_done_at = models.DateTimeField(null=True, blank=True)
    qualification_score = models.FloatField(null=True, blank=True)
    qualified = models.BooleanField(null=True, help_text="None until the qualification test is taken")
    blocked = models.BooleanField(default=False)
    blocked_reason = models.CharField(max_length=300, blank=True)
    gold_seen = models.PositiveIntegerField(default=0)
    gold_correct = models.PositiveIntegerField(default=0)
    reliability = models.FloatField(null=True, blank=True, help_text="from Dawid-Skene")
    votes = models.PositiveIntegerField(default=0)
    seconds = models.FloatField(default=0.0)
    assignment = models.ForeignKey("Assignment", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+", help_text="the worker's current assignment")
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["campaign", "worker"]
        constraints = [models.UniqueConstraint(fields=["campaign", "worker"], name="membership_unique")]

    @property
    def gold_accuracy(self) -> float | None:
        return self.gold_correct / self.gold_seen if self.gold_seen else None


class Task(models.Model):
    class Role(models.TextChoices):
        REAL = "real", "Item"
        GOLD = "gold", "Gold item"
        TRAINING = "training", "Training example"
        QUALIFICATION = "qualification", "Qualification item"

    class Status(models.TextChoices):
        OPEN = "open", "Needs votes"
        DONE = "done", "Done"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="tasks", db_index=False)
    role = models.CharField(max_length=14, choices=Role.choices, default=Role.REAL)
    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="+")
    caption = models.ForeignKey(Caption, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    candidates = models.JSONField(default=list, blank=True, help_text="caption ids shown together")
    status = models.CharField(max_length=5, choices=Status.choices, default=Status.OPEN)
    votes_required = models.PositiveSmallIntegerField(default=3)
    votes_count = models.PositiveSmallIntegerField(default=0)
    reserved_count = models.PositiveSmallIntegerField(default=0)
    priority = models.FloatField(default=0.0, help_text="lower is served first")
    model_score = models.FloatField(null=True, blank=True)
    source_decision = models.BigIntegerField(null=True, blank=True, help_text="FilterDecision this came from")
    position = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["campaign", "position", "pk"]
        indexes = [models.Index(fields=["campaign", "role", "status", "priority", "id"], name="task_routing")]

    def __str__(self):
        return f"task {self.pk} of {self.campaign_id}"


class GoldAnswer(models.Model):
    """The expected answer of a gold, training or qualification task; never shown to annotators
    before they answer."""

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="gold")
    value = models.JSONField()
    feedback = models.TextField(blank=True, help_text="shown after a training answer")
    tolerance = models.FloatField(default=0.0, help_text="for sliders: how far from the value still counts")


class Assignment(models.Model):
    """A worker's session on a campaign (an in-house session, or an MTurk HIT assignment)."""

    class State(models.TextChoices):
        ACTIVE = "active", "Active"
        SUBMITTED = "submitted", "Submitted"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        EXPIRED = "expired", "Expired"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="assignments")
    worker = models.ForeignKey(Worker, on_delete=models.CASCADE, related_name="assignments")
    state = models.CharField(max_length=10, choices=State.choices, default=State.ACTIVE)
    provider_assignment_id = models.CharField(max_length=100, blank=True)
    provider_job_id = models.CharField(max_length=100, blank=True)
    job = models.ForeignKey("ProviderJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="assignments")
    confirmed = models.BooleanField(default=True, help_text="False while the provider has not confirmed this "
                                                            "assignment: its votes stay quarantined")
    session_key = models.CharField(max_length=64, blank=True, help_text="browser session that worked it")
    completion_code = models.CharField(max_length=64, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    feedback = models.TextField(blank=True, help_text="the requester's feedback sent with approve/reject")
    tasks_done = models.PositiveIntegerField(default=0)
    seconds = models.FloatField(default=0.0)
    started_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["campaign", "worker", "state"])]


class Reservation(models.Model):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="reservations")
    worker = models.ForeignKey(Worker, on_delete=models.CASCADE, related_name="reservations", db_index=False)
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+", db_index=False)
    assignment = models.ForeignKey(Assignment, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "worker"], name="reservation_unique")]
        indexes = [models.Index(fields=["worker", "campaign"]), models.Index(fields=["campaign", "expires_at"])]


class Vote(models.Model):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="votes", db_index=False)
    worker = models.ForeignKey(Worker, on_delete=models.CASCADE, related_name="votes")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="votes", db_index=False)
    assignment = models.ForeignKey(Assignment, null=True, blank=True, on_delete=models.SET_NULL, related_name="votes")
    role = models.CharField(max_length=14, choices=Task.Role.choices, default=Task.Role.REAL)
    value = models.JSONField()
    correct = models.BooleanField(null=True, blank=True, help_text="for gold, training and qualification")
    seconds = models.FloatField(default=0.0, help_text="time taken, as the client measured it")
    caption = models.ForeignKey(Caption, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                help_text="the caption a writing vote created")
    quarantined = models.BooleanField(default=False, help_text="not counted, aggregated or paid until the "
                                                               "provider confirms its assignment")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pk"]
        constraints = [models.UniqueConstraint(fields=["task", "worker"], name="vote_unique_task_worker")]
        indexes = [models.Index(fields=["campaign", "role", "created_at"]),
                   models.Index(fields=["worker", "campaign", "created_at"])]


class VoteEdit(models.Model):
    """Audit trail: a vote changed within the campaign's edit window."""

    vote = models.ForeignKey(Vote, on_delete=models.CASCADE, related_name="edits")
    old_value = models.JSONField()
    new_value = models.JSONField()
    edited_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["edited_at"]


class Aggregate(models.Model):
    """A consensus label of one task (or one part of it: a candidate caption and a dimension)."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="aggregates")
    part = models.CharField(max_length=60, blank=True, help_text='"" or "<caption id>:<dimension>"')
    method = models.CharField(max_length=30)
    label = models.JSONField(null=True)
    confidence = models.FloatField(null=True, blank=True)
    n_votes = models.PositiveSmallIntegerField(default=0)
    details = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["task", "part", "method"]
        constraints = [models.UniqueConstraint(fields=["task", "part", "method"], name="aggregate_unique")]


class ProviderJob(models.Model):
    """A provider's unit of published work: an MTurk HIT, a link-out study."""

    class Status(models.TextChoices):
        PENDING = "pending", "Being published"
        PUBLISHED = "published", "Published"
        PAUSED = "paused", "Paused"
        FINISHED = "finished", "Finished"
        EXPIRED = "expired", "Expired"
        FAILED = "failed", "Failed"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="provider_jobs")
    provider = models.CharField(max_length=20)
    external_id = models.CharField(max_length=100, blank=True, help_text="HIT id, study id")
    group_id = models.CharField(max_length=100, blank=True, help_text="HIT type / group id")
    unique_token = models.CharField(max_length=64, unique=True, help_text="UniqueRequestToken: a retry never "
                                                                          "publishes twice")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    task_ids = models.JSONField(default=list, blank=True, help_text="tasks this job serves")
    reward_cents = models.PositiveIntegerField(default=0)
    max_assignments = models.PositiveIntegerField(default=1)
    lifetime_seconds = models.PositiveIntegerField(default=0)
    duration_seconds = models.PositiveIntegerField(default=0)
    sync_state = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_synced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["campaign", "pk"]
        constraints = [models.UniqueConstraint(fields=["provider", "external_id"], condition=~Q(external_id=""),
                                               name="provider_job_unique_external_id")]


class LedgerEntry(models.Model):
    """Money: what a campaign committed and paid, each payment once (its token is unique)."""

    class Kind(models.TextChoices):
        REWARD = "reward", "Reward"
        BONUS = "bonus", "Bonus"
        FEE = "fee", "Provider fee"
        REFUND = "refund", "Refund / released commitment"

    class State(models.TextChoices):
        COMMITTED = "committed", "Committed"
        PAID = "paid", "Paid"
        CANCELLED = "cancelled", "Cancelled"
        FAILED = "failed", "Failed"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="ledger")
    provider = models.CharField(max_length=20)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    state = models.CharField(max_length=10, choices=State.choices, default=State.COMMITTED)
    amount_cents = models.IntegerField()
    token = models.CharField(max_length=64, unique=True, help_text="idempotency token")
    job = models.ForeignKey(ProviderJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="ledger")
    assignment = models.ForeignKey(Assignment, null=True, blank=True, on_delete=models.SET_NULL, related_name="ledger")
    worker = models.ForeignKey(Worker, null=True, blank=True, on_delete=models.SET_NULL, related_name="ledger")
    note = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    paid_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["campaign", "created_at"]
        indexes = [models.Index(fields=["campaign", "kind", "state"])]


__all__ = ["ProviderJob", "LedgerEntry", "Campaign", "Worker", "Membership", "Task", "GoldAnswer", "Assignment", "Reservation", "Vote",
           "VoteEdit", "Aggregate", "FilterRun"]
