"""A selection larger than a campaign takes is never cut silently: Marta's fluency campaign over a collection with
more captions than MAX_TASKS is refused with the count and the way to sample, and with a sample it is drawn (with
its seed) from the whole selection, not from its first MAX_TASKS rows. Here MAX_TASKS is 5 and the collection 12."""
import random

import pytest

from annotation import services
from annotation.models import Task
from curation.models import Caption, Image

from .conftest import make_collection

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_cap(monkeypatch):
    monkeypatch.setattr(services, "MAX_TASKS", 5)


def test_a_selection_over_the_cap_without_a_sample_is_refused_with_its_size(small_cap, alice):
    collection = make_collection("harbour captions")
    with pytest.raises(services.CampaignError) as refused:
        services.campaign_create(name="fluency all", kind="fluency", selection={"collection": collection.pk},
                                 user=alice)
    assert refused.value.code == "too_many" and refused.value.field == "sample"
    assert "12 captions, more than the 5 tasks" in refused.value.message and "--sample" in refused.value.message
    assert not Task.objects.exists()


def test_a_sample_is_drawn_from_the_whole_selection_with_its_seed(small_cap, alice):
    collection = make_collection("harbour captions")
    ordered = list(Caption.objects.filter(image__collection=collection).order_by("pk").values_list("pk", flat=True))
    campaign = services.campaign_create(name="fluency sample", kind="fluency", user=alice,
                                        selection={"collection": collection.pk, "sample": 4, "seed": 7})
    drawn = sorted(Task.objects.filter(campaign=campaign).values_list("caption_id", flat=True))
    assert drawn == sorted(ordered[i] for i in random.Random(7).sample(range(12), 4))
    assert max(drawn) > ordered[4]  # from beyond the first five: the whole selection, not its head
    with pytest.raises(services.CampaignError, match="between 1 and 5"):
        services.campaign_create(name="too big a sample", kind="fluency", user=alice,
                                 selection={"collection": collection.pk, "sample": 6})


def test_a_selection_within_the_cap_makes_every_task_and_write_campaigns_count_images(small_cap, alice):
    collection = make_collection("five photos", n=5)
    campaign = services.campaign_create(name="fluency five", kind="fluency", user=alice,
                                        selection={"collection": collection.pk})
    assert Task.objects.filter(campaign=campaign).count() == 5
    bigger = make_collection("seven photos", n=7)
    with pytest.raises(services.CampaignError, match="7 images"):
        services.campaign_create(name="write seven", kind="write", user=alice, selection={"collection": bigger.pk})
    assert Image.objects.filter(collection=bigger).count() == 7
