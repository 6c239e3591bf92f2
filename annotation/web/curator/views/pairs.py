"""A same-meaning campaign's fit: the judged pairs' precision and recall by score threshold, the fitted weights
and threshold, what was left out (ties, single judges), and "Apply to the pipeline" (``annotation.same_meaning``,
the same as the API and ``manage.py campaign fit-pairs``)."""
from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotation.same_meaning import KIND, fit_chart, pairs_apply, pairs_fit
from annotation.services import CampaignError
from captionlab import roles
from captionlab.roles import role_required

from ._common import campaign as _campaign


@role_required(roles.CURATOR)
@require_http_methods(["GET", "POST"])
def campaign_pairs_fit(request, pk):
    campaign = _campaign(pk)
    if campaign.kind != KIND:
        raise Http404("Only a same-meaning campaign has pairs to fit.")
    if request.method == "POST":
        try:
            applied = pairs_apply(campaign=campaign, drop=request.POST.get("drop") == "on", user=request.user)
        except CampaignError as error:
            messages.error(request, error.message)
        else:
            p = applied["params"]
            messages.success(request, f"Step {applied['step']} of the run's pipeline now calls a pair the same "
                                      f"meaning at score {p['threshold']:.3f}"
                                      + (f" and drops at {p['drop_at']:.3f}." if p.get("drop_at") is not None else
                                         "; clusters stay for review."))
        return redirect(reverse("campaign-pairs-fit", args=[campaign.pk]))
    fit = pairs_fit(campaign)
    context = {"campaign": campaign, "fit": fit, "summary": fit.as_dict(), "chart": fit_chart(fit),
               "pairs": fit.judged.used[:200]}
    return render(request, "annotation/campaigns/pairs_fit.html", context)
