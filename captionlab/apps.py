from django.apps import AppConfig


class CaptionLabConfig(AppConfig):
    name = "captionlab"
    verbose_name = "CaptionLab"

    def ready(self):
        from django.contrib.auth import get_user_model
        from django.core import checks
        from django.db.models.signals import post_save, pre_save

        from . import tokens

        checks.register(http_only_mode, checks.Tags.security, deploy=True)
        user_model = get_user_model()
        pre_save.connect(tokens.note_credential_change, sender=user_model, dispatch_uid="captionlab-token-note")
        post_save.connect(tokens.rotate_tokens, sender=user_model, dispatch_uid="captionlab-token-rotate")


def http_only_mode(app_configs=None, **kwargs):
    """The production profile in its explicit HTTP-only local mode (CAPTIONLAB_HTTP_ONLY=true)."""
    from django.conf import settings
    from django.core import checks

    if not settings.HTTP_ONLY:
        return []
    return [checks.Warning(
        "CAPTIONLAB_HTTP_ONLY=true: cookies are sent without Secure and there is no HTTPS redirect or HSTS, so "
        "passwords and sessions travel in clear.",
        hint="Only for a trusted local network. To serve the internet, put a TLS proxy in front and set "
             "CAPTIONLAB_HTTP_ONLY=false (docs/admin.md, 'Running behind TLS').",
        id="captionlab.W001")]
