"""External workers in a browser session: link-out participants and MTurk workers.

They have no account. ``begin`` turns the marketplace's ids (participant / worker id, and the
assignment or session id) into a ``Worker``, a ``Membership`` and an ``Assignment``, and remembers
them in the Django session, so that the ordinary work pages (``annotation.web.annotator.views``) serve them through
``current``. An external assignment starts unconfirmed (``confirmed=False``): its votes stay
quarantined until the provider confirms it (``routing.confirm_assignment``).

A browser session works a campaign under one identity: a second participant id from the same
session is refused (``ProviderError`` code ``second_identity``), so nobody takes the same items
again under a new id. The other way round, an assignment is bound to the browser session that
started it: the same participant or worker/assignment ids replayed from another browser are refused
(code ``other_browser``) while that session lives, since marketplace ids are visible in URLs and
are not secrets. Once the first session has expired or was cleared, the ids may resume elsewhere.
"""
from __future__ import annotations

from django.db import IntegrityError, transaction

from .models import Assignment, Campaign, Membership, Task, Vote, Worker
from .providers.base import ProviderError

SESSION_KEY = "captionlab_external"


def ensure_session(request) -> str:
    """The browser session's key, creating the session first. Call it before a transaction that
    may roll back: a session row created inside one would vanish with it, and the response's
    session save would then fail."""
    session = request.session
    if not session.session_key:
        session.save()  # creates the key
    return session.session_key


_session_key = ensure_session


def _entries(request) -> dict:
    return dict(request.session.get(SESSION_KEY) or {})


def _store(request, entries: dict) -> None:
    request.session[SESSION_KEY] = entries
    request.session.modified = True


@transaction.atomic
def begin(request, campaign: Campaign, *, provider: str, external_worker_id: str, external_assignment_id: str = "",
          job=None, extra: dict | None = None) -> tuple[Worker, Assignment]:
    """The worker and assignment of this marketplace visit, created on the first visit and found
    again on a reload. Raises ProviderError: "second_identity", "blocked", "bad_worker_id"."""
    external_worker_id = (external_worker_id or "").strip()
    external_assignment_id = (external_assignment_id or "").strip()
    if not external_worker_id or len(external_worker_id) > 100 or len(external_assignment_id) > 100:
        raise ProviderError("The worker id is missing or too long.", code="bad_worker_id")
    key = _session_key(request)
    entries = _entries(request)
    mine = entries.get(str(campaign.pk))
    if mine and (mine.get("provider"), mine.get("external_id")) != (provider, external_worker_id):
        raise ProviderError(
            "This browser already worked on this study under another participant id. The same items cannot be "
            "taken again under a second id; go back to the marketplace and return this study.",
            code="second_identity")
    worker = Worker.objects.filter(provider=provider, external_id=external_worker_id).first()
    others = Assignment.objects.filter(campaign=campaign, session_key=key)
    if worker is not None:
        others = others.exclude(worker=worker)
    if others.exists():
        raise ProviderError(
            "This browser already worked on this study under another participant id. The same items cannot be "
            "taken again under a second id; go back to the marketplace and return this study.",
            code="second_identity")
    if worker is None:
        try:
            with transaction.atomic():
                worker = Worker.objects.create(provider=provider, external_id=external_worker_id)
        except IntegrityError:  # created by a concurrent request
            worker = Worker.objects.get(provider=provider, external_id=external_worker_id)
    membership, _ = Membership.objects.get_or_create(campaign=campaign, worker=worker)
    if worker.blocked or membership.blocked:
        raise ProviderError("You have been blocked from this study.", code="blocked")
    assignments = Assignment.objects.select_for_update().filter(campaign=campaign, worker=worker)
    if external_assignment_id:
        assignment = assignments.filter(provider_assignment_id=external_assignment_id).first()
    else:
        assignment = assignments.order_by("-started_at", "-pk").first()
    if assignment is None:
        assignment = Assignment.objects.create(
            campaign=campaign, worker=worker, provider_assignment_id=external_assignment_id,
            provider_job_id=(job.external_id if job is not None else str((extra or {}).get("job_external_id", ""))[:100]),
            job=job, confirmed=provider == "inhouse", session_key=key)
    elif assignment.session_key != key:
        if assignment.session_key and _session_alive(assignment.session_key):
            raise ProviderError(
                "These ids are already in use in another browser, where this work was started. Continue there; "
                "if that browser is gone, wait for its session to expire or contact the requester.",
                code="other_browser")
        Assignment.objects.filter(pk=assignment.pk).update(session_key=key)
        assignment.session_key = key
    if membership.assignment_id != assignment.pk and assignment.state == Assignment.State.ACTIVE:
        Membership.objects.filter(pk=membership.pk).update(assignment=assignment)
    keep = mine if (mine and mine.get("assignment_id") == assignment.pk) else {}
    entries[str(campaign.pk)] = {**keep, "worker_id": worker.pk, "assignment_id": assignment.pk, "provider": provider,
                                 "external_id": external_worker_id, "extra": _clean_extra(extra)}
    _store(request, entries)
    return worker, assignment


def _session_alive(session_key: str) -> bool:
    from importlib import import_module

    from django.conf import settings

    # load() gives {} for a session that is gone or past its expiry date; a live one that started
    # external work holds this module's key.
    data = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key).load()
    return bool(data.get(SESSION_KEY))


def _clean_extra(extra) -> dict:
    return {str(k)[:40]: str(v)[:200] for k, v in (extra or {}).items()}


def session_info(request, campaign: Campaign) -> dict | None:
    """What ``begin`` stored for the campaign in this session (ids and extra), or None."""
    return _entries(request).get(str(campaign.pk))


def set_flag(request, campaign: Campaign, name: str, value) -> None:
    """Remember something about this visit (e.g. ``consented_at``) next to the ids."""
    entries = _entries(request)
    mine = entries.get(str(campaign.pk))
    if mine is not None:
        entries[str(campaign.pk)] = {**mine, name: value}
        _store(request, entries)


def current(request, campaign: Campaign) -> tuple[Worker, Assignment] | None:
    """The external worker and assignment of this browser session on the campaign, or None."""
    mine = _entries(request).get(str(campaign.pk))
    if not mine or not request.session.session_key:
        return None
    assignment = (Assignment.objects.select_related("worker")
                  .filter(pk=mine.get("assignment_id"), campaign=campaign, worker_id=mine.get("worker_id"),
                          session_key=request.session.session_key).first())
    if assignment is None:
        return None
    return assignment.worker, assignment


def quota_left(campaign: Campaign, assignment: Assignment) -> int | None:
    """Tasks this assignment may still do (``provider_config["tasks_per_assignment"]``; training
    and qualification items do not count), or None when unlimited."""
    try:
        quota = int((campaign.provider_config or {}).get("tasks_per_assignment") or 0)
    except (TypeError, ValueError):
        quota = 0
    if quota <= 0:
        return None
    done = Vote.objects.filter(assignment=assignment, role__in=(Task.Role.REAL, Task.Role.GOLD)).count()
    return max(quota - done, 0)


def end(request, campaign: Campaign) -> None:
    """Forget the campaign in this session (the assignment keeps its session key, so a second id
    from this browser is still refused)."""
    entries = _entries(request)
    if entries.pop(str(campaign.pk), None) is not None:
        _store(request, entries)


__all__ = ["begin", "ensure_session", "current", "set_flag", "quota_left", "end", "session_info", "SESSION_KEY"]
