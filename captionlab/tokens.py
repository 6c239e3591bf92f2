"""API tokens follow their user's credentials: a password change or a deactivation deletes the user's
token, so the old key is refused at once and the next ``/api/auth/token/`` call issues a new one.

Connected in CaptionLabConfig.ready() to the user model's saves, the only place every path that changes a
password (the admin, ``changepassword``, ``set_password`` in code) goes through.
"""
from django.contrib.auth.hashers import check_password
from rest_framework.authtoken.models import Token


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
