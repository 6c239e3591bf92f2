"""The campaign's results page (one row per item, filtered and paginated) and its downloads as CSV,
JSON and Parquet with the same filters: both read ``annotation.results``, as the API and
``manage.py campaign_results`` do."""
from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation import results
from captionlab import roles
from captionlab.roles import role_required

from ._common import campaign as _campaign

RESULTS_PER_PAGE = 50


def _query(request) -> str:
    """The filters of the current request as a query string, for the pagination and downloads."""
    params = request.GET.copy()
    params.pop("page", None)
    return params.urlencode()


@role_required(roles.CURATOR)
@require_GET
def campaign_results(request, pk):
    campaign = _campaign(pk)
    error, field = "", ""
    try:
        filters = results.parse_filters(request.GET)
        method, page, n_rows = results.results_page(campaign, method=request.GET.get("method") or None,
                                                    filters=filters, page=request.GET.get("page"),
                                                    per_page=RESULTS_PER_PAGE)
    except results.ResultsError as exc:  # the form again, with the reason next to the field
        error, field = exc.message, exc.field
        method, n_rows = results.resolve_method(campaign, None), 0
        page = Paginator([], RESULTS_PER_PAGE).get_page(1)
    context = {
        "campaign": campaign, "page": page, "method": method, "methods": results.methods_of(campaign),
        "values": request.GET, "error": error, "error_field": field, "n_rows": n_rows, "query": _query(request),
        "write": campaign.kind_spec.written, "formats": list(results.FORMATS),
        "tie_break": results.tie_break_text(campaign),
    }
    return render(request, "annotation/campaigns/results.html", context, status=400 if error else 200)


@role_required(roles.CURATOR)
@require_GET
def campaign_results_export(request, pk, fmt):
    campaign = _campaign(pk)
    if fmt not in results.FORMATS:
        return HttpResponse("The format is csv, json or parquet.", status=404, content_type="text/plain")
    try:
        filters = results.parse_filters(request.GET)
        method, rows = results.results_rows(campaign, method=request.GET.get("method") or None, filters=filters)
    except results.ResultsError as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain; charset=utf-8")
    if fmt == "csv":
        response = StreamingHttpResponse(results.csv_lines(rows), content_type=results.FORMATS[fmt])
    else:
        response = HttpResponse(results.export_bytes(campaign, fmt, method, rows), content_type=results.FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="{results.filename(campaign, fmt)}"'
    return response
