"""MTurk batch results CSV files, in and out (MTurk's requester site and Turkle write the same layout).

Columns: HITId, HITTypeId, AssignmentId, WorkerId, AssignmentStatus, AcceptTime, SubmitTime,
WorkTimeInSeconds, then ``Input.*`` (what the HIT showed) and ``Answer.*`` (what the worker gave).

Import: each row is one answer of one worker on one item. Workers become ``Worker(provider="mturk")``,
assignments ``Assignment`` (keyed by AssignmentId), the item is found by ``Input.image_url``
(the image's source URL), ``Input.external_id`` or ``Input.caption`` (a caption of an image of the
campaign's collection), as the ``match`` argument says, and the answer becomes a ``Vote`` (and a
crowd ``Caption`` in a writing campaign). Every ``Answer.*`` cell is also kept verbatim in
``vote.value["answers"]``, so multi-line text, commas, quotes and any script come back out
unchanged. A rejected assignment's votes are stored quarantined (never counted). A bad row is
reported with its line number and skipped; the good rows are imported. Importing the same file
twice adds nothing.

Export writes a campaign's votes in the same layout, so a batch can go to another tool and come back.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import datetime
from datetime import timezone as dt_timezone

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from captionlab import csv_safe
from curation.models import Image

from .kinds import VoteInvalid
from .models import Assignment, Campaign, Caption, Membership, Task, Vote, Worker

FIXED = ["HITId", "HITTypeId", "AssignmentId", "WorkerId", "AssignmentStatus", "AcceptTime", "SubmitTime",
         "WorkTimeInSeconds"]
STATUS = {"approved": Assignment.State.APPROVED, "rejected": Assignment.State.REJECTED,
          "submitted": Assignment.State.SUBMITTED}
TIME_FORMATS = ("%a %b %d %H:%M:%S %Z %Y", "%a %b %d %H:%M:%S %z %Y", "%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S%z",
                "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S")
MAX_ROWS = 200_000


class BatchError(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass
class BatchReport:
    rows: int = 0
    imported: int = 0
    unchanged: int = 0
    captions: int = 0
    workers: int = 0
    assignments: int = 0
    problems: list = field(default_factory=list)  # (line, message)

    def add(self, line: int, message: str) -> None:
        self.problems.append((line, message))


def _answer_field(campaign: Campaign) -> str:
    kind = campaign.kind_spec
    if kind.written:
        return "caption"
    return kind.label_field


def _parse_time(text: str):
    text = (text or "").strip()
    if not text:
        return None
    for fmt in TIME_FORMATS:
        try:
            value = datetime.strptime(text.replace("PDT", "-0700").replace("PST", "-0800"), fmt)
        except ValueError:
            continue
        return value if value.tzinfo else value.replace(tzinfo=dt_timezone.utc)
    return None


def _rows(text: str):
    """(first line number, row) of each record; a record that cannot be parsed gives (line, None, why)."""
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff"), newline=""), strict=True)
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield start, None, f"the CSV is malformed here ({exc})"
            start = reader.line_num + 1
            continue
        yield start, row, ""
        start = reader.line_num + 1


def _find_image(campaign: Campaign, inputs: dict, match: str, cache: dict):
    key = (match, inputs.get(match, ""))
    if key in cache:
        return cache[key]
    value = inputs.get(match, "").strip()
    images = Image.objects.filter(collection_id=campaign.collection_id)
    image = caption = None
    if value:
        if match == "image_url":
            image = images.filter(source_url=value).first()
        elif match == "external_id":
            image = images.filter(external_id=value).first()
        elif match == "caption":
            caption = Caption.objects.filter(image__collection_id=campaign.collection_id, text=value).order_by("pk").first()
            image = caption.image if caption else None
    cache[key] = (image, caption)
    return image, caption


def _task_for(campaign: Campaign, image, caption) -> Task:
    target = campaign.kind_spec.target
    tasks = campaign.tasks.filter(image=image, role__in=(Task.Role.REAL, Task.Role.GOLD))
    if target == "caption" and caption is not None:
        tasks = tasks.filter(caption=caption)
    task = tasks.order_by("pk").first()
    if task is not None:
        return task
    if target == "caption" and caption is None:
        caption = image.captions.order_by("pk").first()
    position = (campaign.tasks.order_by("-position").values_list("position", flat=True).first() or 0) + 1
    return Task.objects.create(campaign=campaign, image=image, caption=caption if target == "caption" else None,
                               votes_required=campaign.votes_per_item, position=position, priority=float(position))


def _value(campaign: Campaign, answers: dict, answer_column: str):
    """The raw vote value from the Answer.* cells: the answer column itself, or MTurk's radio
    layout ``Answer.<name>.<value> = true``."""
    if answer_column in answers and answers[answer_column] != "":
        return answers[answer_column]
    prefix = answer_column + "."
    picked = [k[len(prefix):] for k, v in answers.items() if k.startswith(prefix) and v.strip().lower() in ("true", "on", "1")]
    if len(picked) == 1:
        return picked[0]
    if len(picked) > 1:
        raise VoteInvalid(f"More than one answer is checked for {answer_column}: {', '.join(picked)}.")
    return None


def import_batch(campaign: Campaign, text: str, *, match: str | None = None, image_column: str | None = None,  # noqa: PLR0915
                 answer_column: str | None = None) -> BatchReport:
    """Import an MTurk / Turkle batch results CSV into ``campaign``; see the module's docstring."""
    kind = campaign.kind_spec
    if kind.target == "candidates":
        raise BatchError("Batch files hold one answer per item; a campaign that rates several captions at once "
                         "cannot take them.")
    report = BatchReport()
    records = _rows(text)
    first = next(records, None)
    if first is None or first[1] is None:
        raise BatchError("The file is empty or its header cannot be read.")
    header = [h.strip() for h in first[1]]
    missing = [c for c in ("AssignmentId", "WorkerId") if c not in header]
    if missing:
        raise BatchError(f"The header has no {', '.join(missing)} column: is this an MTurk batch results file?")
    inputs_cols = [h[len("Input."):] for h in header if h.startswith("Input.")]
    if image_column:
        match = image_column[len("Input."):] if image_column.startswith("Input.") else image_column
    if not match:
        match = next((m for m in ("image_url", "external_id", "caption") if m in inputs_cols), None)
    if match not in inputs_cols:
        raise BatchError(f"No Input.{match or 'image_url'} column to find the items by (columns: "
                         f"{', '.join('Input.' + c for c in inputs_cols) or 'none'}).")
    answer_column = (answer_column or _answer_field(campaign)).removeprefix("Answer.")
    workers_seen, assignments_seen, cache = set(), set(), {}
    for line, row, problem in records:
        if problem:
            report.add(line, problem)
            continue
        if not any(cell.strip() for cell in row):
            continue
        report.rows += 1
        if report.rows > MAX_ROWS:
            report.add(line, f"More than {MAX_ROWS} rows: the rest was not read.")
            break
        if len(row) != len(header):
            report.add(line, f"{len(row)} fields where the header has {len(header)}.")
            continue
        cells = dict(zip(header, row))
        worker_id, assignment_id = cells["WorkerId"].strip(), cells["AssignmentId"].strip()
        if not worker_id or not assignment_id or len(worker_id) > 100 or len(assignment_id) > 100:
            report.add(line, "WorkerId or AssignmentId is empty or too long.")
            continue
        inputs = {h[len("Input."):]: v for h, v in cells.items() if h.startswith("Input.")}
        answers = {h[len("Answer."):]: v for h, v in cells.items() if h.startswith("Answer.")}
        image, caption = _find_image(campaign, inputs, match, cache)
        if image is None:
            report.add(line, f"No image of the collection matches Input.{match} = {inputs.get(match, '')[:80]!r}.")
            continue
        try:
            raw = _value(campaign, answers, answer_column)
            if raw is None:
                raise VoteInvalid(f"No answer in Answer.{answer_column}.")
            outcome = _store_row(campaign, kind, cells, image, caption, raw, answers, worker_id, assignment_id)
        except VoteInvalid as exc:
            report.add(line, str(exc))
            continue
        workers_seen.add(worker_id)
        assignments_seen.add(assignment_id)
        if outcome == "unchanged":
            report.unchanged += 1
        else:
            report.imported += 1
            report.captions += outcome == "caption"
    report.workers, report.assignments = len(workers_seen), len(assignments_seen)
    return report


