"""The verify-rewrite campaign's "Apply the verdicts to the run" button: the verdicts go onto the run's
decisions through ``annotation.verify_rewrites.verdicts_apply`` (the same as the API and the command)."""
from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from annotation.services import CampaignError
from annotation.verify_rewrites import counts_text, verdicts_apply
from captionlab import roles
from captionlab.roles import role_required

from ._common import campaign as _campaign


@role_required(roles.CURATOR)
@require_POST
def campaign_apply_verdicts(request, pk):
    campaign = _campaign(pk)
    try:
        counts = verdicts_apply(campaign=campaign, user=request.user)
    except CampaignError as error:
        messages.error(request, error.message)
    else:
        run = (campaign.selection or {}).get("run")
        messages.success(request, f"Verdicts applied to run #{run}: {counts_text(counts)}")
    return redirect(campaign)
