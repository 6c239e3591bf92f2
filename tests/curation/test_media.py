"""Serving image files: verified types inline with nosniff, everything else as an attachment."""
import pytest
from django.core.files.base import ContentFile

from curation.models import Collection, Image

from .helpers import png_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture
def image():
    collection = Collection.objects.create(name="media")
    img = Image(collection=collection, format="PNG", sha256="a" * 64, width=64, height=48)
    img.file.save("a.png", ContentFile(png_bytes()), save=False)
    img.save()
    return img


def test_a_verified_image_is_served_inline_with_its_type_and_nosniff(client, alice, image):
    client.force_login(alice)
    response = client.get(f"/media/images/{image.pk}/file")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/png"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert not response.get("Content-Disposition", "").startswith("attachment")
    assert b"".join(response.streaming_content)[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_file_of_an_unverified_type_is_sent_as_an_attachment_never_as_html_or_svg(client, alice):
    collection = Collection.objects.create(name="odd")
    img = Image(collection=collection, format="SVG", sha256="b" * 64)
    img.file.save("x.svg", ContentFile(b"<svg onload=alert(1)>"), save=False)
    img.save()
    client.force_login(alice)
    response = client.get(f"/media/images/{img.pk}/file")
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"].startswith("attachment")
    assert response["X-Content-Type-Options"] == "nosniff"


def test_anonymous_users_and_users_without_a_role_get_no_image(client, dave, image):
    assert client.get(f"/media/images/{image.pk}/file").status_code == 302
    client.force_login(dave)
    assert client.get(f"/media/images/{image.pk}/file").status_code == 403


def _campaign_holding(image, name, **fields):
    from annotation.models import Campaign, Task

    campaign = Campaign.objects.create(name=name, kind="fluency", collection=image.collection, **fields)
    Task.objects.create(campaign=campaign, image=image)
    return campaign


def test_an_annotator_sees_an_image_only_through_a_campaign_they_work_in(client, bob, image):
    from annotation.models import Membership
    from annotation.routing import worker_for_user

    client.force_login(bob)
    assert client.get(f"/media/images/{image.pk}/file").status_code == 403  # in no campaign at all
    campaign = _campaign_holding(image, "rate these")
    assert client.get(f"/media/images/{image.pk}/thumb").status_code == 403  # not a member of it
    membership = Membership.objects.create(campaign=campaign, worker=worker_for_user(bob))
    assert client.get(f"/media/images/{image.pk}/file").status_code == 200
    membership.blocked = True
    membership.save(update_fields=["blocked"])
    assert client.get(f"/media/images/{image.pk}/file").status_code == 403


def test_a_running_campaign_open_to_every_annotator_shows_its_images_to_any_annotator(client, bob, image):
    from annotation.models import Campaign

    client.force_login(bob)
    campaign = _campaign_holding(image, "open one", open_to_all=True)
    assert client.get(f"/media/images/{image.pk}/file").status_code == 403  # still a draft
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.RUNNING)
    assert client.get(f"/media/images/{image.pk}/file").status_code == 200
