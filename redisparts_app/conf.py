"""The ``REDISPARTS`` settings dict and its defaults.

Values are read at access time, so ``override_settings`` works in tests::

    REDISPARTS = {
        "KEY_PREFIX": "shop",
        "CONNECTIONS": {"default": {"CACHE": "default"}},
    }
"""

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    # First segment of every key; no braces or glob characters.
    "KEY_PREFIX": "rp",
    # Connection aliases; see connection.py for the accepted shapes.
    "CONNECTIONS": {"default": {"CACHE": "default"}},
    # Alias used when a service is given no client.
    "DEFAULT_CONNECTION": "default",
    # Longest user-supplied key part (user, guild, chat, queue names), in characters.
    "MAX_KEY_PART_LENGTH": 200,
    # Seconds the connectivity system check waits for PING.
    "CHECK_TIMEOUT": 3.0,
    # Embedded redis-server for development; None disables it. See embedded.py.
    "EMBEDDED": None,
}


class AppSettings:
    """Attribute access to ``settings.REDISPARTS`` with ``DEFAULTS`` filled in."""

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"unknown REDISPARTS setting {name!r}")
        return getattr(settings, "REDISPARTS", {}).get(name, DEFAULTS[name])


app_settings = AppSettings()
