"""manage.py campaign_results: a campaign's per-item results as CSV, JSON or Parquet, the same rows and
columns as the results page and the API (``annotation.results``).

    manage.py campaign_results 3 --format parquet --out results.parquet
    manage.py campaign_results "Fluency 1" --method dawid_skene --tie-only --out -
    manage.py campaign_results 7 --min-votes 3 --confidence-min 0.5 --search beach --format json --out r.json
"""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotation import results
from annotation.models import Campaign


class Command(BaseCommand):
    help = "Write a campaign's per-item results (votes, consensus, confidence, tie, method) as CSV, JSON or Parquet."

    def add_arguments(self, parser):
        parser.add_argument("campaign", help="campaign id or name")
        parser.add_argument("--format", choices=list(results.FORMATS), default="csv")
        parser.add_argument("--out", required=True, help="file to write, or - for standard output (CSV and JSON)")
        parser.add_argument("--method", help="aggregation method (default: the campaign's first)")
        parser.add_argument("--consensus", help="only rows with this consensus")
        parser.add_argument("--tie-only", action="store_true", help="only items whose top labels tie")
        parser.add_argument("--min-votes", help="only items with at least this many votes")
        parser.add_argument("--confidence-min", help="lowest confidence")
        parser.add_argument("--confidence-max", help="highest confidence")
        parser.add_argument("--search", help="text in the caption, the consensus or the image id")

    def handle(self, *args, campaign, format, out, method, **options):
        camp = Campaign.objects.filter(pk=int(campaign)).first() if str(campaign).isdigit() else None
        camp = camp or Campaign.objects.filter(name=campaign).first()
        if camp is None:
            raise CommandError(f"No campaign with id or name {campaign!r}.")
        params = {"consensus": options.get("consensus"), "tie": "1" if options.get("tie_only") else "",
                  "min_votes": options.get("min_votes"), "confidence_min": options.get("confidence_min"),
                  "confidence_max": options.get("confidence_max"), "q": options.get("search")}
        try:
            method, rows = results.results_rows(camp, method=method, filters=results.parse_filters(params))
        except results.ResultsError as exc:
            flag = f" (--{exc.field.replace('_', '-')})" if exc.field else ""
            raise CommandError(f"{exc.message}{flag}") from None
        data = results.export_bytes(camp, format, method, rows)
        if out == "-":
            if format == "parquet":
                raise CommandError("Parquet is binary: give a file with --out.")
            self.stdout.write(data.decode("utf-8"), ending="")
            return
        try:
            with open(out, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise CommandError(f"Cannot write {out}: {exc}") from None
        self.stdout.write(self.style.SUCCESS(
            f"Wrote {len(rows)} rows of campaign #{camp.pk} ({method}) to {out} as {format}."))
