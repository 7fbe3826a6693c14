"""Test settings: the demo's, with Redis pointed at the servers the tests start."""

from marketplace.mailers import mail_settings
from marketplace.settings import *  # noqa: F403

# The session fixture in conftest.py points CACHES at its own redis-server.
# CONNECTIONS stays at its default (conftest.py points the default at a cluster for
# tests marked cluster).
REDISPARTS = {
    **{name: value for name, value in REDISPARTS.items() if name != "CONNECTIONS"},  # noqa: F405
    "EMBEDDED": None,
}
CACHES = {
    "default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}
}
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The in-memory mailer also in the worker processes the tests start.
globals().update(mail_settings("django.core.mail.backends.locmem.EmailBackend"))
# A test-only app whose model guards writes with lock fencing tokens (test_locks.py).
INSTALLED_APPS = [*INSTALLED_APPS, "tests.fencing"]  # noqa: F405
