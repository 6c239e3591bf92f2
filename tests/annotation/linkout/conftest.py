"""The link-out tests' campaign (test_linkout.py and test_linkout_replay.py)."""
import pytest

from annotation.models import Task
from annotation.services import set_gold

CONSENT = "You agree that your **ratings** are stored with your participant id."
URL = "https://app.prolific.com/submissions/complete?cc={code}"


@pytest.fixture
def campaign(make_campaign, settings):
    settings.LINKOUT_FEE_RATE = 0.5
    c = make_campaign("fluency", backend="linkout", status="draft", votes_per_item=2, reward_cents=150,
                      budget_cents=1000, name="Prolific fluency")
    c.provider_config = {"consent": CONSENT, "completion_code": "C0DE1234", "completion_url": URL, "places": 3,
                         "tasks_per_assignment": 3}
    c.save()
    training = c.tasks.order_by("position").first()
    set_gold(training, role=Task.Role.TRAINING, value="fluent", feedback="A plain, correct sentence.")
    return c