def _store_row(campaign, kind, cells, image, caption, raw, answers, worker_id, assignment_id) -> str:
    status = STATUS.get(cells.get("AssignmentStatus", "").strip().lower(), Assignment.State.SUBMITTED)
    try:
        seconds = max(float(cells.get("WorkTimeInSeconds") or 0), 0.0)
    except ValueError:
        seconds = 0.0
    with transaction.atomic():
        worker, _ = Worker.objects.get_or_create(provider=Worker.Provider.MTURK, external_id=worker_id)
        Membership.objects.get_or_create(campaign=campaign, worker=worker)
        assignment = Assignment.objects.filter(campaign=campaign, worker=worker,
                                               provider_assignment_id=assignment_id).first()
        if assignment is None:
            assignment = Assignment.objects.create(
                campaign=campaign, worker=worker, provider_assignment_id=assignment_id, state=status,
                provider_job_id=cells.get("HITId", "").strip()[:100], confirmed=status != Assignment.State.REJECTED,
                submitted_at=_parse_time(cells.get("SubmitTime", "")))
            accept = _parse_time(cells.get("AcceptTime", ""))
            if accept:
                Assignment.objects.filter(pk=assignment.pk).update(started_at=accept)
        task = Task.objects.select_for_update().get(pk=_task_for(campaign, image, caption).pk)
        task.campaign = campaign
        if Vote.objects.filter(task=task, worker=worker).exists():
            return "unchanged"
        # Written captions: the work is done and paid for on MTurk; the curator judges it in the review,
        # so the annotator-facing text checks (markup, gibberish, language) do not refuse it here.
        clean = (kind.validate({"text": raw}, task, text_checks=False) if kind.target == "image"
                 else kind.validate(raw, task))
        value = {**clean, "answers": answers}
        new_caption = None
        if kind.target == "image" and task.role == Task.Role.REAL:
            new_caption, _ = Caption.objects.get_or_create(
                image=image, text=clean["text"], source=f"mturk batch {worker_id}"[:300],
                defaults={"origin": Caption.Origin.CROWD, "language": campaign.text_language,
                          "metadata": {"campaign": campaign.pk, "worker": worker.pk, "assignment": assignment_id}})
        quarantined = assignment.state == Assignment.State.REJECTED or not assignment.confirmed
        try:
            with transaction.atomic():
                Vote.objects.create(task=task, worker=worker, campaign=campaign, assignment=assignment, role=task.role,
                                    value=value, seconds=seconds, caption=new_caption, quarantined=quarantined)
        except IntegrityError:
            return "unchanged"
        if not quarantined and task.role == Task.Role.REAL:
            votes = task.votes_count + 1
            update = {"votes_count": votes}
            if votes >= task.votes_required:
                update.update(status=Task.Status.DONE, done_at=task.done_at or timezone.now())
            Task.objects.filter(pk=task.pk).update(**update)
        Membership.objects.filter(campaign=campaign, worker=worker).update(votes=F("votes") + 1,
                                                                           seconds=F("seconds") + seconds)
        Assignment.objects.filter(pk=assignment.pk).update(tasks_done=F("tasks_done") + 1,
                                                           seconds=F("seconds") + seconds)
    return "caption" if new_caption is not None else "vote"


