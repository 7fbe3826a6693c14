"""The async face's plumbing: get_async_redis() per event loop from every connection shape
(CACHE, URL, SENTINELS, CLUSTER), services given an async client, a lock held by many
coroutines at once, and a core left midway by a cancelled task."""

import asyncio
import itertools
import threading
import time

import pytest
import redis.asyncio
from django.test import override_settings

from redisparts_app import faces
from redisparts_app.connection import (
    aclose_async_clients,
    get_async_redis,
    get_redis,
    resolve_async_client,
)
from redisparts_app.multiplexed import MultiplexedRedis
from redisparts_app.services.locks import Lock
from redisparts_app.services.mail import Mailbox
from redisparts_app.testing import SentinelSetup


def run(coroutine):
    """Run ``coroutine`` in a new event loop, closing that loop's async clients after it."""

    async def main():
        try:
            return await coroutine
        finally:
            await aclose_async_clients()

    return asyncio.run(main())


def test_one_async_client_per_event_loop_and_alias(redis_client):
    async def clients():
        first = get_async_redis()
        assert get_async_redis("default") is first
        await first.set("test:face", "async")
        return first

    one, other = run(clients()), run(clients())
    assert one is not other  # a connection belongs to the loop that opened it
    assert isinstance(one, redis.asyncio.Redis)
    assert redis_client.get("test:face") == b"async"


def test_outside_an_event_loop_there_is_no_async_client():
    with pytest.raises(RuntimeError, match="no running event loop"):
        get_async_redis()


def test_a_sync_client_is_refused_by_the_async_face(redis_client):
    with pytest.raises(TypeError, match=r"redis\.asyncio client"):
        resolve_async_client(redis_client)
    box = Mailbox("bob", client=redis_client)  # a sync client: the async face uses its own
    assert run(box.asend("ann", "s", "b")) == 1
    assert box.fetch().total == 1


@pytest.mark.parametrize("unix_socket", [False, True], ids=["tcp", "unix"])
def test_a_url_entry_gives_an_async_client_of_its_server(redis_server_factory, unix_socket):
    server = redis_server_factory(unix_socket=unix_socket)
    connections = {"default": {"CACHE": "default"}, "extra": {"URL": server.url}}

    async def write():
        await get_async_redis("extra").set("test:where", "extra")

    with override_settings(REDISPARTS={"CONNECTIONS": connections}):
        run(write())
    assert server.client().get("test:where") == b"extra"
    assert get_redis().get("test:where") is None


@pytest.mark.parametrize("entry", ["URL", "CACHE"])
def test_the_blocking_client_outwaits_the_socket_timeout_and_holds_no_pooled_connection(
    redis_server_factory, entry
):
    """Long reads (a push stream's XREAD BLOCK) go through a client of their own: no socket
    timeout, and a connection each however many wait, while the entry's client, bounded
    to 2 connections, keeps serving."""
    server = redis_server_factory()
    options = {"socket_timeout": 0.2, "max_connections": 2}
    connections = {"default": {"URL": server.url, "OPTIONS": options}}
    caches = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": server.url,
            "OPTIONS": {"CONNECTION_POOL_KWARGS": options, "SOCKET_TIMEOUT": 0.2},
        }
    }
    if entry == "CACHE":
        connections = {"default": {"CACHE": "default"}}

    async def wait_and_write():
        blocking = get_async_redis(blocking=True)
        assert blocking is get_async_redis(blocking=True)
        assert blocking is not get_async_redis()
        reads = [
            asyncio.ensure_future(blocking.execute_command("BLPOP", f"test:wake{n}", 1))
            for n in range(5)
        ]
        await asyncio.sleep(0.5)  # past the entry's socket timeout: the reads still wait
        plain = get_async_redis()
        for n in range(5):  # the bounded client is not held up by the five waiting reads
            await plain.rpush(f"test:wake{n}", "go")
        return await asyncio.gather(*reads)

    with override_settings(REDISPARTS={"CONNECTIONS": connections}, CACHES=caches):
        replies = run(wait_and_write())
    assert [list(reply) for reply in replies] == [
        [f"test:wake{n}".encode(), b"go"] for n in range(5)
    ]


