"""The crowd options of ``manage.py campaign`` (create, crowd, ledger): provider, reward, budget,
places, provider settings and review rules, validated by ``annotation.providers.controls`` like
the pages and the API. Not a command itself (the leading underscore)."""
from __future__ import annotations

import argparse
import json

from django.core.management.base import CommandError

from annotation.models import Campaign, LedgerEntry
from annotation.providers import controls, money

REVIEW_OPTIONS = ("auto_approve", "min_gold_accuracy", "block_below_gold_accuracy", "block_min_gold")


def add_crowd_arguments(parser) -> None:
    parser.add_argument("--provider", choices=Campaign.Backend.values,
                        help="crowd provider: inhouse (default), linkout, or mturk (Amazon Mechanical Turk: "
                             f"{controls.MTURK_CLOSED})")
    parser.add_argument("--reward-cents", type=int, help="reward per assignment (link-out: per participant), cents")
    parser.add_argument("--budget-cents", type=int, help="budget for rewards, bonuses and fees, cents")
    parser.add_argument("--places", type=int, help="link-out: how many participants are admitted")
    parser.add_argument("--provider-config", help="provider settings as a JSON object, or @file.json")
    parser.add_argument("--auto-approve", action=argparse.BooleanOptionalAction, default=None,
                        help="approve submitted work that passes the rules (--no-auto-approve: hold it all)")
    parser.add_argument("--min-gold-accuracy", type=float, help="reject an assignment below this gold accuracy")
    parser.add_argument("--block-below-gold-accuracy", type=float,
                        help="block a worker of any provider below this gold accuracy")
    parser.add_argument("--block-min-gold", type=int, help="... once they answered this many gold items")


def crowd_values(options: dict) -> dict:
    """The crowd options given (for ``controls``); an option left out changes nothing."""
    config = options.get("provider_config")
    if config is not None:
        if config.startswith("@"):
            try:
                with open(config[1:], encoding="utf-8") as fh:
                    config = fh.read()
            except OSError as exc:
                raise CommandError(f"Cannot read the provider settings file: {exc}") from None
        try:
            config = json.loads(config)
        except ValueError as exc:
            raise CommandError(f"--provider-config is not valid JSON: {exc}") from None
    review = {key: options[key] for key in REVIEW_OPTIONS if options.get(key) is not None}
    values = {"backend": options.get("provider"), "reward_cents": options.get("reward_cents"),
              "budget_cents": options.get("budget_cents"), "places": options.get("places"),
              "provider_config": config, "review": review or None}
    return {k: v for k, v in values.items() if v is not None}


def command_error(exc) -> CommandError:
    """A CampaignError of the controls, naming the option to fix."""
    option = {"backend": "provider", "review": "block-below-gold-accuracy"}.get(exc.field or "", exc.field or "")
    where = f" (--{option.replace('_', '-')})" if option else ""
    return CommandError(f"{exc.message}{where}")


def crowd_line(campaign: Campaign) -> str:
    line = f"provider {campaign.backend}, reward {campaign.reward_cents} cents, budget {campaign.budget_cents} cents"
    config = campaign.provider_config or {}
    if config.get("places"):
        line += f", {config['places']} places"
    review = config.get("review") or {}
    if review.get("block_below_gold_accuracy") is not None:
        line += (f", workers blocked below {review['block_below_gold_accuracy']:g} gold accuracy after "
                 f"{review.get('block_min_gold', 3)} gold items")
    if review.get("auto_approve") is False or review.get("manual"):
        line += ", every submission held for review"
    return line


def write_crowd(command, campaign: Campaign) -> None:
    command.stdout.write(f"Campaign #{campaign.pk} {campaign.name!r}: {crowd_line(campaign)}.")
    note = controls.provider_note(campaign.backend)
    if note:
        command.stdout.write(command.style.WARNING(note))


def change_crowd(command, campaign: Campaign, options: dict) -> None:
    from annotation.services import CampaignError

    values = crowd_values(options)
    if values:
        try:
            controls.update_controls(campaign, values)
        except CampaignError as exc:
            raise command_error(exc) from None
    write_crowd(command, campaign)


def write_ledger(command, campaign: Campaign) -> None:
    entries = (LedgerEntry.objects.filter(campaign=campaign).select_related("job", "assignment")
               .order_by("created_at", "pk"))
    command.stdout.write(f"{'time':<19} {'kind':<6} {'state':<9} {'amount':>10}  {'token':<44} reference")
    n = 0
    for e in entries:
        reference = ((e.assignment.provider_assignment_id if e.assignment_id else "")
                     or (e.job.external_id if e.job_id else "") or "-")
        command.stdout.write(f"{e.created_at:%Y-%m-%d %H:%M:%S} {e.kind:<6} {e.state:<9} "
                             f"{e.amount_cents / 100:>10.2f}  {e.token:<44} {reference}")
        n += 1
    s = money.summary(campaign)
    command.stdout.write(f"{n} entries; budget {s['budget'] / 100:.2f}, spent {s['spent'] / 100:.2f}, committed "
                         f"{s['committed'] / 100:.2f}, remaining {s['remaining'] / 100:.2f}.")


__all__ = ["add_crowd_arguments", "crowd_values", "command_error", "crowd_line", "write_crowd", "change_crowd",
           "write_ledger"]
