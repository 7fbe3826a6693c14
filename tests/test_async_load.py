"""Many waiters of one process on one lock or one semaphore: 1,000 coroutines, 200 threads.

Each holder counts itself in and out of the critical section in this process (an
independent count, not Redis' view) and records its fencing token or ticket; every run is
made twice, the second after a SCRIPT FLUSH (what a restart or a failover leaves: every
EVALSHA misses once). The waiters of one process share one blocking wait per key, so a
holder's release never queues behind them for a connection.
"""

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable

import pytest
from django.test import override_settings

from redisparts_app.connection import aclose_async_clients, slot_client
from redisparts_app.services.locks import Lock, lock_keys
from redisparts_app.services.semaphores import FairSemaphore, Semaphore

pytestmark = pytest.mark.cluster

COROUTINES = 1000
THREADS = 200
# Long enough for a holder to release under the load of every waiter, short enough for a
# lost release to show as a timeout well within the test's time limit.
TTL = 5.0
WAIT = 120.0


@pytest.fixture(autouse=True)
def _url_entry(redis_backend, redis_url):
    """On the single server, a URL entry (the cluster run has its CLUSTER one): the pools of
    its clients are bounded (redis-py 5.2's async one to 50 connections)."""
    if redis_backend == "cluster":
        yield
        return
    with override_settings(REDISPARTS={"CONNECTIONS": {"default": {"URL": redis_url}}}):
        yield


class Watch:
    """Count the holders inside the critical section and record their tokens in the order
    they came in. A holder leaves the count before it releases, so the count never
    exceeds the holders Redis has: a count above the limit is a real overlap."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.inside = 0
        self.most = 0
        self.tokens: list[int] = []
        self.mutex = threading.Lock()

    def enter(self, token: int | None) -> None:
        with self.mutex:
            self.inside += 1
            self.most = max(self.most, self.inside)
            if token is not None:
                self.tokens.append(token)

    def leave(self) -> None:
        with self.mutex:
            self.inside -= 1


def run_all(
    holders: str, ahold: Callable[[], Awaitable[None]], hold: Callable[[], None]
) -> tuple[int, list[BaseException]]:
    """Run ``ahold()`` in COROUTINES coroutines of one loop, or ``hold()`` in THREADS
    threads (``holders``); return how many ran and the errors raised."""
    if holders == "threads":
        return THREADS, in_threads(THREADS, hold)
    loop = asyncio.new_event_loop()
    try:
        return COROUTINES, loop.run_until_complete(gather(COROUTINES, ahold))
    finally:
        loop.run_until_complete(aclose_async_clients())
        loop.close()


async def gather(count: int, one: Callable[[], Awaitable[None]]) -> list[BaseException]:
    results = await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True)
    return [result for result in results if isinstance(result, BaseException)]


def in_threads(count: int, one: Callable[[], None]) -> list[BaseException]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            one()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def check_lock_run(watch: Watch, errors: list[BaseException], count: int, after: int) -> None:
    tokens, watch.tokens = watch.tokens, []
    assert errors == []
    assert watch.most == 1
    # Fences strictly increase in the order holders came in, and none was skipped.
    assert tokens == list(range(after + 1, after + count + 1))


def check_semaphore_run(
    watch: Watch, errors: list[BaseException], count: int, after: int, fair: bool
) -> None:
    tokens, watch.tokens = watch.tokens, []
    assert errors == []
    assert 1 <= watch.most <= watch.limit
    if fair:
        # One ticket per permit: none handed out twice, none skipped.
        assert sorted(tokens) == list(range(after + 1, after + count + 1))


@pytest.mark.parametrize("holders", ["coroutines", "threads"])
def test_holders_of_one_process_take_one_lock_in_turn(redis_client, holders):
    watch = Watch(limit=1)

    async def ahold() -> None:
        async with Lock("hot", ttl=TTL, timeout=WAIT) as lock:
            watch.enter(lock.fence)
            await asyncio.sleep(0)
            watch.leave()

    def hold() -> None:
        with Lock("hot", ttl=TTL, timeout=WAIT) as lock:
            watch.enter(lock.fence)
            watch.leave()

    for run in range(2):  # the second after a SCRIPT FLUSH
        count, errors = run_all(holders, ahold, hold)
        check_lock_run(watch, errors, count, after=run * count)
        redis_client.script_flush()


@pytest.mark.parametrize("kind", [Semaphore, FairSemaphore])
@pytest.mark.parametrize("holders", ["coroutines", "threads"])
def test_holders_of_one_process_share_a_semaphore_of_three(redis_client, holders, kind):
    watch = Watch(limit=3)
    semaphore = kind("hot", 3, timeout=TTL)
    fair = kind is FairSemaphore

    async def ahold() -> None:
        async with semaphore.ahold(wait=WAIT) as holder_id:
            watch.enter(await semaphore.aticket(holder_id) if fair else None)
            await asyncio.sleep(0)
            watch.leave()

    def hold() -> None:
        with semaphore.hold(wait=WAIT) as holder_id:
            watch.enter(semaphore.ticket(holder_id) if fair else None)
            watch.leave()

    for run in range(2):  # the second after a SCRIPT FLUSH
        count, errors = run_all(holders, ahold, hold)
        check_semaphore_run(watch, errors, count, after=run * count, fair=fair)
        redis_client.script_flush()


@pytest.mark.parametrize("holders", ["coroutines", "threads"])
def test_the_waiters_of_a_process_hold_one_blpop_between_them(redis_client, holders):
    holder = Lock("busy", ttl=60)  # outlasts the waiters' start on a slow machine
    holder.acquire()
    server = slot_client(redis_client, lock_keys("busy")[0])
    blocked: list[int] = []

    def release_once_they_wait() -> None:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            blocked.append(server.info("clients")["blocked_clients"])
            if blocked.count(1) == 1:  # they wait: a few samples more, then the release
                end = min(end, time.monotonic() + 0.3)
            time.sleep(0.01)
        holder.release()

    async def ahold() -> None:
        async with Lock("busy", ttl=TTL, timeout=WAIT):
            pass

    def hold() -> None:
        with Lock("busy", ttl=TTL, timeout=WAIT):
            pass

    releaser = threading.Thread(target=release_once_they_wait)
    releaser.start()
    _count, errors = run_all(holders, ahold, hold)
    releaser.join()
    assert errors == []
    assert max(blocked) == 1  # one BLPOP for all the waiters


@pytest.mark.single_server  # the pool of a URL entry's async client
def test_releases_never_queue_behind_the_waiters_of_other_locks(redis_client, redis_url):
    """Eight locks, each with five coroutines in turn: eight BLPOPs at once, while the pool
    the other calls use has two connections and fails a call that waits 1 s for one."""
    redis_client.script_flush()  # the scripts' loading leaves redis-py 5.2's shared connection
    options = {"max_connections": 2, "timeout": 1}
    connections = {"default": {"URL": redis_url, "OPTIONS": options}}

    async def ahold(name: str) -> None:
        async with Lock(name, ttl=TTL, timeout=WAIT):
            await asyncio.sleep(0.05)

    async def main() -> list[BaseException]:
        try:
            calls = [ahold(f"lock{n}") for n in range(8) for _ in range(5)]
            results = await asyncio.gather(*calls, return_exceptions=True)
        finally:
            await aclose_async_clients()
        return [result for result in results if isinstance(result, BaseException)]

    with override_settings(REDISPARTS={"CONNECTIONS": connections}):
        assert asyncio.run(main()) == []
