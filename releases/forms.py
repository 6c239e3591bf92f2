"""The release create form: a page's fields turned into a release config, and a service error's
field name turned back into the form field that shows it."""
from __future__ import annotations

from django import forms

from annotation.models import Campaign
from curation.models import Caption, Collection, FilterRun

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
                                        help_text="None ticked: every origin but model-generated and caption seeds. "
                                                  "Caption seeds: the short captions a run's caption_seeds step "
                                                  "found in the descriptions it kept (tick Museum description "
                                                  "too to ship both).")
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
