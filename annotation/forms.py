"""Curator forms of the campaign pages. They parse and type the input only; the rules (ranges,
a score range needing a run, an empty selection) live in ``annotation.services`` so the API and
the commands get the same answers. A ``CampaignError`` from there is put back on its field."""
from __future__ import annotations

from django import forms

from curation.models import Caption, Collection, FilterRun

from . import services
from .kinds import KIND_CHOICES, KINDS
from .models import Campaign, Task

OUTCOME_CHOICES = [("", "Every item the run decided on"), ("keep", "Kept items"), ("drop", "Dropped items")]
SELECTION_FIELDS = ("collection", "run", "step", "outcome", "reason", "score_min", "score_max", "origin", "sample",
                    "seed")


class KindSelect(forms.RadioSelect):
    """Radio buttons that carry each kind's description (rendered by the create template)."""


def _cents(amount) -> int | None:
    """A currency amount of the form (Decimal, 2 places) in cents; None stays None."""
    return None if amount is None else int(amount * 100)


class CrowdForm(forms.Form):
    """The curator's crowd controls: provider, reward, budget, places, provider settings and review
    rules. The fields only parse; ``annotation.providers.controls`` validates (same rules as the
    API and the command) and its ``CampaignError`` goes back next to the field."""

    CONTROL_FIELD_NAMES = {"backend": "backend", "reward_cents": "reward", "budget_cents": "budget",
                           "places": "places", "provider_config": "provider_config"}  # review: above the form

    backend = forms.ChoiceField(label="Crowd provider", initial=Campaign.Backend.INHOUSE, required=False,
                                error_messages={"invalid_choice": "Unknown crowd provider %(value)s: choose in-house, "
                                                                  "link-out or Mechanical Turk."})
    reward = forms.DecimalField(required=False, max_digits=12, decimal_places=2, label="Reward per assignment",
                                help_text="In the marketplace's currency, e.g. 0.50 (link-out: per participant). "
                                          "In-house work is unpaid.")
    budget = forms.DecimalField(required=False, max_digits=12, decimal_places=2, label="Budget",
                                help_text="Rewards, bonuses and the marketplace's fees together never exceed it.")
    places = forms.IntegerField(required=False, label="Places (link-out participants)",
                                help_text="How many participants are admitted; the next one is turned away.")
    provider_config = forms.CharField(required=False, label="Provider settings (JSON)",
                                      widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
                                      help_text='A JSON object, e.g. {"tasks_per_assignment": 10, "completion_code": '
                                                '"C0DE1234", "completion_url": "https://..."}. Keys: see the docs.')
    auto_approve = forms.BooleanField(required=False, initial=True, label="Approve submitted work automatically "
                                                                          "when it passes the rules below")
    min_gold_accuracy = forms.FloatField(required=False, label="Reject an assignment below this gold accuracy",
                                         help_text="A share from 0 to 1; empty: no such rule.")
    block_below_gold_accuracy = forms.FloatField(required=False, label="Block workers below this gold accuracy",
                                                 help_text="Every provider, in-house too. A share from 0 to 1; "
                                                           "empty: nobody is blocked automatically.")
    block_min_gold = forms.IntegerField(required=False, initial=3, label="… once they answered this many gold items")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from .providers.controls import PROVIDER_HELP, provider_choices

        self.fields["backend"].choices = provider_choices()
        self.fields["backend"].help_text = PROVIDER_HELP

    def clean_provider_config(self):
        import json

        text = (self.cleaned_data.get("provider_config") or "").strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"The provider settings are not valid JSON ({exc}).") from None
        if not isinstance(value, dict):
            raise forms.ValidationError('The provider settings must be a JSON object, e.g. {"tasks_per_assignment": '
                                        '10}.')
        return value

    def controls(self) -> dict:
        """The values for ``controls.clean_controls`` / ``create_campaign`` / ``update_controls``."""
        data = self.cleaned_data
        review = {"auto_approve": bool(data.get("auto_approve"))}
        for name in ("min_gold_accuracy", "block_below_gold_accuracy", "block_min_gold"):
            review[name] = data.get(name)  # None removes the rule
        return {"backend": data.get("backend") or Campaign.Backend.INHOUSE,
                "reward_cents": _cents(data.get("reward")) if data.get("reward") is not None else 0,
                "budget_cents": _cents(data.get("budget")) if data.get("budget") is not None else 0,
                "places": data.get("places") or 0, "provider_config": data.get("provider_config") or {},
                "review": review}

    def add_control_error(self, error) -> None:
        """Put a ``CampaignError`` of the controls next to the form field it is about."""
        field = self.CONTROL_FIELD_NAMES.get(error.field or "", error.field)
        self.add_error(field if field in self.fields else None, error.message)

    @classmethod
    def initial_for(cls, campaign: Campaign) -> dict:
        import json

        from .providers.controls import SYSTEM_KEYS

        config = dict(campaign.provider_config or {})
        review = dict(config.pop("review", None) or {})
        places = config.pop("places", None)
        shown = {k: v for k, v in config.items() if k not in SYSTEM_KEYS}
        return {"backend": campaign.backend, "reward": f"{campaign.reward_cents / 100:.2f}",
                "budget": f"{campaign.budget_cents / 100:.2f}", "places": places,
                "provider_config": json.dumps(shown, indent=1, ensure_ascii=False) if shown else "",
                "auto_approve": not (review.get("manual") or review.get("auto_approve") is False),
                "min_gold_accuracy": review.get("min_gold_accuracy"),
                "block_below_gold_accuracy": review.get("block_below_gold_accuracy"),
                "block_min_gold": review.get("block_min_gold", 3)}


