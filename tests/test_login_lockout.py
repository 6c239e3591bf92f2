"""Login throttling (django-axes, issue 25): after AXES_FAILURE_LIMIT wrong passwords for one username
from one address, the login form and the API token endpoint refuse even the right password with a 429
and a message; an admin unlocks from the admin or with ``manage.py axes_reset``."""
import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
TOKEN = "/api/auth/token/"


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def fail(client, url, username, times):
    """Wrong passwords; the one that reaches the limit is already answered with the lockout."""
    for n in range(1, times + 1):
        status = client.post(url, {"username": username, "password": "not-the-password"}).status_code
        assert status == (429 if n == settings.AXES_FAILURE_LIMIT else 200 if url == LOGIN else 400), n


def test_ten_failures_is_the_default_limit_counted_per_username_and_address():
    assert settings.AXES_FAILURE_LIMIT == 10 and settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]
    assert settings.AXES_COOLOFF_TIME.total_seconds() > 0


def test_the_login_form_locks_out_after_the_limit_even_with_the_right_password_then_unlocks(client, alice):
    fail(client, LOGIN, "alice", settings.AXES_FAILURE_LIMIT - 1)
    assert client.post(LOGIN, {"username": "alice", "password": "alice-pw-123"}).status_code == 302  # not yet
    client.logout()
    fail(client, LOGIN, "alice", settings.AXES_FAILURE_LIMIT)
    response = client.post(LOGIN, {"username": "alice", "password": "alice-pw-123"})
    assert response.status_code == 429 and "Too many failed logins" in response.content.decode()
    assert "_auth_user_id" not in client.session

    call_command("axes_reset", verbosity=0)
    assert client.post(LOGIN, {"username": "alice", "password": "alice-pw-123"}).status_code == 302
    assert client.session["_auth_user_id"] == str(alice.pk)


def test_a_lockout_of_one_username_leaves_the_others_alone(client, alice, bob):
    fail(client, LOGIN, "alice", settings.AXES_FAILURE_LIMIT)
    assert client.post(LOGIN, {"username": "bob", "password": "bob-pw-123"}).status_code == 302


def test_the_token_endpoint_locks_out_too_and_an_admin_unlocks_in_the_admin(client, admin_client, alice):
    fail(client, TOKEN, "alice", settings.AXES_FAILURE_LIMIT)
    response = client.post(TOKEN, {"username": "alice", "password": "alice-pw-123"})
    assert response.status_code == 429 and "Too many failed logins" in response.json()["detail"]

    attempt = AccessAttempt.objects.get(username="alice")
    changelist = reverse("admin:axes_accessattempt_changelist")
    assert "alice" in admin_client.get(changelist).content.decode()
    admin_client.post(changelist, {"action": "delete_selected", "_selected_action": [attempt.pk], "post": "yes"})
    assert not AccessAttempt.objects.filter(username="alice").exists()
    response = client.post(TOKEN, {"username": "alice", "password": "alice-pw-123"})
    assert response.status_code == 200 and response.json()["token"]
