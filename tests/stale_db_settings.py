"""The app's test settings with a database file and Redis URL from the environment, for a
worker process of its own (test_tasks_runtime.py's stale-connection test)."""

import os

from tests.settings import *  # noqa: F403

DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["RP_DB"]}}
CACHES = {
    "default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": os.environ["RP_REDIS"]}
}
