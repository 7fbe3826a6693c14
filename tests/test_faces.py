"""The async face's plumbing: get_async_redis() per event loop from every connection shape
(CACHE, URL, SENTINELS, CLUSTER), services given an async client, a lock held by many
coroutines at once, and a core left midway by a cancelled task."""

import asyncio

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
        await first.set("face", "async")
        return first

    one, other = run(clients()), run(clients())
    assert one is not other  # a connection belongs to the loop that opened it
    assert isinstance(one, redis.asyncio.Redis)
    assert redis_client.get("face") == b"async"


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
        await get_async_redis("extra").set("where", "extra")

    with override_settings(REDISPARTS={"CONNECTIONS": connections}):
        run(write())
    assert server.client().get("where") == b"extra"
    assert get_redis().get("where") is None


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


async def _increment_under_lock(client, rounds: int, log: list) -> None:
    for _ in range(rounds):
        async with Lock("counter", ttl=5, timeout=30) as lock:
            value = int(await client.get("counter") or 0)  # read-modify-write
            await asyncio.sleep(0)  # let every other coroutine run in between
            await client.set("counter", value + 1)
            log.append(lock.fence)


@pytest.mark.cluster
def test_coroutines_share_a_lock_without_blocking_the_loop(redis_client):
    """20 coroutines of one loop: no increment lost, fences strictly increasing, and the
    loop keeps running other work while they wait (BLPOP of one waiter per connection)."""
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
        await asyncio.gather(*(_increment_under_lock(client, 5, fences) for _ in range(20)))
        stop.set()
        await beat

    run(main())
    assert int(redis_client.get("counter")) == 100
    assert fences == sorted(fences) == list(range(1, 101))
    assert len(ticks) > 5


def test_a_cancelled_call_leaves_its_core_closed(redis_client):
    closed = []

    def core():
        try:
            yield faces.command("blpop", ["nothing"], timeout=5)
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
