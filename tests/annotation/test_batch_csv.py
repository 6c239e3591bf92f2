"""MTurk batch results CSV: import with awkward content, malformed rows reported by line with the
good rows imported, idempotent re-import, and export then import into a new campaign."""
import csv
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from annotation import batch_csv
from annotation.models import Assignment, Caption, Vote, Worker
from curation.models import Image

from .conftest import make_collection

pytestmark = pytest.mark.django_db

HEADER = ["HITId", "HITTypeId", "AssignmentId", "WorkerId", "AssignmentStatus", "AcceptTime", "SubmitTime",
          "WorkTimeInSeconds", "Input.image_url", "Answer.caption", "Answer.comment"]
AWKWARD = "Café crème — 東京, \"quoted\", and\na second line"


def photos(collection):
    images = list(Image.objects.filter(collection=collection).order_by("pk"))
    for i, image in enumerate(images):
        image.source_url = f"https://example.org/photos/{i}.jpg"
        image.save(update_fields=["source_url"])
    return images


def batch(rows) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(HEADER)
    writer.writerows(rows)
    return out.getvalue()


def row(hit, assignment, worker, status, image_no, caption, comment="", seconds="42"):
    return [hit, "TYPE1", assignment, worker, status, "Mon May 04 10:00:00 PDT 2026", "Mon May 04 10:02:00 PDT 2026",
            seconds, f"https://example.org/photos/{image_no}.jpg", caption, comment]


def test_import_with_awkward_content_round_trips(make_campaign):
    collection = make_collection(name="batch photos")
    photos(collection)
    campaign = make_campaign("write", collection=collection, votes_per_item=2, text_max_chars=300)
    text = batch([
        row("H1", "A1", "WORKER1", "Approved", 0, "A dog on a beach, running; \"happy\"\nand wet", AWKWARD),
        row("H1", "A2", "WORKER2", "Submitted", 0, "Café crème — 東京 at dawn, two cups"),
        row("H2", "A3", "WORKER1", "Rejected", 1, "spam spam spam spam"),
    ])
    report = batch_csv.import_batch(campaign, text)
    assert report.problems == [] and (report.imported, report.captions, report.workers) == (3, 3, 2)
    votes = {v.worker.external_id + v.assignment.provider_assignment_id: v
             for v in Vote.objects.select_related("worker", "assignment", "caption")}
    v1 = votes["WORKER1A1"]
    assert v1.value["text"] == 'A dog on a beach, running; "happy" and wet'
    assert v1.value["answers"]["comment"] == AWKWARD and v1.seconds == 42
    assert v1.caption.text == v1.value["text"] and v1.caption.origin == Caption.Origin.CROWD
    assert votes["WORKER2A2"].caption.text == "Café crème — 東京 at dawn, two cups"
    assert votes["WORKER1A3"].quarantined and not v1.quarantined
    assert Worker.objects.filter(provider="mturk").count() == 2
    assert Assignment.objects.get(provider_assignment_id="A1").state == "approved"
    task0 = campaign.tasks.get(image__source_url="https://example.org/photos/0.jpg")
    assert task0.votes_count == 2 and task0.status == "done"
    assert campaign.tasks.get(image__source_url="https://example.org/photos/1.jpg").votes_count == 0

    again = batch_csv.import_batch(campaign, text)  # the same file twice adds nothing
    assert (again.imported, again.unchanged) == (0, 3) and Vote.objects.count() == 3

    exported = batch_csv.export_batch(campaign)
    rows = list(csv.DictReader(io.StringIO(exported, newline="")))
    by_assignment = {r["AssignmentId"]: r for r in rows}
    assert by_assignment["A1"]["Answer.comment"] == AWKWARD
    assert by_assignment["A1"]["Answer.caption"] == "A dog on a beach, running; \"happy\"\nand wet"
    assert by_assignment["A3"]["AssignmentStatus"] == "Rejected" and by_assignment["A1"]["WorkerId"] == "WORKER1"