class CampaignForm(CrowdForm):
    name = forms.CharField(max_length=200, widget=forms.TextInput(attrs={"autocomplete": "off"}),
                           error_messages={"required": "A campaign needs a name."})
    kind = forms.ChoiceField(choices=KIND_CHOICES, widget=KindSelect,
                             error_messages={"invalid_choice": "Unknown campaign kind %(value)s: choose one of the "
                                                               "kinds listed."})
    start = forms.BooleanField(required=False, label="Start right away (otherwise the campaign stays a draft)")
    # The selection.
    collection = forms.ModelChoiceField(queryset=Collection.objects.order_by("name"), empty_label="Choose a collection",
                                        error_messages={"required": "Choose a collection.",
                                                        "invalid_choice": "Choose an existing collection."})
    run = forms.ModelChoiceField(queryset=FilterRun.objects.select_related("pipeline", "collection")
                                 .order_by("-created_at"), required=False, empty_label="No filter run",
                                 label="Filter run", help_text="Its decisions select the captions.",
                                 error_messages={"invalid_choice": "Choose an existing filter run."})
    step = forms.IntegerField(required=False, min_value=0, label="Step of the run",
                              help_text="Needed for kept / dropped by one filter and for a score range.")
    outcome = forms.ChoiceField(choices=OUTCOME_CHOICES, required=False, label="Items")
    reason = forms.CharField(required=False, max_length=60, label="Decision reason",
                             help_text="Only the step's decisions with this reason, e.g. uncertain_rewrite "
                                       "(needs a run and a step).")
    score_min = forms.FloatField(required=False, label="Score from")
    score_max = forms.FloatField(required=False, label="Score to")
    origin = forms.ChoiceField(choices=[("", "Any origin")] + list(Caption.Origin.choices), required=False,
                               label="Caption origin")
    sample = forms.IntegerField(required=False, label="Random sample size", help_text="Empty: every selected item.")
    seed = forms.IntegerField(required=False, initial=0, label="Sample seed")
    # The settings.
    instructions = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 8}),
                                   help_text="Markdown. Raw HTML is not rendered.")
    annotator_question = forms.CharField(required=False, max_length=300, label="Question for annotators",
                                         help_text="Shown with every item, e.g. “Is this a good caption for the "
                                                   "image?”. Empty: the kind's own question.")
    votes_per_item = forms.IntegerField(required=False, label="Votes per item",
                                        help_text="Empty: the kind's default.")
    dynamic_overlap = forms.BooleanField(required=False, label="Dynamic overlap: stop early on agreement, ask "
                                                               "for more votes on disagreement")
    max_votes_per_item = forms.IntegerField(required=False, initial=5, label="Maximum votes per item")
    confidence_threshold = forms.FloatField(required=False, initial=0.8, label="Confidence threshold")
    gold_rate = forms.FloatField(required=False, initial=0.0, label="Gold rate",
                                 help_text="Share of served tasks that are gold items (0 to 0.5).")
    reservation_seconds = forms.IntegerField(required=False, initial=600, label="Reservation timeout (seconds)")
    edit_window_seconds = forms.IntegerField(required=False, initial=120, min_value=0,
                                             label="Edit window (seconds)")
    priority = forms.ChoiceField(choices=Campaign.Priority.choices, initial=Campaign.Priority.ORDER)
    qualification_pass_mark = forms.FloatField(required=False, label="Qualification pass mark",
                                               help_text="Share of qualification items to get right (0 to 1); "
                                                         "empty: no qualification test.")
    text_min_chars = forms.IntegerField(required=False, initial=10, min_value=0, label="Caption length from (chars)")
    text_max_chars = forms.IntegerField(required=False, initial=300, label="Caption length to (chars)")
    rate_campaign = forms.ModelChoiceField(queryset=Campaign.objects.order_by("name"), required=False,
                                           empty_label="None", label="Send written captions to",
                                           help_text="A rating campaign that gets each written caption as a task.")
    members = forms.ModelMultipleChoiceField(queryset=services.eligible_annotators(), required=False,
                                             widget=forms.SelectMultiple(attrs={"size": 6}),
                                             help_text="Annotators who may work on the campaign.")
    open_to_all = forms.BooleanField(required=False, label="Open to every annotator")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["members"].queryset = services.eligible_annotators()  # fresh per request
        self.fields["rate_campaign"].queryset = Campaign.objects.filter(
            kind__in=[k for k, spec in KINDS.items() if spec.target == "caption" and k != "verify_rewrite"]
        ).order_by("name")

    def clean_name(self):
        name = (self.cleaned_data.get("name") or "").strip()
        if not name:
            raise forms.ValidationError("A campaign needs a name.")
        return name

    def clean(self):
        data = super().clean()
        run, step = data.get("run"), data.get("step")
        if run is not None and step is not None and step >= len(run.snapshot or []):
            self.add_error("step", f"Run #{run.pk} has {len(run.snapshot or [])} steps; choose one of them.")
        if step is not None and run is None:
            self.add_error("run", "A step needs a filter run.")
        if (data.get("reason") or "").strip() and (run is None or step is None):
            self.add_error("reason", "Selecting decisions by reason needs a filter run and a step.")
        return data

    def selection(self) -> dict:
        data = self.cleaned_data
        selection = {
            "collection": data["collection"].pk if data.get("collection") else None,
            "run": data["run"].pk if data.get("run") else None,
            "step": data.get("step"),
            "outcome": data.get("outcome") or "",
            "reason": (data.get("reason") or "").strip(),
            "score_min": data.get("score_min"),
            "score_max": data.get("score_max"),
            "origin": data.get("origin") or "",
            "sample": data.get("sample"),
            "seed": data.get("seed") or 0,
        }
        return {k: v for k, v in selection.items() if v not in (None, "")} | {"collection": selection["collection"]}

    def settings(self) -> dict:
        """The campaign settings for ``services.campaign_create``: empty fields keep the defaults."""
        data = self.cleaned_data
        names = ("instructions", "annotator_question", "votes_per_item", "dynamic_overlap", "max_votes_per_item",
                 "confidence_threshold",
                 "gold_rate", "reservation_seconds", "edit_window_seconds", "priority", "qualification_pass_mark",
                 "text_min_chars", "text_max_chars", "rate_campaign", "open_to_all")
        return {name: data.get(name) for name in names if data.get(name) not in (None, "")}

    @staticmethod
    def kinds():
        """(value, label, description, seed) for the kind radio buttons."""
        return [(k.name, k.label, k.description, k.seed) for k in KINDS.values()]

    @staticmethod
    def run_steps():
        """For the step select: each recent run with its snapshot's steps."""
        runs = FilterRun.objects.select_related("pipeline", "collection").order_by("-created_at")[:50]
        return [(run, [(i, step.get("filter", "?")) for i, step in enumerate(run.snapshot or [])]) for run in runs]


