"""API tokens follow their user's credentials (issue 25): a password change or a deactivation
refuses the old key; the next token request issues a new one; an unrelated save keeps it."""
import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def token_for(username, password) -> str:
    response = APIClient().post("/api/auth/token/", {"username": username, "password": password})
    assert response.status_code == 200, response.content
    return response.json()["token"]


def collections_with(key):
    return APIClient(HTTP_AUTHORIZATION=f"Token {key}").get("/api/collections/").status_code


def test_the_old_token_is_refused_after_a_password_change(alice):
    old = token_for("alice", "alice-pw-123")
    assert collections_with(old) == 200
    alice.set_password("a-new-long-password-456")
    alice.save()
    assert collections_with(old) in (401, 403)  # "Invalid token."
    new = token_for("alice", "a-new-long-password-456")
    assert new != old and collections_with(new) == 200


def test_deactivation_deletes_the_token(alice):
    token_for("alice", "alice-pw-123")
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    assert not Token.objects.filter(user=alice).exists()


def test_a_login_or_a_re_hash_of_the_same_password_keeps_the_token(alice):
    old = token_for("alice", "alice-pw-123")
    alice.first_name = "Alice"
    alice.save()
    alice.set_password("alice-pw-123")  # what a login does when the hasher's parameters changed
    alice.save(update_fields=["password"])
    assert collections_with(old) == 200
