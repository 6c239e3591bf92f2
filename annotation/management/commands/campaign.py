"""manage.py campaign: create, list, start/pause/finish, aggregate and export crowd campaigns.

    manage.py campaign create --name "Fluency 1" --kind fluency --collection demo --sample 50 --members a,b --start
    manage.py campaign list
    manage.py campaign status 3 paused
    manage.py campaign aggregate 3
    manage.py campaign export-votes 3 --out votes.csv
    manage.py campaign create ... --provider linkout --reward-cents 150 --budget-cents 60000 --places 300
    manage.py campaign crowd 3 --budget-cents 90000 --block-below-gold-accuracy 0.6 --block-min-gold 5
    manage.py campaign ledger 3
    manage.py campaign create --name "Verify rewrites" --kind verify_rewrite --collection news --run 7 --step 2 \
        --reason uncertain_rewrite --members a,b,c --start
    manage.py campaign apply-verdicts 4
    manage.py campaign create --name "Same meaning" --kind same_meaning --collection news --run 9 --step 1 --start
    manage.py campaign fit-pairs 5 [--apply] [--drop]

Every write goes through ``annotation.services`` (the same rules as the pages and the API); a bad
argument stops with a CommandError that says what to fix.
"""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Count, Q

from annotation import quality, services
from annotation.kinds import KINDS
from annotation.management import crowd_options
from annotation.models import Campaign, Membership, Task, Vote
from annotation.providers import controls
from captionlab import csv_safe
from curation.models import Caption, Collection

STATUSES = [Campaign.Status.RUNNING, Campaign.Status.PAUSED, Campaign.Status.FINISHED]