def test_a_service_given_an_async_client_uses_it(redis_server_factory, redis_client):
    server = redis_server_factory()

    async def send():
        async with redis.asyncio.Redis.from_url(server.url) as client:
            box = Mailbox("bob", client=client)
            assert box.aclient is client
            return await box.asend("ann", "subject", "body")

    assert run(send()) == 1
    assert Mailbox("bob", client=server.client()).unread_count() == 1
    assert redis_client.dbsize() == 0  # not the default server


@pytest.mark.slow
def test_a_sentinels_entry_gives_an_async_client_of_the_master(tmp_path):
    with SentinelSetup(tmp_path / "sentinel", replicas=1, sentinels=3) as setup:
        connections = {
            "default": {"SENTINELS": setup.sentinel_addresses, "SERVICE_NAME": setup.service_name}
        }
        with override_settings(REDISPARTS={"CONNECTIONS": connections}):
            assert run(Mailbox("bob").asend("ann", "via", "sentinels")) == 1
        assert setup.master.client().exists("rp:mail:{bob}:box") == 1


def test_calls_beyond_a_cluster_clients_connections_wait_their_turn(redis_cluster):
    """redis-py's async cluster client fails a call past max_connections per node (redis-py
    8 sets 100) instead of making it wait: the async face makes it wait its turn."""
    entry = {"CLUSTER": redis_cluster.startup_nodes, "OPTIONS": {"max_connections": 4}}

    async def send_all() -> None:
        box = Mailbox("bob")
        await asyncio.gather(*(box.asend("ann", f"note {n}", "body") for n in range(200)))

    admin = redis_cluster.client()  # FLUSHDB is an admin's (REDISPARTS_TEST_ACL)
    with override_settings(REDISPARTS={"CONNECTIONS": {"default": entry}}):
        admin.flushdb()
        try:
            run(send_all())  # without turns: MaxConnectionsError
            assert Mailbox("bob").unread_count() == 200
        finally:
            admin.flushdb()
            admin.close()


# Coroutines holding the lock in turn.
COROUTINES = 10


async def _increment_under_lock(client, rounds: int, log: list) -> None:
    for _ in range(rounds):
        async with Lock("counter", ttl=5, timeout=30) as lock:
            value = int(await client.get("test:counter") or 0)  # read-modify-write
            await asyncio.sleep(0)  # let every other coroutine run in between
            await client.set("test:counter", value + 1)
            log.append(lock.fence)


@pytest.mark.cluster
def test_coroutines_share_a_lock_without_blocking_the_loop(redis_client, redis_backend):
    """10 coroutines of one loop: no increment lost, fences strictly increasing, and the
    loop keeps running other work while they wait (one BLPOP at a time for all of them)."""
    fences: list[int] = []
    ticks = []

    async def ticker(stop: asyncio.Event) -> None:
        while not stop.is_set():
            ticks.append(1)
            await asyncio.sleep(0.005)

    async def main():
        client = get_async_redis()
        stop = asyncio.Event()
        beat = asyncio.create_task(ticker(stop))
        started = time.monotonic()
        await asyncio.gather(
            *(_increment_under_lock(client, 10, fences) for _ in range(COROUTINES))
        )
        stop.set()
        await beat
        return time.monotonic() - started

    elapsed = run(main())
    assert int(redis_client.get("test:counter")) == 100
    # Strictly increasing (a fence drawn by an attempt whose reply was lost leaves a gap).
    assert len(fences) == 100
    assert all(a < b for a, b in itertools.pairwise(fences))
    # The ticker kept (about) its 5 ms pace however long the waits took: a wait that
    # blocked the loop would leave it a few ticks in all.
    assert len(ticks) >= max(2, 0.3 * elapsed / 0.005)


