"""The app configuration: registers the system checks, starts the embedded server if asked.

Use: ``INSTALLED_APPS = [..., "redisparts_app"]``; RedispartsConfig is the default config.
"""

import logging
import sys

from django.apps import AppConfig

__all__ = [
    "RedispartsConfig",
]

logger = logging.getLogger("redisparts")


class RedispartsConfig(AppConfig):
    name = "redisparts_app"
    verbose_name = "Redis parts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .conf import app_settings

        embedded = app_settings.EMBEDDED
        # rp_embedded manages the server itself: `status` and `stop` must see it as it is.
        managing_it = sys.argv[1:2] == ["rp_embedded"]
        if isinstance(embedded, dict) and embedded.get("AUTOSTART") and not managing_it:
            self._start_embedded()

    def _start_embedded(self) -> None:
        """Start the shared embedded server; a failure is reported, not fatal.

        Commands such as ``rp_embedded status`` and the W001 check must still run.
        """
        from .embedded import EmbeddedRedis
        from .exceptions import RedisPartsError

        try:
            EmbeddedRedis.from_settings().start()
        except RedisPartsError as exc:
            logger.error("embedded Redis not started: %s", exc)