class Command(BaseCommand):
    help = "Crowd campaigns: create from a selection, list, change status, aggregate, export votes."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="subcommand", metavar="{create,list,status,aggregate,export-votes,crowd,"
                                                                      "ledger,apply-verdicts,fit-pairs}")
        sub.required = True

        create = sub.add_parser("create", help="create a campaign from a selection of a collection")
        create.add_argument("--name", required=True)
        create.add_argument("--kind", required=True, help=f"one of: {', '.join(KINDS)}")
        create.add_argument("--collection", required=True, help="collection id or name")
        create.add_argument("--run", type=int, help="a filter run over the collection")
        create.add_argument("--step", type=int, help="the run's step whose decisions select the items (from 0)")
        create.add_argument("--outcome", choices=["keep", "drop"], help="only the items the step kept or dropped")
        create.add_argument("--reason", help="only the step's decisions with this reason, e.g. uncertain_rewrite "
                                             "(needs --run and --step)")
        create.add_argument("--score-min", type=float, help="lowest step score (needs --run and --step)")
        create.add_argument("--score-max", type=float, help="highest step score (needs --run and --step)")
        create.add_argument("--origin", choices=Caption.Origin.values, help="only captions of this origin")
        create.add_argument("--sample", type=int, help="a random sample of this many items")
        create.add_argument("--seed", type=int, default=0, help="random seed of the sample (default 0)")
        create.add_argument("--votes-per-item", type=int)
        create.add_argument("--gold-rate", type=float)
        create.add_argument("--reservation-seconds", type=int)
        create.add_argument("--priority", choices=Campaign.Priority.values)
        create.add_argument("--instructions", help="Markdown instructions, or @file to read them from a file")
        create.add_argument("--question", help="the question annotators read on every item (default: the kind's own)")
        create.add_argument("--open-to-all", action="store_true", help="every annotator may join")
        create.add_argument("--members", default="", help="comma-separated usernames of annotators")
        create.add_argument("--start", action="store_true", help="create it running rather than as a draft")
        crowd_options.add_crowd_arguments(create)
        crowd = sub.add_parser("crowd", help="show or change the provider, reward, budget, places, provider "
                                             "settings and review rules")
        crowd.add_argument("campaign", help="campaign id or name")
        crowd_options.add_crowd_arguments(crowd)
        ledger = sub.add_parser("ledger", help="every ledger entry of a campaign (token, provider reference)")
        ledger.add_argument("campaign", help="campaign id or name")

        sub.add_parser("list", help="list campaigns with their progress")

        status = sub.add_parser("status", help="start, pause or finish a campaign")
        status.add_argument("campaign", help="campaign id or name")
        status.add_argument("status", choices=STATUSES)

        aggregate = sub.add_parser("aggregate", help="aggregate the votes now and print agreement and labels")
        aggregate.add_argument("campaign", help="campaign id or name")

        export = sub.add_parser("export-votes", help="write every vote of a campaign to a CSV file")
        export.add_argument("campaign", help="campaign id or name")
        export.add_argument("--out", required=True, help="CSV file to write, or - for standard output")

        verdicts = sub.add_parser("apply-verdicts", help="write a verify-rewrite campaign's verdicts (keep / fix / "
                                                         "drop) onto its run's decisions")
        verdicts.add_argument("campaign", help="campaign id or name")

        pairs = sub.add_parser("fit-pairs", help="fit a same-meaning campaign's judged pairs into the semantic-"
                                                 "duplicates step's threshold; print precision and recall")
        pairs.add_argument("campaign", help="campaign id or name")
        pairs.add_argument("--apply", action="store_true", help="write the fitted weights and threshold into the "
                                                                "run's pipeline step")
        pairs.add_argument("--drop", action="store_true", help="with --apply: drop pairs at or above the threshold "
                                                               "(refused unless it reaches the target precision)")

    def handle(self, *args, subcommand, **options):
        handler = {"create": self.create, "list": self.list, "status": self.status, "aggregate": self.aggregate,
                   "export-votes": self.export_votes, "crowd": self.crowd, "ledger": self.ledger,
                   "apply-verdicts": self.apply_verdicts, "fit-pairs": self.fit_pairs}[subcommand]
        handler(**options)

    # --- lookups ----------------------------------------------------------------------------

    @staticmethod
    def _collection(ref: str) -> Collection:
        found = Collection.objects.filter(pk=int(ref)).first() if ref.isdigit() else None
        found = found or Collection.objects.filter(name=ref).first()
        if found is None:
            raise CommandError(f"No collection with id or name {ref!r}.")
        return found

    @staticmethod
    def _campaign(ref: str) -> Campaign:
        found = Campaign.objects.filter(pk=int(ref)).first() if str(ref).isdigit() else None
        found = found or Campaign.objects.filter(name=ref).first()
        if found is None:
            raise CommandError(f"No campaign with id or name {ref!r}.")
        return found

    # --- subcommands ------------------------------------------------------------------------

    def create(self, *, name, kind, collection, members, start, instructions, open_to_all, **options):
        if kind not in KINDS:
            raise CommandError(f"Unknown kind {kind!r}; choose one of {', '.join(KINDS)}.")
        lo, hi = options.get("score_min"), options.get("score_max")
        if (lo is not None or hi is not None) and (options.get("run") is None or options.get("step") is None):
            raise CommandError("A score range (--score-min/--score-max) needs --run and --step.")
        if lo is not None and hi is not None and lo > hi:
            raise CommandError("The score range is empty: --score-max is below --score-min.")
        if options.get("reason") and (options.get("run") is None or options.get("step") is None):
            raise CommandError("Selecting decisions by --reason needs --run and --step.")
        coll = self._collection(collection)
        selection = {"collection": coll.pk, "run": options.get("run"), "step": options.get("step"),
                     "outcome": options.get("outcome"), "reason": options.get("reason"), "score_min": lo,
                     "score_max": hi, "origin": options.get("origin"), "sample": options.get("sample"),
                     "seed": options.get("seed")}
        if instructions and instructions.startswith("@"):
            try:
                with open(instructions[1:], encoding="utf-8") as fh:
                    instructions = fh.read()
            except OSError as exc:
                raise CommandError(f"Cannot read the instructions file: {exc}") from None
        usernames = [u.strip() for u in members.split(",") if u.strip()]
        from rest_framework.exceptions import ValidationError

        from annotation.serializers import resolve_annotators

        try:
            users = resolve_annotators(usernames)
        except ValidationError as exc:
            raise CommandError(" ".join(str(m) for m in exc.detail)) from None
        settings = {"votes_per_item": options.get("votes_per_item"), "gold_rate": options.get("gold_rate"),
                    "reservation_seconds": options.get("reservation_seconds"), "priority": options.get("priority"),
                    "instructions": instructions, "open_to_all": open_to_all or None,
                    "annotator_question": options.get("question")}
        try:
            campaign = controls.create_campaign(
                controls=crowd_options.crowd_values(options), name=name, kind=kind, selection=selection, members=users,
                status=Campaign.Status.RUNNING if start else Campaign.Status.DRAFT, **settings)
        except services.CampaignError as exc:
            if exc.field in controls.CONTROL_FIELDS:
                raise crowd_options.command_error(exc) from None
            where = f" (--{exc.field.replace('_', '-')})" if exc.field else ""
            raise CommandError(f"{exc.message}{where}") from None
        tasks = campaign.tasks.count()
        self.stdout.write(self.style.SUCCESS(
            f"Campaign #{campaign.pk} {campaign.name!r}: {campaign.kind}, {tasks} tasks, "
            f"{campaign.votes_per_item} votes per item, {len(users)} members, {campaign.status}."))
        crowd_options.write_crowd(self, campaign)

    def crowd(self, *, campaign, **options):
        crowd_options.change_crowd(self, self._campaign(campaign), options)

    def ledger(self, *, campaign, **options):
        crowd_options.write_ledger(self, self._campaign(campaign))

    def list(self, **options):
        campaigns = Campaign.objects.annotate(
            n_tasks=Count("tasks", filter=Q(tasks__role=Task.Role.REAL), distinct=True),
            n_done=Count("tasks", filter=Q(tasks__role=Task.Role.REAL, tasks__status=Task.Status.DONE),
                         distinct=True),
        ).order_by("pk")
        votes = dict(Vote.objects.filter(role=Task.Role.REAL).values_list("campaign").annotate(n=Count("pk")))
        members = dict(Membership.objects.values_list("campaign").annotate(n=Count("pk")))
        self.stdout.write(f"{'id':>4}  {'name':<32} {'kind':<22} {'status':<9} {'done':>12} {'votes':>7} "
                          f"{'members':>7}")
        for c in campaigns:
            self.stdout.write(f"{c.pk:>4}  {c.name[:32]:<32} {c.kind:<22} {c.status:<9} "
                              f"{f'{c.n_done}/{c.n_tasks}':>12} {votes.get(c.pk, 0):>7} {members.get(c.pk, 0):>7}")
        if not campaigns:
            self.stdout.write("No campaigns yet; create one with `manage.py campaign create`.")

    def status(self, *, campaign, status, **options):
        camp = self._campaign(campaign)
        try:
            services.set_status(camp, status)
        except services.CampaignError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(self.style.SUCCESS(f"Campaign #{camp.pk} {camp.name!r} is now {camp.status}."))

    def aggregate(self, *, campaign, **options):
        camp = self._campaign(campaign)
        for worker in quality.enforce_gold_rules(camp):  # the gold rule of every provider, in-house included
            self.stdout.write(self.style.WARNING(f"Blocked {worker} on gold accuracy."))
        try:
            from annotation.aggregation import aggregate_campaign
        except ImportError as exc:
            raise CommandError(f"Aggregation is not available: {exc}") from None
        aggregate_campaign(camp.pk)
        camp.refresh_from_db()
        stats = camp.stats or {}
        agreement = stats.get("agreement") or {}
        alpha = agreement.get("alpha")
        self.stdout.write(f"Campaign #{camp.pk} {camp.name!r}: {stats.get('n_votes', 0)} votes on "
                          f"{stats.get('n_tasks_aggregated', 0)} of {stats.get('n_tasks', 0)} tasks aggregated")
        alpha_text = "n/a (too few overlapping votes)" if alpha is None else f"{alpha:.3f}"
        self.stdout.write(f"Krippendorff's alpha ({agreement.get('metric', '-')}): {alpha_text}"
                          f" over {agreement.get('n_items', 0)} items")
        for part, value in sorted((agreement.get("per_part") or {}).items()):
            self.stdout.write(f"  {part}: {'n/a' if value is None else f'{value:.3f}'}")
        distribution = stats.get("label_distribution") or {}
        for method in sorted(distribution):
            counts = ", ".join(f"{label} {n}" for label, n in sorted(distribution[method].items(),
                                                                      key=lambda kv: (-kv[1], str(kv[0]))))
            self.stdout.write(f"{method}: {counts or '-'}")
        if not distribution:
            self.stdout.write("No aggregated labels yet.")

    def export_votes(self, *, campaign, out, **options):
        """The same rows and columns as the page's votes CSV (``annotation.vote_export``)."""
        from annotation.vote_export import vote_rows

        camp = self._campaign(campaign)
        try:
            fh = self.stdout if out == "-" else open(out, "w", newline="", encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"Cannot write {out}: {exc}") from None
        n = -1  # the header
        try:
            writer = csv_safe.writer(fh)
            for row in vote_rows(camp):
                writer.writerow(row)
                n += 1
        finally:
            if out != "-":
                fh.close()
        if out != "-":
            self.stdout.write(self.style.SUCCESS(f"Wrote {n} votes of campaign #{camp.pk} to {out}."))

    def apply_verdicts(self, *, campaign, **options):
        from annotation.verify_rewrites import counts_text, verdicts_apply

        camp = self._campaign(campaign)
        try:
            counts = verdicts_apply(campaign=camp)
        except services.CampaignError as exc:
            raise CommandError(exc.message) from None
        run = (camp.selection or {}).get("run")
        self.stdout.write(self.style.SUCCESS(f"Campaign #{camp.pk} {camp.name!r} -> run #{run}: {counts_text(counts)}"))

    def fit_pairs(self, *, campaign, apply=False, drop=False, **options):
        from annotation.same_meaning import pairs_apply, pairs_fit

        camp = self._campaign(campaign)
        if drop and not apply:
            raise CommandError("--drop goes with --apply.")
        try:
            fit = pairs_fit(camp)
        except services.CampaignError as exc:
            raise CommandError(exc.message) from None
        summary = fit.as_dict()
        self.stdout.write(f"Campaign #{camp.pk} {camp.name!r}: {summary['pairs_used']} judged pairs used "
                          f"({summary['same']} same meaning), {len(summary['ties'])} ties and "
                          f"{len(summary['single_judge'])} single judges left out, {summary['unjudged']} not judged.")
        for message in fit.messages:
            self.stdout.write(self.style.WARNING(message))
        if not fit.usable:
            if apply:
                raise CommandError("Nothing to apply: the fit is not usable yet.")
            return
        cv = (f"; cross-validated precision {fit.cv_precision:.3f}, recall {fit.cv_recall:.3f}"
              if fit.cv_precision is not None else "")
        self.stdout.write(f"threshold {fit.threshold:.3f}: precision {fit.precision:.3f}, recall {fit.recall:.3f} on "
                          f"the judged pairs{cv}")
        self.stdout.write(f"weights: {fit.weights or 'the defaults'}")
        if apply:
            try:
                applied = pairs_apply(campaign=camp, drop=drop)
            except services.CampaignError as exc:
                raise CommandError(exc.message) from None
            self.stdout.write(self.style.SUCCESS(f"Pipeline #{applied['pipeline']} step {applied['step']}: "
                                                 f"{applied['params']}"))
