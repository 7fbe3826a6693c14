"""The demo's e-mail settings on every Django it runs on.

Django 6.1 configures mailers with ``MAILERS`` and deprecates ``EMAIL_BACKEND`` and
``EMAIL_FILE_PATH`` (it refuses both kinds together); Django 5.2 and 6.0 know only the
latter. Settings and tests build theirs with ``mail_settings()``, and the pages that show
the file backend's folder read it with ``default_mailer()``.
"""

from pathlib import Path
from typing import Any

import django
from django.conf import settings

FILE_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
SMTP_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
HAS_MAILERS = django.VERSION >= (6, 1)


def mail_settings(backend: str, **options: Any) -> dict[str, Any]:
    """The settings that send the default mailer's e-mail through ``backend`` with
    ``options`` (``file_path``, ``host``, ``port``...: MAILERS' OPTIONS, which older
    Django reads as EMAIL_FILE_PATH, EMAIL_HOST, EMAIL_PORT...)."""
    options = {name: str(value) if isinstance(value, Path) else value
               for name, value in options.items()}  # fmt: skip
    if HAS_MAILERS:
        return {"MAILERS": {"default": {"BACKEND": backend, "OPTIONS": options}}}
    return {"EMAIL_BACKEND": backend, **{f"EMAIL_{n.upper()}": v for n, v in options.items()}}


def default_mailer() -> tuple[str, str | None]:
    """The default mailer's backend (dotted path) and its file folder (None if it has none)."""
    if hasattr(settings, "MAILERS"):
        config = settings.MAILERS.get("default", {})
        return config.get("BACKEND", SMTP_BACKEND), config.get("OPTIONS", {}).get("file_path")
    folder = getattr(settings, "EMAIL_FILE_PATH", None)
    return settings.EMAIL_BACKEND, None if folder is None else str(folder)
