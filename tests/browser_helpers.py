"""What the browser fixtures (tests/conftest.py) and the browser tests share: the Chromium they drive and
a user with a known password for logging in through the page."""
from pathlib import Path

from django.contrib.auth.models import Group

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


def make_user(django_user_model, username, role):
    user = django_user_model.objects.create_user(username=username, password=f"{username}-pw-123")
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user
