"""Drive a learning loop from the terminal: make one, run or queue its next round, read its rounds.

    manage.py loop create --campaign 3 --sampler hybrid --batch-size 40
    manage.py loop next 1            # runs the round here, printing each stage
    manage.py loop next 1 --queue    # sends it to the gpu queue
    manage.py loop show 1            # the rounds table and the learning curve's numbers
    manage.py loop list
"""
from django.core.management.base import BaseCommand, CommandError

from modeling.loop import services
from modeling.loop.charts import curve_numbers
from modeling.loop.services import LoopError
from modeling.models import LearningLoop, LoopRound, Sampler

# loop_create's keyword -> this command's option
CREATE_OPTIONS = {"trainer": "trainer", "sampler": "sampler", "holdout_source": "holdout",
                  "holdout_fraction": "holdout_share", "batch_size": "batch_size", "random_share": "random_share",
                  "auto_every_votes": "auto_every"}


def _field(name: str):
    return LearningLoop._meta.get_field(name)


def _default(name: str):
    return _field(name).default


def _f(value) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


class Command(BaseCommand):
    help = "Learning loops: create one on a fluency campaign, run or queue its next round, show its rounds."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="{create,next,show,list}")
        create = sub.add_parser("create", help="start a learning loop on a fluency campaign")
        create.add_argument("--campaign", type=int, required=True, help="id of the fluency campaign whose votes "
                                                                         "train the model")
        create.add_argument("--sampler", help="which open task is labelled next: "
                            f"{', '.join(Sampler.values)} (default hybrid)")
        create.add_argument("--holdout", choices=["random", "gold"],
                            help="the hold-out the versions are compared on: a random share of the tasks, or the "
                                 "campaign's gold items (default random)")
        create.add_argument("--holdout-share", type=float, metavar="F",
                            help=f"share of the real tasks in a random hold-out, 0.05 to 0.5 (default "
                                 f"{_default('holdout_fraction')})")
        create.add_argument("--batch-size", type=int, metavar="N",
                            help=f"tasks per sampler batch (default {_default('batch_size')})")
        create.add_argument("--random-share", type=float, metavar="F",
                            help=f"{_field('random_share').help_text}, 0 to 1 (default {_default('random_share')})")
        create.add_argument("--auto-every", type=int, metavar="N",
                            help="start a round every N new votes; 0: only by hand (default)")
        create.add_argument("--trainer", default=None, help="trainer name (default: fluency-encoder)")
        nxt = sub.add_parser("next", help="start the loop's next round: here, printing each stage, or queued")
        nxt.add_argument("loop", type=int, help="id of the learning loop")
        nxt.add_argument("--queue", action="store_true", help="send the round to the gpu queue instead of "
                                                              "running it in this process")
        show = sub.add_parser("show", help="the loop's settings, rounds and learning-curve numbers")
        show.add_argument("loop", type=int, help="id of the learning loop")
        sub.add_parser("list", help="every learning loop with its last round")

    def handle(self, *args, **opts):
        return getattr(self, f"_{opts['action']}")(opts)

    def _loop(self, pk) -> LearningLoop:
        loop = LearningLoop.objects.select_related("campaign").filter(pk=pk).first()
        if loop is None:
            raise CommandError(f"No learning loop #{pk} (manage.py loop list shows them).")
        return loop

    def _create(self, opts):
        from annotation.models import Campaign

        campaign = Campaign.objects.filter(pk=opts["campaign"]).first()
        if campaign is None:
            raise CommandError(f"No campaign #{opts['campaign']}.")
        given = {name: opts[option] for name, option in CREATE_OPTIONS.items() if opts[option] is not None}
        try:
            loop = services.loop_create(campaign=campaign, **given)  # left out: the service's defaults
        except LoopError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(self.style.SUCCESS(
            f"Learning loop #{loop.pk} on {campaign.name}: {loop.sampler} sampler, {loop.holdout_source} hold-out of "
            f"{len(loop.holdout_tasks)} task(s). Next: manage.py loop next {loop.pk}"))

    def _next(self, opts):
        loop = self._loop(opts["loop"])
        try:
            round_ = services.round_start(loop, trigger="manual", enqueue=opts["queue"])
        except LoopError as exc:
            raise CommandError(exc.message) from None
        if opts["queue"]:
            self.stdout.write(f"Round {round_.number} (#{round_.pk}) queued on the gpu queue.")
            return
        from modeling.loop.rounds import run_round

        round_ = run_round(round_.pk, echo=lambda line: self.stdout.write(line))
        if round_.status != LoopRound.Status.DONE:
            raise CommandError(f"Round {round_.number} {round_.status}: {round_.error}")
        self.stdout.write(self.style.SUCCESS(f"Round {round_.number} done. {round_.decision}"))

    def _show(self, opts):
        loop = self._loop(opts["loop"])
        services.sweep_stale(loop)
        rounds = list(loop.rounds.select_related("version", "training_run").order_by("number"))
        self.stdout.write(f"Learning loop #{loop.pk} on {loop.campaign.name}: trainer {loop.trainer}, sampler "
                          f"{loop.sampler} (random share {loop.random_share}, batch {loop.batch_size}), "
                          f"{loop.holdout_source} hold-out of {len(loop.holdout_tasks or [])} task(s), "
                          f"{f'a round every {loop.auto_every_votes} votes' if loop.auto_every_votes else 'manual'}.")
        if not rounds:
            self.stdout.write(f"No rounds yet: manage.py loop next {loop.pk}")
            return
        self._rounds_table(rounds)
        self._curve(curve_numbers(rounds))

    def _rounds_table(self, rounds):
        self.stdout.write("\nRounds")
        self.stdout.write(f"{'#':>3}  {'trigger':7}  {'sampler':11}  {'status':7}  {'labels':>6}  {'version':7}  "
                          f"{'held':>4}  {'F1 new':>6}  {'F1 prev':>7}  {'F1 maj':>6}  activated  decision / error")
        for r in rounds:
            h = r.holdout or {}
            scores = [_f((h.get(k) or {}).get("macro_f1")) for k in ("new", "previous", "majority")]
            version = f"v{r.version.version}" if r.version_id else "-"
            note = r.error or r.decision or r.stage
            self.stdout.write(f"{r.number:>3}  {r.trigger:7}  {r.sampler:11}  {r.status:7}  {r.labels_used:>6}  "
                              f"{version:7}  {h.get('n', '-'):>4}  {scores[0]:>6}  {scores[1]:>7}  {scores[2]:>6}  "
                              f"{'yes' if r.activated else 'no':9}  {note}")

    def _curve(self, numbers):
        if numbers.get("same_items"):
            self.stdout.write(f"\nLearning curve (macro F1 against labels, every version on the same {numbers['n']} "
                              f"hold-out items, bootstrap 95% intervals)")
            for p in numbers["sampler"]:
                interval = f"[{_f(p['interval'][0])}, {_f(p['interval'][1])}]" if p.get("interval") else "[-]"
                self.stdout.write(f"  round {p['round']:>2}  {p['labels']:>5} labels  F1 {_f(p['macro_f1'])} {interval}  "
                                  f"labels chosen by {p['chosen_by']}")
            self.stdout.write("  baselines on the same items: " + ", ".join(
                f"{name} {_f(value)}" for name, value in numbers["baselines"].items()))
        else:
            self.stdout.write("\nLearning curve (hold-out macro F1 against labels; each round on its own hold-out)")
            majority = {m["round"]: m["macro_f1"] for m in numbers["majority"]}
            for p in numbers["sampler"]:
                self.stdout.write(f"  round {p['round']:>2}  {p['labels']:>5} labels  {p['sampler']:11}  F1 "
                                  f"{_f(p['macro_f1'])}  majority {_f(majority.get(p['round']))}  accuracy "
                                  f"{_f(p['accuracy'])}  ECE {_f(p['ece'])}  (hold-out {p['n']})")
        random = numbers["random"]
        if random is None:
            return
        if not random["simulated"] or not random["points"]:
            self.stdout.write(f"  random arm: not simulated at round {random['round']} ({random['why'] or 'no points'})")
            return
        self.stdout.write(f"  random arm (simulated at round {random['round']}, on its hold-out of {random['n']}):")
        for p in random["points"]:
            interval = f" [{_f(p['interval'][0])}, {_f(p['interval'][1])}]" if p.get("interval") else ""
            self.stdout.write(f"    {p['labels']:>5} labels  F1 {_f(p['macro_f1'])} ± {_f(p.get('sd'))}{interval}")
        self.stdout.write(f"  At round {random['round']} both arms draw on the same {random['labels']} labels; compare "
                          f"them at the earlier sizes.")
        if random["trained_on"] and random["trained_on"] != random["labels"]:
            self.stdout.write(f"  (The round's version trained on its run's training split, {random['trained_on']} of "
                              f"them; the random arm's last point on all {random['labels']}.)")

    def _list(self, opts):
        loops = list(LearningLoop.objects.select_related("campaign").order_by("pk"))
        if not loops:
            self.stdout.write("No learning loops. manage.py loop create --campaign N starts one.")
            return
        for loop in loops:
            last = loop.rounds.order_by("-number").first()
            state = f"round {last.number} {last.status}" if last else "no rounds"
            self.stdout.write(f"#{loop.pk}  {loop.campaign.name}  ({loop.trainer}, {loop.sampler})  {state}")
