import asyncio
import multiprocessing

import pytest
import redis
import redis.asyncio
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django_redis import get_redis_connection

from redisparts_app.conf import sentinel_addresses
from redisparts_app.connection import (
    SYNC_POOL_SIZE,
    blocking_twin,
    config_problems,
    get_redis,
    socket_timeout,
)
from redisparts_app.exceptions import ConnectionNotConfigured


def test_cache_alias_reuses_the_django_redis_pool():
    client = get_redis()
    assert client.connection_pool is get_redis_connection("default").connection_pool


@pytest.mark.parametrize("unix_socket", [False, True], ids=["tcp", "unix"])
def test_url_alias_reaches_its_own_server(redis_server_factory, unix_socket):
    server = redis_server_factory(unix_socket=unix_socket)
    server.client().set("test:where", "extra")
    with override_settings(
        REDISPARTS={"CONNECTIONS": {"default": {"CACHE": "default"}, "extra": server.url}}
    ):
        assert get_redis("extra").get("test:where") == b"extra"
        assert get_redis().get("test:where") is None


def test_url_alias_client_is_built_once_and_dropped_when_settings_change(redis_server_factory):
    server = redis_server_factory()
    connections = {"default": {"CACHE": "default"}, "extra": {"URL": server.url}}
    with override_settings(REDISPARTS={"CONNECTIONS": connections}):
        first = get_redis("extra")
        assert get_redis("extra") is first
    with override_settings(REDISPARTS={"CONNECTIONS": connections}):
        assert get_redis("extra") is not first


def test_options_reach_the_client(redis_server_factory):
    server = redis_server_factory()
    extra = {"URL": server.url, "OPTIONS": {"socket_timeout": 1.5, "client_name": "rp-test"}}
    with override_settings(REDISPARTS={"CONNECTIONS": {"default": "redis://x:1", "extra": extra}}):
        client = get_redis("extra")
        client.ping()  # connects, naming its connection (seen by the server's admin)
        assert "rp-test" in {entry["name"] for entry in server.client().client_list()}
        assert client.connection_pool.connection_kwargs["socket_timeout"] == 1.5


def test_url_alias_pool_is_uncapped_unless_the_options_cap_it(redis_server_factory):
    # redis-py 8 caps a pool at 100 and fails the 101st thread under way.
    server = redis_server_factory()
    capped = {"URL": server.url, "OPTIONS": {"max_connections": 3}}
    with override_settings(REDISPARTS={"CONNECTIONS": {"default": server.url, "capped": capped}}):
        assert get_redis().connection_pool.max_connections == SYNC_POOL_SIZE
        assert get_redis("capped").connection_pool.max_connections == 3


def test_socket_timeout_is_the_one_the_connections_use(redis_server_factory):
    """redis-py 8 gives a connection 5 s when the pool names no socket timeout; 5.2 none."""
    server = redis_server_factory()
    for client in (redis.Redis.from_url(server.url), server.client(socket_timeout=0.7)):
        connection = client.connection_pool.make_connection()
        assert socket_timeout(client) == connection.socket_timeout

    async def main() -> None:
        for client in (
            redis.asyncio.Redis.from_url(server.url),
            redis.asyncio.Redis.from_url(server.url, socket_timeout=0.7),
        ):
            connection = client.connection_pool.make_connection()
            assert socket_timeout(client) == connection.socket_timeout
            await client.aclose()

    asyncio.run(main())


def test_a_blocking_pools_client_has_a_twin_on_a_pool_of_its_own(redis_server_factory):
    server = redis_server_factory()

    async def main() -> None:
        pool = redis.asyncio.BlockingConnectionPool.from_url(server.url, max_connections=1)
        bounded = redis.asyncio.Redis(connection_pool=pool)
        twin = blocking_twin(bounded)
        assert twin is blocking_twin(bounded)
        waiting = asyncio.ensure_future(bounded.blpop(["test:wake"], timeout=5))
        await asyncio.sleep(0.2)  # the bounded pool's only connection is in that BLPOP
        assert await asyncio.wait_for(twin.blpop(["test:nothing"], timeout=0.01), 1) is None
        await twin.lpush("test:wake", "1")
        assert list(await waiting) == [b"test:wake", b"1"]
        plain = redis.asyncio.Redis.from_url(server.url)  # a pool that never makes one wait
        assert blocking_twin(plain) is plain
        for client in (twin, bounded, plain):
            await client.aclose()

    asyncio.run(main())


def test_unknown_alias_names_the_known_ones():
    with pytest.raises(
        ConnectionNotConfigured, match=r"no Redis connection 'queues'.*known: default"
    ):
        get_redis("queues")


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"URL": "http://example.com"}, "must start with one of redis://"),
        ({"URL": "redis://h:1", "CACHE": "default"}, "exactly one of"),
        ({}, "exactly one of"),
        ({"CACHE": "nope"}, "is not a CACHES entry using django_redis"),
        ({"SENTINELS": [], "SERVICE_NAME": "m"}, "non-empty list"),
        ({"SENTINELS": [["h", "26379"]], "SERVICE_NAME": "m"}, "not a [host, port] pair"),
        ({"SENTINELS": [["h", 26379]]}, "needs SERVICE_NAME"),
        ({"CLUSTER": []}, "non-empty list"),
        ({"CLUSTER": ["unix:///tmp/x.sock"]}, "must start with one of redis://, rediss://"),
        ({"URL": "redis://h:1", "OPTIONS": "fast"}, "OPTIONS must be a dict"),
        (42, "must be a URL string or a dict"),
    ],
)
def test_malformed_connection_entries_are_described(config, problem):
    problems = config_problems(config)
    assert problems
    assert problem in problems[0]
    with (
        override_settings(REDISPARTS={"CONNECTIONS": {"default": config}}),
        pytest.raises(ConnectionNotConfigured, match="Redis connection 'default'"),
    ):
        get_redis()


def _child_increments(n: int, queue) -> None:
    client = get_redis()
    for _ in range(n):
        client.incr("test:forked")
    queue.put(client.connection_pool.pid)


def test_client_used_before_fork_works_in_child_processes(redis_client):
    redis_client.ping()  # open a pooled connection before forking
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    children = [ctx.Process(target=_child_increments, args=(200, queue)) for _ in range(3)]
    for child in children:
        child.start()
    for child in children:
        child.join(30)
        assert child.exitcode == 0
    assert int(redis_client.get("test:forked")) == 600
    pids = {queue.get(timeout=5) for _ in children}
    assert pids == {child.pid for child in children}


def test_sentinel_addresses_from_the_environment_form():
    text = "10.0.0.1:26379, sentinel-b:26380,[::1]:26381"
    assert sentinel_addresses(text) == [["10.0.0.1", 26379], ["sentinel-b", 26380], ["::1", 26381]]
    assert sentinel_addresses("") == []
    assert config_problems({"SENTINELS": sentinel_addresses(text), "SERVICE_NAME": "m"}) == []


@pytest.mark.parametrize("text", ["10.0.0.1", "10.0.0.1:", ":26379", "host:port", "h:70000"])
def test_malformed_sentinel_addresses_are_refused(text):
    with pytest.raises(ImproperlyConfigured, match="host:port"):
        sentinel_addresses(text)
