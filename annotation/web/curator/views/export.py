"""The CSV export of a campaign's votes or aggregated labels, streamed through the platform's one CSV
writer (captionlab.csv_safe), so no cell runs as a formula in a spreadsheet."""
from __future__ import annotations

import json

from django.http import HttpResponse, StreamingHttpResponse
from django.views.decorators.http import require_GET

from annotation.models import Aggregate, Campaign
from annotation.vote_export import vote_rows
from captionlab import csv_safe, roles
from captionlab.roles import role_required

from ._common import campaign as _campaign


def _cell(value):
    """Votes' values are JSON objects; the writer neutralises text."""
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return value


def _vote_rows(campaign: Campaign):
    """The same rows as ``manage.py campaign export-votes`` (``annotation.vote_export``)."""
    return vote_rows(campaign)


def _aggregate_rows(campaign: Campaign):
    yield ["task_id", "image_id", "caption_id", "caption_text", "part", "method", "label", "confidence", "n_votes",
           "updated_at"]
    aggregates = (Aggregate.objects.filter(task__campaign=campaign).select_related("task__caption")
                  .order_by("task_id", "part", "method"))
    for a in aggregates.iterator(chunk_size=2000):
        yield [a.task_id, a.task.image_id, a.task.caption_id, a.task.caption.text if a.task.caption_id else "",
               a.part, a.method, a.label, a.confidence, a.n_votes, a.updated_at.isoformat()]


@role_required(roles.CURATOR)
@require_GET
def campaign_export(request, pk):
    """CSV of the votes (``?table=votes``, the default) or of the aggregated labels
    (``?table=aggregates``), streamed so a large campaign does not sit in memory."""
    campaign = _campaign(pk)
    table = request.GET.get("table", "votes")
    if table not in ("votes", "aggregates"):
        return HttpResponse("table must be votes or aggregates.", status=400, content_type="text/plain")
    rows = _vote_rows(campaign) if table == "votes" else _aggregate_rows(campaign)
    response = StreamingHttpResponse(csv_safe.stream([_cell(c) for c in row] for row in rows),
                                     content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-{table}.csv"'
    return response


