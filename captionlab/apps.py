from django.apps import AppConfig


class CaptionLabConfig(AppConfig):
    name = "captionlab"
    verbose_name = "CaptionLab"

    def ready(self):
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_save, pre_save

        from . import tokens

        user_model = get_user_model()
        pre_save.connect(tokens.note_credential_change, sender=user_model, dispatch_uid="captionlab-token-note")
        post_save.connect(tokens.rotate_tokens, sender=user_model, dispatch_uid="captionlab-token-rotate")
