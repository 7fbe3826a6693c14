"""Settings of tests/postgres/: the demo's test settings on PostgreSQL.

Run with ``pytest tests/postgres --ds=tests.postgres.settings`` (make test does). The
server is started by tests/postgres/conftest.py, never one found on the machine.
"""

from tests.demo.settings import *  # noqa: F403

# A placeholder that reaches nothing: conftest.py points it at the server it starts.
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "redisparts",
        "USER": "postgres",
        "HOST": "127.0.0.1",
        "PORT": "1",
    }
}
