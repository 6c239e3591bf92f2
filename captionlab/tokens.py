"""API tokens follow their user's credentials: a password change or a deactivation deletes the user's
token, so the old key is refused at once and the next ``/api/auth/token/`` call issues a new one.

Connected in CaptionLabConfig.ready() to the user model's saves, the only place every path that changes a
password (the admin, ``changepassword``, ``set_password`` in code) goes through.

Optionally tokens also expire: with ``API_TOKEN_MAX_AGE_DAYS`` > 0 a token older than that is refused
(and deleted) by ``ExpiringTokenAuthentication``, and ``/api/auth/token/`` hands out a fresh one.
"""
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.hashers import check_password
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed


def max_age() -> timedelta | None:
    days = float(settings.API_TOKEN_MAX_AGE_DAYS or 0)
    return timedelta(days=days) if days > 0 else None


def expired(token: Token) -> bool:
    limit = max_age()
    return limit is not None and token.created < timezone.now() - limit


def token_for(user) -> Token:
    """The user's token; a new one when the stored one has expired."""
    token, _created = Token.objects.get_or_create(user=user)
    if expired(token):
        token.delete()
        token = Token.objects.create(user=user)
    return token


class ExpiringTokenAuthentication(TokenAuthentication):
    """DRF's token authentication, refusing tokens older than API_TOKEN_MAX_AGE_DAYS."""

    def authenticate_credentials(self, key):
        user, token = super().authenticate_credentials(key)
        if expired(token):
            token.delete()
            raise AuthenticationFailed(
                f"This API token expired (tokens last {settings.API_TOKEN_MAX_AGE_DAYS:g} days); "
                "get a new one from /api/auth/token/.")
        return user, token


def _credentials_changed(user, old: dict) -> bool:
    if old["is_active"] and not user.is_active:
        return True
    if old["password"] == user.password:
        return False
    # A login may re-hash an unchanged password (a hasher's new iteration count): the raw password
    # set_password() kept still matches the old hash then, and the token must survive it.
    raw = getattr(user, "_password", None)
    return raw is None or not check_password(raw, old["password"])


def note_credential_change(sender, instance, update_fields=None, **kwargs):
    """pre_save: remember whether this save changes the password or deactivates the user."""
    instance._captionlab_rotate_tokens = False
    if instance.pk is None or (update_fields is not None and not {"password", "is_active"} & set(update_fields)):
        return
    old = sender._default_manager.filter(pk=instance.pk).values("password", "is_active").first()
    instance._captionlab_rotate_tokens = old is not None and _credentials_changed(instance, old)


def rotate_tokens(sender, instance, created=False, **kwargs):
    """post_save: the save went through, so the old token goes."""
    if getattr(instance, "_captionlab_rotate_tokens", False):
        Token.objects.filter(user_id=instance.pk).delete()
        instance._captionlab_rotate_tokens = False
