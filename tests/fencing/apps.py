from django.apps import AppConfig


class FencingConfig(AppConfig):
    """Test-only app: a model guarded by lock fencing tokens (tables synced, no migrations)."""

    name = "tests.fencing"
    label = "fencing"
    default_auto_field = "django.db.models.BigAutoField"
