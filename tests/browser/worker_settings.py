"""Settings of the worker subprocess the browser tests start: the test settings on the
suite's Redis, with e-mail written to files the test reads."""

import os

from tests.settings import *  # noqa: F403

CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": os.environ["BROWSER_TEST_REDIS_URL"],
    }
}
EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
EMAIL_FILE_PATH = os.environ["BROWSER_TEST_MAIL_DIR"]
