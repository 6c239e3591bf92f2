"""Fixtures for campaign tests: a small collection of images with real alt-text captions (the
seed papers' examples), a curator, annotators, and campaign factories."""
import pytest
from django.contrib.auth.models import Group

from annotation import services
from annotation.models import Campaign, ProviderJob
from annotation.routing import worker_for_user
from annotation.tasks_providers import provider_publish
from captionlab import roles
from curation.models import Caption, Collection, Image

from .fake_mturk import FakeMTurk

# Alt-texts from seed 002 (Conceptual Captions, Table 1 / Figure 1) and comments from seed 000.
TEXTS = [
    "Harrison Ford attends the premiere of the film in Los Angeles.",
    "actor attends the premiere of the film",
    "Trees in the snow on a cold winter morning.",
    "A big fluffy dog running on the beach at sunset.",
    "the rusty tractor against the golden wheat field",
    "great shot",
    "nice colors",
    "The blue door contrasts with the white wall.",
    "pop artist performs at the festival in a city",
    "a small boat in the harbour at dawn",
    "two children play in the park near a fountain",
    "an old castle on a hill under a cloudy sky",
]


def make_collection(name="Campaign photos", n=12, captions_per_image=1):
    collection = Collection.objects.create(name=name, source_kind=Collection.SourceKind.WEB_ALT_TEXT)
    images = []
    for i in range(n):
        image = Image.objects.create(collection=collection, sha256=f"{i:064x}", width=640, height=480,
                                     format="JPEG", external_id=f"img-{i}", status=Image.Status.READY)
        images.append(image)
        for j in range(captions_per_image):
            text = TEXTS[(i + j) % len(TEXTS)] + ("" if j == 0 else f" (variant {j})")
            Caption.objects.create(image=image, text=text, origin=Caption.Origin.ALT_TEXT, source=f"s{j}")
    return collection


def make_annotators(django_user_model, n, prefix="ann"):
    group, _ = Group.objects.get_or_create(name=roles.ANNOTATOR)
    users = []
    for i in range(n):
        user = django_user_model.objects.create_user(username=f"{prefix}{i}", password=f"{prefix}{i}-pw-123")
        user.groups.add(group)
        users.append(user)
    return users


@pytest.fixture
def collection(db):
    return make_collection()


@pytest.fixture
def make_campaign(db, alice):
    def factory(kind="fluency", *, collection=None, members=(), status="running", selection=None, **fields):
        collection = collection or make_collection(name=f"photos for {kind} {Collection.objects.count()}")
        sel = {"collection": collection.pk, **(selection or {})}
        return services.campaign_create(name=fields.pop("name", f"{kind} campaign {collection.pk}"), kind=kind,
                                        selection=sel, user=alice, members=members, status=status, **fields)

    return factory


@pytest.fixture
def bob_worker(bob):
    return worker_for_user(bob)


@pytest.fixture
def verifiers(django_user_model):
    """Three annotators of a verify-rewrite campaign."""
    return make_annotators(django_user_model, 3, prefix="verifier")


@pytest.fixture
def no_broker(monkeypatch):
    """Aggregation is not scheduled on a broker: the test aggregates when it wants to."""
    monkeypatch.setattr("annotation.tasks.schedule_aggregation", lambda campaign_id: None)


# The MTurk tests' fixtures (test_mturk_sync.py, test_mturk_pages.py, test_mturk_frame.py, test_quality_rules.py):
# the local MTurk server, an MTurk campaign of four tasks, and that campaign published.


@pytest.fixture
def fake(settings, monkeypatch):
    server = FakeMTurk().start()
    settings.MTURK_ENDPOINT_URL = server.url
    settings.MTURK_BACKOFF_SECONDS = 0.001
    settings.PUBLIC_BASE_URL = "https://captions.example.org"
    settings.MTURK_ALLOW_LOCAL_SUBMIT = True
    settings.PROVIDER_CONFIRM_GRACE_SECONDS = 0
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTESTING")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-real-secret")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield server
    server.stop()



@pytest.fixture
def campaign(make_campaign):
    c = make_campaign("fluency", status="draft")
    keep = list(c.tasks.order_by("position").values_list("pk", flat=True)[:4])
    c.tasks.exclude(pk__in=keep).delete()
    c.tasks.update(votes_required=1)
    Campaign.objects.filter(pk=c.pk).update(
        backend="mturk", reward_cents=10, budget_cents=1000, votes_per_item=1,
        provider_config={"tasks_per_assignment": 2, "max_assignments": 2,
                         "qualifications": {"approval_rate": 95, "locales": ["US"]},
                         "review": {"min_seconds_per_task": 1, "bonus_cents": 5, "approve_feedback": "Thank you!",
                                    "reject_feedback": "Too fast."}})
    c.refresh_from_db()
    return c



@pytest.fixture
def published(campaign, fake, eager_celery):
    assert provider_publish.delay(campaign.pk).get()["state"] == "done"
    campaign.refresh_from_db()
    return campaign, ProviderJob.objects.filter(campaign=campaign).order_by("pk").first()
