"""A PostgreSQL server for the session (redisparts_app.testing.PostgresServer), under
the test database pytest-django creates; the Redis fixtures come from tests/conftest.py."""

from collections.abc import Iterator

import pytest
from django.conf import settings

from redisparts_app.testing import PostgresServer


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(postgres_server: PostgresServer) -> None:
    """Point the default database at the session's server before pytest-django creates
    the test database there (and drops it before the server stops)."""
    database = settings.DATABASES["default"]
    database.update(HOST=postgres_server.settings["HOST"], PORT=postgres_server.settings["PORT"])