@pytest.mark.cluster
def test_a_lock_waited_for_longer_than_the_socket_timeout_is_acquired(
    face, redis_backend, redis_url, request
):
    """A waiter's BLPOP returns before the connection's socket timeout (redis-py 8 sets
    5 s unless told otherwise), however long the lock is held: on a timed-out socket
    the wait would fail, and redis-py 8.1's async cluster client would go on to close
    connections other coroutines are using."""
    if redis_backend == "cluster":
        entry = {"CLUSTER": request.getfixturevalue("redis_cluster").startup_nodes}
    else:
        entry = {"URL": redis_url}
    # Not much shorter: on a busy machine a plain reply can take a few tenths of a second.
    connections = {"default": {**entry, "OPTIONS": {"socket_timeout": 0.5}}}
    with override_settings(REDISPARTS={"CONNECTIONS": connections}):
        holder = Lock("slow", ttl=5)
        assert holder.acquire()
        threading.Timer(1.5, holder.release).start()  # held 3x the socket timeout
        waiter = face(Lock("slow", ttl=5, timeout=5))
        started = time.monotonic()
        assert waiter.acquire()
        assert time.monotonic() - started >= 1.4
        waiter.release()


def test_a_cancelled_call_leaves_its_core_closed(redis_client):
    closed = []

    def core():
        try:
            yield faces.command("blpop", ["test:nothing"], timeout=5)
        finally:
            closed.append(True)

    async def main():
        call = asyncio.create_task(faces.arun(core()))
        await asyncio.sleep(0.1)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    run(main())
    assert closed == [True]


# -- MultiplexedRedis: the async client of a single server ----------------------------------


# None: the client's default (RESP2 on redis-py 5.2, RESP3 on 8).
PROTOCOLS = [
    pytest.param(None, id="default"),
    pytest.param(2, id="resp2"),
    pytest.param(3, id="resp3"),
]


def pool_of(url, protocol):
    options = {} if protocol is None else {"protocol": protocol}
    return redis.asyncio.BlockingConnectionPool.from_url(url, **options)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_concurrent_calls_share_one_connection_and_get_their_own_replies(redis_url, protocol):
    async def main():
        assert isinstance(get_async_redis(), MultiplexedRedis)
        pool = pool_of(redis_url, protocol)
        client = MultiplexedRedis(connection_pool=pool)
        await asyncio.gather(*(client.set(f"test:k{n}", n) for n in range(300)))
        values = await asyncio.gather(*(client.get(f"test:k{n}") for n in range(300)))
        counts = await asyncio.gather(*(client.incr("test:counter") for _ in range(300)))
        await client.wait(0, 0)  # redis-py's path: a connection of the pool
        pooled = len(pool._available_connections) + len(pool._in_use_connections)
        await client.aclose()
        return values, counts, pooled

    values, counts, pooled = run(main())
    assert values == [str(n).encode() for n in range(300)]
    assert sorted(counts) == list(range(1, 301))
    assert pooled == 1  # only WAIT took one; the 900 calls went on the shared link


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_replies_have_the_shapes_of_redis_pys_own_client(redis_admin_url, protocol):
    """Each reply type of the protocol (maps, sets, doubles, nulls, errors) read through
    the client's own callbacks: the shared connection answers as redis-py's does."""
    redis_url = redis_admin_url  # CONFIG GET and FLUSHDB: an admin's (REDISPARTS_TEST_ACL)

    async def calls(client):
        script = "return {1, 'two', {3}}"
        await client.hset("h", mapping={"a": 1, "b": "x"})
        await client.zadd("z", {"m": 1.5, "n": 2})
        await client.sadd("s", "p", "q")
        replies = [
            await client.hgetall("h"),
            await client.zrange("z", 0, -1, withscores=True),
            await client.zscore("z", "m"),
            await client.zincrby("z", 1, "m"),
            sorted(await client.smembers("s")),
            await client.get("missing"),
            await client.exists("h", "z", "missing"),
            await client.ttl("h"),
            await client.eval(script, 0),
            await client.hincrbyfloat("h", "a", 0.5),
            await client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"},
        ]
        try:
            await client.evalsha("0" * 40, 0)
        except redis.exceptions.NoScriptError as exc:
            replies.append(type(exc).__name__)
        await client.flushdb()
        return replies

    async def main():
        shared = MultiplexedRedis(connection_pool=pool_of(redis_url, protocol))
        plain = redis.asyncio.Redis(connection_pool=pool_of(redis_url, protocol))
        try:
            ours = await calls(shared)
            pooled = len(shared.connection_pool._in_use_connections) + len(
                shared.connection_pool._available_connections
            )
            return ours, await calls(plain), pooled
        finally:
            await shared.aclose()
            await plain.aclose()

    ours, theirs, pooled = run(main())
    assert ours == theirs
    assert ours[-1] == "NoScriptError"
    assert pooled == 1  # only CONFIG GET (a command with a space) took a pooled connection