def _when(value) -> str:
    return value.astimezone(dt_timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y") if value else ""


def export_batch(campaign: Campaign) -> str:
    """The campaign's votes on real items as an MTurk batch results CSV."""
    field_name = _answer_field(campaign)
    votes = list(Vote.objects.filter(campaign=campaign, role=Task.Role.REAL)
                 .select_related("task__image", "task__caption", "worker", "assignment", "assignment__job")
                 .order_by("pk"))
    extra = []
    for vote in votes:
        for key in (vote.value or {}).get("answers", {}) or {}:
            if key != field_name and key not in extra and not key.startswith(field_name + "."):
                extra.append(key)
    header = FIXED + ["Input.image_url", "Input.external_id", "Input.caption", f"Answer.{field_name}"] + \
        [f"Answer.{k}" for k in extra]
    out = io.StringIO()
    writer = csv_safe.writer(out, lineterminator="\r\n")  # annotators write these answers
    writer.writerow(header)
    for vote in votes:
        a, task, worker = vote.assignment, vote.task, vote.worker
        value = vote.value or {}
        answers = value.get("answers") or {}
        if field_name == "caption":
            main = answers.get("caption", value.get("text", ""))
        elif field_name == "score":
            main = answers.get("score", value.get("score", ""))
        else:
            main = answers.get("label", value.get("label", ""))
        worker_id = worker.external_id or f"inhouse-{worker.pk}"
        status = {Assignment.State.APPROVED: "Approved", Assignment.State.REJECTED: "Rejected"}.get(
            a.state if a else "", "Submitted")
        hit = (a.job.external_id if a and a.job_id and a.job.external_id else (a.provider_job_id if a else "")) \
            or f"captionlab-task-{task.pk}"
        row = [hit, (a.job.group_id if a and a.job_id else "") or f"captionlab-campaign-{campaign.pk}",
               (a.provider_assignment_id if a else "") or f"captionlab-{a.pk if a else vote.pk}", worker_id, status,
               _when(a.started_at if a else None), _when(a.submitted_at if a else vote.created_at),
               str(int(round(vote.seconds))), task.image.source_url, task.image.external_id,
               task.caption.text if task.caption_id else "", str(main)]
        row += [str(answers.get(k, "")) for k in extra]
        writer.writerow(row)
    return out.getvalue()


__all__ = ["import_batch", "export_batch", "BatchError", "BatchReport"]
