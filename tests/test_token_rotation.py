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


def test_with_a_maximum_age_an_old_token_is_refused_and_a_new_one_issued(alice, settings):
    from datetime import timedelta

    from django.utils import timezone

    settings.API_TOKEN_MAX_AGE_DAYS = 30
    old = token_for("alice", "alice-pw-123")
    assert collections_with(old) == 200
    Token.objects.filter(key=old).update(created=timezone.now() - timedelta(days=31))
    response = APIClient(HTTP_AUTHORIZATION=f"Token {old}").get("/api/collections/")
    assert response.status_code in (401, 403) and "expired" in response.json()["detail"]
    assert not Token.objects.filter(key=old).exists()
    new = token_for("alice", "alice-pw-123")
    assert new != old and collections_with(new) == 200


def test_without_a_maximum_age_tokens_do_not_expire(alice, settings):
    from datetime import timedelta

    from django.utils import timezone

    settings.API_TOKEN_MAX_AGE_DAYS = 0
    key = token_for("alice", "alice-pw-123")
    Token.objects.filter(key=key).update(created=timezone.now() - timedelta(days=3650))
    assert collections_with(key) == 200
    assert token_for("alice", "alice-pw-123") == key
