"""Forms of the curator pages. They parse and validate input; the writes live in services."""
from django import forms

from .models import Caption, Collection, ImportJob

DEFAULT_SIDECAR = "captions.csv"


class CollectionForm(forms.ModelForm):
    class Meta:
        model = Collection
        fields = ["name", "description", "source_kind", "language"]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}

    def validate_unique(self):
        # Uniqueness of the name is the service's rule (services.collection_create), reported there.
        pass

    def service_fields(self) -> dict:
        """Keyword arguments for services.collection_create, the name excepted."""
        data = self.cleaned_data
        return {key: data[key] for key in ("description", "source_kind", "language")}


class ImportForm(forms.Form):
    """An upload into an existing collection or a new one, with options that depend on the kind.

    The options fieldsets carry the kind they apply to; the stylesheet hides the others when the
    browser can, and the server ignores them anyway.
    """

    collection = forms.ModelChoiceField(
        queryset=Collection.objects.order_by("name"),
        required=False,
        empty_label="— a new collection —",
        help_text="Add to an existing collection, or leave this on “a new collection” and name it below.",
    )
    new_collection = forms.CharField(
        label="New collection name", max_length=200, required=False, strip=True
    )
    kind = forms.ChoiceField(label="What the file holds", choices=ImportJob.Kind.choices,
                             initial=ImportJob.Kind.IMAGES)
    file = forms.FileField(
        help_text="Images: a .zip (optionally with a CSV of captions). TSV: caption TAB URL per line. "
        "COCO: captions .json. Comments: image id TAB comment per line."
    )
    download_images = forms.BooleanField(
        label="Download the images", required=False, initial=True,
        help_text="Fetch each URL with a Celery task; off: record the URLs only.",
    )
    sidecar = forms.CharField(
        label="Captions CSV inside the zip", max_length=200, required=False, initial=DEFAULT_SIDECAR,
        help_text="Columns: file name, caption. Leave as is if the zip has none.",
    )
    unknown_images = forms.ChoiceField(
        label="Comments on image ids the collection does not have",
        choices=[("placeholder", "Create a placeholder image (its photo can be imported later)"),
                 ("skip", "Skip the line and report it")],
        initial="placeholder", required=False,
        help_text="Either way each unknown id is listed in the import report with its line.",
    )
    origin = forms.ChoiceField(
        label="Origin of the captions",
        choices=[("", "Default for this kind of file")] + list(Caption.Origin.choices),
        required=False,
    )

    def clean(self):
        data = super().clean()
        collection, new_name = data.get("collection"), data.get("new_collection")
        if collection and new_name:
            raise forms.ValidationError(
                "Choose an existing collection or name a new one, not both."
            )
        if not collection and not new_name and "collection" not in self.errors:
            self.add_error("new_collection", "Name the new collection, or choose an existing one above.")
        return data

    def options(self) -> dict:
        """The ImportJob.options of this upload: only those that apply to its kind."""
        data = self.cleaned_data
        kind = data["kind"]
        options = {}
        if kind == ImportJob.Kind.TSV:
            options["download"] = bool(data.get("download_images"))
        if kind == ImportJob.Kind.IMAGES:
            options["sidecar"] = (data.get("sidecar") or "").strip() or DEFAULT_SIDECAR
        if kind == ImportJob.Kind.COMMENTS:
            options["unknown_images"] = data.get("unknown_images") or "placeholder"
        if data.get("origin"):
            options["origin"] = data["origin"]
        return options