PREFILL_FIELDS = ("kind", "collection", "run", "step", "outcome", "reason", "name")


def prefill(query) -> dict:
    """The create form's initial values from a link's query (the step page's "Verify N uncertain rewrites")."""
    return {name: query.get(name) for name in PREFILL_FIELDS if query.get(name)}


class MembersForm(forms.Form):
    members = forms.ModelMultipleChoiceField(queryset=services.eligible_annotators(), required=True,
                                             widget=forms.CheckboxSelectMultiple,
                                             error_messages={"required": "Choose at least one annotator."})

    def __init__(self, *args, campaign=None, **kwargs):
        super().__init__(*args, **kwargs)
        qs = services.eligible_annotators()
        if campaign is not None:
            qs = qs.exclude(worker__memberships__campaign=campaign)
        self.fields["members"].queryset = qs


GOLD_ROLES = [(Task.Role.GOLD, "Gold item"), (Task.Role.TRAINING, "Training example"),
              (Task.Role.QUALIFICATION, "Qualification item")]


class GoldForm(forms.Form):
    """One task's expected answer. The value's shape depends on the kind: a choice, a score, a
    text, or (candidate kinds) a JSON object of ratings; the kind validates it in ``set_gold``."""

    task = forms.IntegerField()
    role = forms.ChoiceField(choices=GOLD_ROLES, error_messages={"invalid_choice": "Role must be gold, training or "
                                                                                   "qualification."})
    value = forms.CharField(required=False, max_length=10_000)
    feedback = forms.CharField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))
    tolerance = forms.FloatField(required=False, min_value=0)


class BlockForm(forms.Form):
    worker = forms.IntegerField()
    action = forms.ChoiceField(choices=[("block", "Block"), ("unblock", "Unblock")])
    reason = forms.CharField(required=False, max_length=300)


__all__ = ["CampaignForm", "CrowdForm", "MembersForm", "GoldForm", "BlockForm", "SELECTION_FIELDS", "GOLD_ROLES"]