def test_a_cancelled_caller_leaves_the_replies_of_the_others_in_step(redis_client):
    async def main():
        client = get_async_redis()
        await asyncio.gather(*(client.set(f"test:k{n}", n) for n in range(50)))
        calls = [asyncio.create_task(client.get(f"test:k{n}")) for n in range(50)]
        for call in calls[::3]:
            call.cancel()
        done = await asyncio.gather(*calls, return_exceptions=True)
        return done, await client.get("test:k7")

    done, again = run(main())
    for n, reply in enumerate(done):
        assert isinstance(reply, asyncio.CancelledError) if n % 3 == 0 else reply == str(n).encode()
    assert again == b"7"


def test_errors_come_back_as_redis_py_exceptions_and_a_killed_connection_reopens(redis_client):
    async def main():
        client = get_async_redis()
        await client.set("test:text", "x")
        with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
            await client.lpush("test:text", "y")
        assert await client.get("test:text") == b"x"  # the connection is still in step
        killed = redis_client.client_kill_filter(_type="normal", skipme=True)
        assert killed >= 1
        failed = None
        for _ in range(100):  # the reset arrives with the next read
            try:
                await client.get("test:text")
            except redis.exceptions.ConnectionError as exc:
                failed = exc
                break
            await asyncio.sleep(0.01)
        assert failed is not None
        return await client.get("test:text")

    assert run(main()) == b"x"


def test_a_url_with_a_database_and_a_password_is_followed(redis_server_factory):
    server = redis_server_factory()
    server.client().config_set("requirepass", "s3cret")
    url = f"redis://:s3cret@{server.host}:{server.port}/3"
    connections = {"default": {"CACHE": "default"}, "extra": {"URL": url}}

    async def write():
        client = get_async_redis("extra")
        await client.set("test:where", "db3")
        await client.execute_command("CLIENT SETNAME", "not-shared")  # redis-py's path
        return await client.get("test:where")

    with override_settings(REDISPARTS={"CONNECTIONS": connections}):
        assert run(write()) == b"db3"
    admin = redis.Redis(host=server.host, port=server.port, password="s3cret", db=3)
    assert admin.get("test:where") == b"db3"


@pytest.mark.cluster
def test_transactions_on_the_shared_connection_stay_whole(redis_client):
    """MULTI, the commands and EXEC leave in one write: 100 transactions and 100 plain
    commands at once, and every transaction's two writes are seen together."""
    from redisparts_app.connection import atransaction

    def queue(n):
        return lambda pipe: pipe.incr("test:{t}:a").incr("test:{t}:b")

    async def main():
        client = get_async_redis()
        snapshots = []

        async def reader():
            for _ in range(100):
                pair = await atransaction(
                    client, "test:{t}:a", lambda pipe: pipe.mget("test:{t}:a", "test:{t}:b")
                )
                snapshots.append(pair[0])

        await asyncio.gather(
            *(atransaction(client, "test:{t}:a", queue(n)) for n in range(100)), reader()
        )
        return snapshots

    snapshots = run(main())
    assert all(a == b for a, b in snapshots)
    assert redis_client.get("test:{t}:a") == redis_client.get("test:{t}:b") == b"100"
