"""What every campaign page shares: the campaign a URL names, loaded with what the pages show."""
from __future__ import annotations

from django.shortcuts import get_object_or_404

from annotation.models import Campaign


def campaign(pk) -> Campaign:
    return get_object_or_404(Campaign.objects.select_related("collection", "rate_campaign"), pk=pk)