def test_malformed_rows_are_reported_by_line_and_good_rows_imported(make_campaign):
    collection = make_collection(name="batch photos 2")
    photos(collection)
    campaign = make_campaign("write", collection=collection, votes_per_item=3)
    good = batch([row("H1", "A1", "W1", "Submitted", 0, "A multi\nline caption about the dog")])
    text = (good
            + "H2,T,A2,W2,Submitted,,,10,https://example.org/photos/1.jpg,too few fields\r\n"   # line 4
            + "H3,T,A3,,Submitted,,,10,https://example.org/photos/1.jpg,no worker id here,\r\n"  # line 5
            + "H4,T,A4,W4,Submitted,,,10,https://example.org/photos/99.jpg,unknown image here,\r\n"  # line 6
            + "H5,T,A5,W5,Submitted,,,10,https://example.org/photos/2.jpg,ab,\r\n"  # line 7: too short
            + 'H6,T,A6,W6,Submitted,,,10,https://example.org/photos/3.jpg,"broken "quote here,\r\n'  # line 8
            + "H7,T,A7,W7,Approved,,,10,https://example.org/photos/4.jpg,A cat sleeps on a warm windowsill,\r\n")
    report = batch_csv.import_batch(campaign, text)
    lines = [line for line, _ in report.problems]
    assert lines == [4, 5, 6, 7, 8], report.problems
    assert "fields" in report.problems[0][1] and "WorkerId" in report.problems[1][1]
    assert "No image" in report.problems[2][1] and "too short" in report.problems[3][1]
    assert report.imported == 2
    assert sorted(Vote.objects.values_list("worker__external_id", flat=True)) == ["W1", "W7"]


def test_bad_headers_are_refused_with_a_message(make_campaign):
    campaign = make_campaign("write")
    with pytest.raises(batch_csv.BatchError, match="AssignmentId"):
        batch_csv.import_batch(campaign, "a,b,c\n1,2,3\n")
    with pytest.raises(batch_csv.BatchError, match="empty"):
        batch_csv.import_batch(campaign, "")
    with pytest.raises(batch_csv.BatchError, match="Input"):
        batch_csv.import_batch(campaign, "AssignmentId,WorkerId,Answer.caption\nA,W,x\n")


def test_export_then_import_into_a_new_campaign_gives_the_same_votes(make_campaign):
    collection = make_collection(name="batch photos 3")
    photos(collection)
    source = make_campaign("fluency", collection=collection, votes_per_item=2, name="source")
    text = ("HITId,HITTypeId,AssignmentId,WorkerId,AssignmentStatus,AcceptTime,SubmitTime,WorkTimeInSeconds,"
            "Input.image_url,Input.caption,Answer.label.fluent,Answer.label.not_fluent,Answer.label.difficult,"
            "Answer.note\n")
    images = list(Image.objects.filter(collection=collection).order_by("pk"))
    notes = ["ok", "Café, “quotes” — 東京\nline two", ""]
    for i, image in enumerate(images[:3]):
        for w, pick in (("WA", "fluent"), ("WB", "not_fluent")):
            cells = ["true" if pick == c else "false" for c in ("fluent", "not_fluent", "difficult")]
            caption = image.captions.order_by("pk").first().text
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerow(
                [f"H{i}", "T", f"{w}-{i}", w, "Approved", "", "", "30", image.source_url, caption, *cells, notes[i]])
            text += out.getvalue()
    report = batch_csv.import_batch(source, text, match="caption")
    assert report.problems == [] and report.imported == 6

    exported = batch_csv.export_batch(source)
    target = make_campaign("fluency", collection=collection, votes_per_item=2, name="target")
    report = batch_csv.import_batch(target, exported)
    assert report.problems == [] and report.imported == 6

    def votes(campaign):
        return sorted((v.task.image_id, v.task.caption_id, v.worker.external_id, v.value["label"],
                       v.value["answers"].get("note", ""), v.quarantined)
                      for v in Vote.objects.filter(campaign=campaign).select_related("task", "worker"))

    assert votes(source) == votes(target) and len(votes(target)) == 6
    assert any("東京\nline two" in v[4] for v in votes(target))


def test_batch_pages(make_campaign, alice_client, bob):
    collection = make_collection(name="batch photos 4")
    photos(collection)
    campaign = make_campaign("write", collection=collection, votes_per_item=2)
    text = batch([row("H1", "A1", "W1", "Approved", 0, "A dog runs on the sand at sunset"),
                  ["H2", "T", "A2", "W2"]])
    upload = SimpleUploadedFile("batch.csv", text.encode(), content_type="text/csv")
    response = alice_client.post(reverse("batch-import", args=[campaign.pk]), {"file": upload})
    body = response.content.decode()
    assert response.status_code == 200 and "1 imported" in body and "line 3" in body
    export = alice_client.get(reverse("batch-export", args=[campaign.pk]))
    assert export.status_code == 200 and "A dog runs on the sand at sunset" in export.content.decode()
    other = Client()
    other.force_login(bob)
    assert other.get(reverse("batch-export", args=[campaign.pk])).status_code == 403
    upload = SimpleUploadedFile("batch.csv", b"nothing,here\n", content_type="text/csv")
    response = alice_client.post(reverse("batch-import", args=[campaign.pk]), {"file": upload})
    assert response.status_code == 400 and "AssignmentId" in response.content.decode()
