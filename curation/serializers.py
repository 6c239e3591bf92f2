import json

from django.urls import reverse
from rest_framework import serializers

from .models import Caption, Collection, Image, ImportIssue, ImportJob


class CollectionSerializer(serializers.ModelSerializer):
    image_count = serializers.IntegerField(read_only=True)
    caption_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Collection
        fields = ["id", "name", "description", "source_kind", "language", "created_at", "image_count", "caption_count"]
        read_only_fields = ["created_at"]


class ImageSerializer(serializers.ModelSerializer):
    file_url = serializers.SerializerMethodField()
    thumbnail_url = serializers.SerializerMethodField()
    caption_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Image
        fields = [
            "id", "collection", "status", "sha256", "width", "height", "format", "file_size", "source_url",
            "external_id", "metadata", "license", "credit", "error", "import_job", "created_at",
            "file_url", "thumbnail_url", "caption_count", "topics",
        ]
        read_only_fields = fields

    topics = serializers.SerializerMethodField()

    def get_topics(self, obj) -> list[dict]:
        """The image's LDA topic labels (seed 000, Section 4), newest model first: the three most probable
        topics with their words; a single image (not a list) also gets the whole distribution."""
        from .pipeline.topics import image_topics

        view = self.context.get("view")
        return image_topics(obj, distribution=getattr(view, "action", None) == "retrieve")

    def _url(self, obj, name, field):
        if not getattr(obj, field):
            return None
        request = self.context.get("request")
        url = reverse(name, args=[obj.pk])
        return request.build_absolute_uri(url) if request else url

    def get_file_url(self, obj) -> str | None:
        return self._url(obj, "image-file", "file")

    def get_thumbnail_url(self, obj) -> str | None:
        return self._url(obj, "image-thumbnail", "thumbnail")


class CaptionSerializer(serializers.ModelSerializer):
    lineage = serializers.SerializerMethodField()

    class Meta:
        model = Caption
        fields = [
            "id", "image", "text", "language", "origin", "parent", "source", "import_job", "import_line",
            "external_id", "metadata", "created_at", "lineage",
        ]
        read_only_fields = ["source", "import_job", "import_line", "created_at", "lineage"]

    def get_lineage(self, obj) -> list[int]:
        """Ids from this caption back to its raw text."""
        return [c.pk for c in obj.lineage()]

    def validate(self, attrs):
        parent = attrs.get("parent")
        if parent is not None and parent.image_id != attrs["image"].pk:
            raise serializers.ValidationError({"parent": "The parent caption belongs to another image."})
        return attrs


class ImportIssueSerializer(serializers.ModelSerializer):
    class Meta:
        model = ImportIssue
        fields = ["line", "item", "code", "message", "severity"]


class ImportJobSerializer(serializers.ModelSerializer):
    percent = serializers.IntegerField(read_only=True)
    issue_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = ImportJob
        fields = [
            "id", "collection", "kind", "status", "source_name", "options", "created_at", "started_at",
            "finished_at", "percent", "rows_total", "rows_read", "rows_imported", "rows_skipped",
            "rows_duplicate", "images_created", "captions_created", "downloads_total", "downloads_done",
            "downloads_failed", "error", "issue_count",
        ]
        read_only_fields = fields


class ImportCreateSerializer(serializers.Serializer):
    collection = serializers.PrimaryKeyRelatedField(queryset=Collection.objects.all())
    kind = serializers.ChoiceField(choices=ImportJob.Kind.choices)
    file = serializers.FileField()
    options = serializers.CharField(required=False, allow_blank=True,
                                    help_text='JSON object, e.g. {"download": false, "origin": "alt_text"}')

    ALLOWED_OPTIONS = {"download", "origin", "language", "sidecar"}

    def validate_options(self, value):
        if not value:
            return {}
        try:
            options = json.loads(value)
        except json.JSONDecodeError as exc:
            raise serializers.ValidationError(f"not valid JSON: {exc}") from None
        if not isinstance(options, dict):
            raise serializers.ValidationError("options must be a JSON object")
        unknown = set(options) - self.ALLOWED_OPTIONS
        if unknown:
            raise serializers.ValidationError(
                f"unknown option(s) {sorted(unknown)}; allowed: {sorted(self.ALLOWED_OPTIONS)}"
            )
        if "origin" in options and options["origin"] not in Caption.Origin.values:
            raise serializers.ValidationError(f"origin must be one of {Caption.Origin.values}")
        return options
