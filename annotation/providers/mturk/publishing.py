"""Publishing HITs and managing them on MTurk until they are deleted.

``HitPublishingMixin`` creates a campaign's HITs (idempotent: each batch is a ``ProviderJob``
whose unique token is the HIT's ``UniqueRequestToken``; the whole budget is checked and each
HIT's rewards committed before it is created), finds a HIT created by an earlier try, creates the
campaign's own qualification type, and pauses (expires), extends, finishes and deletes HITs,
releasing the money a HIT no longer needs.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.db import transaction
from django.utils import timezone

from ...models import Campaign, LedgerEntry, ProviderJob, Task
from .. import money
from ..base import ProviderError
from .layout import DEFAULTS, external_question, external_url, money_str, qualification_requirements


class HitPublishingMixin:
    """The publishing half of ``MTurkProvider``: HITs from creation to deletion."""

    def publish(self, campaign: Campaign, *, progress=None) -> list[ProviderJob]:
        """Create the campaign's HITs. Everything that can refuse (settings, HTTPS, credentials,
        the whole budget) is checked before the first HIT; a retry after an interruption
        creates only the HITs still missing."""
        client = self.client
        layout = self.layout(campaign)
        url = external_url(campaign)
        config = dict(campaign.provider_config or {})
        round_ = int(config.get("publish_round") or 1)
        existing = {j.unique_token: j for j in ProviderJob.objects.filter(campaign=campaign, provider=self.name)}
        pending_jobs = [j for j in existing.values() if j.status == ProviderJob.Status.PENDING]
        if pending_jobs:  # resume: the batches recorded before
            plan = [(j.unique_token, j.task_ids) for j in pending_jobs]
        else:
            if any(j.unique_token.startswith(f"captionlab-c{campaign.pk}-r{round_}-") for j in existing.values()):
                round_ += 1
            plan = [(self.unique_token(campaign, round_, i), ids)
                    for i, ids in enumerate(self.batches(campaign, layout["tasks_per_assignment"]))]
        if not plan:
            raise ProviderError("This campaign has no open items to publish.", code="nothing_to_publish")
        requirements = qualification_requirements(campaign)
        self.check_credentials(client)
        # The whole budget first: nothing is created unless every HIT of this round fits.
        per_hit = layout["reward"] * layout["max_assignments"]
        need = sum(per_hit + money.fee_cents(self.name, per_hit, "reward", layout["max_assignments"], campaign)
                   for token, _ in plan if not LedgerEntry.objects.filter(token=f"{token}:reward").exists())
        left = money.summary(campaign)["remaining"]
        if need > left:
            raise ProviderError(
                f"Over budget: {len(plan)} HITs of {layout['max_assignments']} assignments at "
                f"{money_str(layout['reward'])} need {money_str(need)} with MTurk's fee, but only "
                f"{money_str(max(left, 0))} of the budget is left. Raise the budget or publish fewer items.",
                code="over_budget")
        self.ensure_qualification_type(campaign, client)
        config = dict(Campaign.objects.get(pk=campaign.pk).provider_config or {})
        config["publish_round"] = round_
        Campaign.objects.filter(pk=campaign.pk).update(provider_config=config)
        campaign.provider_config = config
        jobs = []
        for token, task_ids in plan:
            job, _ = ProviderJob.objects.get_or_create(
                unique_token=token, defaults={"campaign": campaign, "provider": self.name, "task_ids": task_ids,
                                              "reward_cents": layout["reward"],
                                              "max_assignments": layout["max_assignments"],
                                              "lifetime_seconds": layout["lifetime"],
                                              "duration_seconds": layout["duration"]})
            jobs.append(job)
        total, done = len(jobs), sum(1 for j in jobs if j.status != ProviderJob.Status.PENDING)
        if progress:
            progress(done, total)
        question = external_question(url, layout["frame_height"])
        for job in jobs:
            if job.status != ProviderJob.Status.PENDING:
                continue
            try:
                self._create_hit(campaign, job, layout, question, requirements, client)
            except ProviderError as exc:
                ProviderJob.objects.filter(pk=job.pk).update(error=exc.message[:2000])
                if not exc.retryable and done == 0:
                    self._abandon(campaign, jobs)  # nothing half-launched
                raise
            done += 1
            if progress:
                progress(done, total)
        if campaign.status in (Campaign.Status.DRAFT, Campaign.Status.PAUSED):
            Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.RUNNING)
            campaign.status = Campaign.Status.RUNNING
        return jobs

    def _abandon(self, campaign: Campaign, jobs: list[ProviderJob]) -> None:
        """Forget jobs that never reached MTurk and release their money."""
        for job in jobs:
            if job.status == ProviderJob.Status.PENDING and not job.external_id:
                for entry in LedgerEntry.objects.filter(job=job, state=LedgerEntry.State.COMMITTED):
                    money.cancel(entry)
                job.delete()

    def _create_hit(self, campaign, job, layout, question, requirements, client) -> None:
        pool = money.commit(campaign, self.name, LedgerEntry.Kind.REWARD, layout["reward"] * layout["max_assignments"],
                            f"{job.unique_token}:reward", job=job, max_assignments=layout["max_assignments"],
                            note=f"HIT rewards: {layout['max_assignments']} x {money_str(layout['reward'])}")
        params = {
            "MaxAssignments": layout["max_assignments"], "AutoApprovalDelayInSeconds": layout["auto_approval"],
            "LifetimeInSeconds": layout["lifetime"], "AssignmentDurationInSeconds": layout["duration"],
            "Reward": money_str(layout["reward"]), "Title": layout["title"], "Keywords": layout["keywords"],
            "Description": layout["description"], "Question": question, "RequesterAnnotation": job.unique_token,
            "UniqueRequestToken": job.unique_token,
        }
        if requirements:
            params["QualificationRequirements"] = requirements
        try:
            hit = self.call("create_hit", client, **params)["HIT"]
        except ProviderError as exc:
            if "uniquerequesttoken" not in exc.message.lower() and "already" not in exc.message.lower():
                if not exc.retryable:
                    money.cancel(pool)
                raise
            hit = self.find_hit(job.unique_token, client)  # created by an earlier try: look it up
            if hit is None:
                raise
        expires = hit.get("Expiration")
        ProviderJob.objects.filter(pk=job.pk).update(
            external_id=hit["HITId"], group_id=hit.get("HITGroupId") or hit.get("HITTypeId", ""),
            status=ProviderJob.Status.PUBLISHED, published_at=timezone.now(), error="",
            expires_at=expires if isinstance(expires, datetime) else None)
        job.refresh_from_db()

    def find_hit(self, token: str, client=None) -> dict | None:
        """The HIT whose RequesterAnnotation is ``token`` (ListHITs, paged)."""
        params = {"MaxResults": 100}
        while True:
            page = self.call("list_hits", client, **params)
            for hit in page.get("HITs", []):
                if hit.get("RequesterAnnotation") == token:
                    return hit
            if not page.get("NextToken") or not page.get("HITs"):
                return None
            params["NextToken"] = page["NextToken"]

    def ensure_qualification_type(self, campaign: Campaign, client=None) -> str | None:
        """The campaign's own qualification type (created once, its id kept in provider_config),
        when the campaign has a qualification test."""
        config = campaign.provider_config or {}
        if config.get("qualification_type_id"):
            return config["qualification_type_id"]
        if campaign.qualification_pass_mark is None or not campaign.tasks.filter(role=Task.Role.QUALIFICATION).exists():
            return None
        try:
            qtype = self.call(
                "create_qualification_type", client, Name=f"CaptionLab qualification: {campaign.name}"[:128],
                Keywords="captionlab, qualification", QualificationTypeStatus="Active",
                Description=f"Passed the qualification test of the CaptionLab campaign {campaign.name!r}."[:2000],
            )["QualificationType"]
            qtype_id = qtype["QualificationTypeId"]
        except ProviderError as exc:
            if "already" not in exc.message.lower():
                raise
            found = self.call("list_qualification_types", client, Query=f"CaptionLab qualification: {campaign.name}"[:128],
                              MustBeRequestable=False, MustBeOwnedByCaller=True, MaxResults=10)
            types = found.get("QualificationTypes") or []
            if not types:
                raise
            qtype_id = types[0]["QualificationTypeId"]
        with transaction.atomic():
            locked = Campaign.objects.select_for_update(no_key=True).get(pk=campaign.pk)
            config = dict(locked.provider_config or {})
            config["qualification_type_id"] = qtype_id
            Campaign.objects.filter(pk=campaign.pk).update(provider_config=config)
        campaign.provider_config = config
        return qtype_id

    def _jobs(self, campaign: Campaign, *statuses):
        qs = ProviderJob.objects.filter(campaign=campaign, provider=self.name).exclude(external_id="")
        return qs.filter(status__in=statuses) if statuses else qs

    def expire_hit(self, job: ProviderJob, client=None) -> None:
        """No new worker can accept the HIT (those working may finish)."""
        self.call("update_expiration_for_hit", client, HITId=job.external_id,
                  ExpireAt=datetime(2015, 1, 1, tzinfo=dt_timezone.utc))
        state = dict(job.sync_state or {}, expired=True)
        ProviderJob.objects.filter(pk=job.pk).update(sync_state=state, expires_at=timezone.now())
        job.sync_state = state

    def pause(self, campaign: Campaign) -> None:
        client = self.client
        for job in self._jobs(campaign, ProviderJob.Status.PUBLISHED):
            self.expire_hit(job, client)
            ProviderJob.objects.filter(pk=job.pk).update(status=ProviderJob.Status.PAUSED)
        Campaign.objects.filter(pk=campaign.pk, status=Campaign.Status.RUNNING).update(status=Campaign.Status.PAUSED)

    def extend(self, campaign: Campaign, *, extra_assignments: int = 0, extra_seconds: int = 0) -> None:
        client = self.client
        extra_seconds = int(extra_seconds or 0) or int((campaign.provider_config or {}).get(
            "lifetime_seconds") or DEFAULTS["lifetime_seconds"])
        for job in self._jobs(campaign, ProviderJob.Status.PUBLISHED, ProviderJob.Status.PAUSED):
            if extra_assignments:
                amount = job.reward_cents * int(extra_assignments)
                entry = money.commit(campaign, self.name, LedgerEntry.Kind.REWARD, amount,
                                     f"{job.unique_token}:more{job.max_assignments}+{extra_assignments}", job=job,
                                     max_assignments=job.max_assignments + int(extra_assignments))
                try:
                    self.call("create_additional_assignments_for_hit", client, HITId=job.external_id,
                              NumberOfAdditionalAssignments=int(extra_assignments),
                              UniqueRequestToken=entry.token[:64])
                except ProviderError:
                    money.cancel(entry)
                    raise
                ProviderJob.objects.filter(pk=job.pk).update(max_assignments=job.max_assignments + int(extra_assignments))
            expires = timezone.now() + timedelta(seconds=extra_seconds)
            self.call("update_expiration_for_hit", client, HITId=job.external_id, ExpireAt=expires)
            state = dict(job.sync_state or {}, expired=False)
            ProviderJob.objects.filter(pk=job.pk).update(status=ProviderJob.Status.PUBLISHED, expires_at=expires,
                                                         sync_state=state)
        Campaign.objects.filter(pk=campaign.pk, status=Campaign.Status.PAUSED).update(status=Campaign.Status.RUNNING)

    def finish(self, campaign: Campaign) -> None:
        """Expire every HIT; the sync reviews what is still submitted, then deletes them."""
        client = self.client
        for job in self._jobs(campaign, ProviderJob.Status.PUBLISHED, ProviderJob.Status.PAUSED):
            if not (job.sync_state or {}).get("expired"):
                self.expire_hit(job, client)
        Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.FINISHED)

    def delete_hit(self, job: ProviderJob, client=None) -> bool:
        """DeleteHIT once it is expired and every assignment is reviewed; the HIT's unused
        reward commitment is released. False when MTurk says it is not ready yet."""
        try:
            self.call("delete_hit", client, HITId=job.external_id)
        except ProviderError as exc:
            if exc.code != "RequestError" or "does not exist" not in exc.message.lower():
                if exc.code == "RequestError":
                    return False
                raise
        for entry in LedgerEntry.objects.filter(job=job, assignment__isnull=True, state=LedgerEntry.State.COMMITTED,
                                                kind=LedgerEntry.Kind.REWARD):
            money.cancel(entry)
        ProviderJob.objects.filter(pk=job.pk).update(status=ProviderJob.Status.FINISHED,
                                                     sync_state=dict(job.sync_state or {}, deleted=True))
        return True

    def get_hit(self, job: ProviderJob, client=None) -> dict:
        return self.call("get_hit", client, HITId=job.external_id)["HIT"]
