"""Real redis-server processes for the suite; no mocks of Redis.

By default a throwaway server on a unix socket in a temp folder. Set
REDISPARTS_TEST_REDIS_URL to run against an external server instead; its
database must be empty, since every test flushes it.
"""

import os
from collections.abc import Callable, Iterator

import pytest
import redis
from django.test import override_settings

from redisparts_app.connection import get_redis
from redisparts_app.testing import RedisServer

EXTERNAL_URL_ENV = "REDISPARTS_TEST_REDIS_URL"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of the session's Redis: a server started here, or the external one."""
    external = os.environ.get(EXTERNAL_URL_ENV)
    if external:
        client = redis.Redis.from_url(external)
        if client.dbsize():
            pytest.exit(
                f"{EXTERNAL_URL_ENV}={external} holds {client.dbsize()} keys; the tests flush "
                "their database, so point it at an empty one",
                returncode=3,
            )
        yield external
        return
    server = RedisServer(tmp_path_factory.mktemp("redis"), unix_socket=True).start()
    yield server.url
    server.stop()


@pytest.fixture(scope="session", autouse=True)
def _redis_settings(redis_url: str) -> Iterator[None]:
    caches = {"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": redis_url}}
    with override_settings(CACHES=caches):
        yield


@pytest.fixture(autouse=True)
def redis_client(_redis_settings: None) -> Iterator[redis.Redis]:
    """The default connection, on a database flushed before and after the test."""
    client = get_redis()
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
def redis_server_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., RedisServer]]:
    """Start extra servers (``RedisServer`` keyword arguments); all stop at teardown."""
    started: list[RedisServer] = []

    def start(**kwargs) -> RedisServer:
        server = RedisServer(tmp_path_factory.mktemp("extra-redis"), **kwargs).start()
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()
