"""Faces: each service's async twin (redis.asyncio) against its sync twin, on one core.

Two sections, on the harness's TCP loopback server, for five calls of different shapes:
a mailbox's unread count (one command), a chat message sent (one script), a rate limit
hit (one script), presence recorded (MULTI/EXEC) and a lock taken and released (two
scripts, a registry note):

The async twins run on the client ``get_async_redis()`` builds for a single server, a
``MultiplexedRedis`` (plain commands share one auto-pipelined connection).

- single call: calls per second one after the other, the sync twin in a loop and the
  async twin awaited in a loop inside one running event loop (no loop start per call).
  The two take turns block by block (A, B, B, A, ...), a block being BLOCK seconds of
  calls, and a round's ratio compares blocks made side by side; target: async ≥ 0.9x.
- 100 concurrent calls: 100 callers each making calls for a block, all at once. The
  async twin: 100 coroutines of one event loop (one connection each). The sync twin,
  two ways: called from async code through asgiref's ``sync_to_async`` (what Django
  does with sync code under ASGI: one thread, thread_sensitive), and from 100 threads
  of a pool (thread_sensitive=False). Target: async ≥ 3x the sync twin through
  ``sync_to_async``; the 100-thread figure is shown for comparison.

    .venv/bin/python -m bench.faces [--quick] [--repetitions 3]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.harness import Context, Ratio, Samples, Section, main

BLOCK = 0.4  # seconds of calls per block
CONCURRENCY = 100
SHAPES = ("mail unread", "chat send", "rate limit", "presence", "lock pair")


def _loadavg() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def make_calls(client: Any, aclient: Any, worker: int) -> dict[str, tuple[Callable, Callable]]:
    """Return, by shape, (sync call, async call) of worker ``worker`` (its own keys)."""
    from redisparts_app.services import chat, locks, mail, presence, ratelimit

    box = mail.Mailbox(f"user{worker}", client=client)
    abox = mail.Mailbox(f"user{worker}", client=aclient)
    room = f"room{worker}"
    # A 1 s window: the log keeps about a second of events whatever the run's length, so
    # the variants measured later meet a key of the same size.
    limit = ratelimit.RateLimit("bench", 10**9, 1, client=client)
    alimit = ratelimit.RateLimit("bench", 10**9, 1, client=aclient)
    lock = locks.Lock(f"lock{worker}", ttl=10, timeout=10, client=client)
    alock = locks.Lock(f"lock{worker}", ttl=10, timeout=10, client=aclient)

    def lock_pair() -> None:
        lock.acquire()
        lock.release()

    async def alock_pair() -> None:
        await alock.aacquire()
        await alock.arelease()

    return {
        "mail unread": (box.unread_count, abox.aunread_count),
        "chat send": (
            lambda: chat.send_message(room, "ann", "hello", client=client),
            lambda: chat.asend_message(room, "ann", "hello", client=aclient),
        ),
        "rate limit": (lambda: limit.hit(room), lambda: alimit.ahit(room)),
        "presence": (
            lambda: presence.record_activity(f"u{worker}", client=client),
            lambda: presence.arecord_activity(f"u{worker}", client=aclient),
        ),
        "lock pair": (lock_pair, alock_pair),
    }


def prepare(client: Any, workers: int) -> None:
    from redisparts_app.services import chat

    client.flushall()
    for worker in range(workers):
        chat.create_chat("ann", ["bob"], "first", chat_id=f"room{worker}", client=client)


def sync_block(call: Callable[[], Any], seconds: float) -> float:
    count, start = 0, time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        call()
        count += 1
    return count / (time.perf_counter() - start)


async def async_block(call: Callable[[], Awaitable[Any]], seconds: float) -> float:
    count, start = 0, time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        await call()
        count += 1
    return count / (time.perf_counter() - start)


async def concurrent_block(calls: list[Callable[[], Awaitable[Any]]], seconds: float) -> float:
    """Calls per second of ``calls`` (one per caller), all callers at once."""
    end = time.perf_counter() + seconds
    counts = [0] * len(calls)

    async def caller(index: int) -> None:
        call = calls[index]
        while time.perf_counter() < end:
            await call()
            counts[index] += 1

    start = time.perf_counter()
    await asyncio.gather(*(caller(index) for index in range(len(calls))))
    return sum(counts) / (time.perf_counter() - start)


def threads_block(pool: ThreadPoolExecutor, calls: list[Callable[[], Any]], seconds: float):
    end = time.perf_counter() + seconds

    def caller(call: Callable[[], Any]) -> int:
        count = 0
        while time.perf_counter() < end:
            call()
            count += 1
        return count

    start = time.perf_counter()
    total = sum(pool.map(caller, calls))
    return total / (time.perf_counter() - start)


def single(ctx: Context) -> Section:
    from redisparts_app.multiplexed import MultiplexedRedis

    client = ctx.client("tcp")
    prepare(client, 1)
    loop = asyncio.new_event_loop()
    aclient = MultiplexedRedis.from_url(ctx.url("tcp"))
    calls = make_calls(client, aclient, 0)
    seconds = ctx.seconds(BLOCK, 0.05)
    rounds: list[dict[str, float]] = []
    for number in range(ctx.repetitions * 3):
        figures: dict[str, float] = {}
        for shape, (sync_call, async_call) in calls.items():
            order = ("sync", "async") if number % 2 == 0 else ("async", "sync")
            for face in order:
                if face == "sync":
                    figures[f"{shape}/sync"] = sync_block(sync_call, seconds)
                else:
                    figures[f"{shape}/async"] = loop.run_until_complete(
                        async_block(async_call, seconds)
                    )
        rounds.append(figures)
    loop.run_until_complete(aclient.aclose())
    loop.close()
    samples = Samples(rounds)
    rows = [
        [
            shape,
            samples.median(f"{shape}/sync"),
            samples.median(f"{shape}/async"),
            samples.ratio(f"{shape}/async", f"{shape}/sync"),
        ]
        for shape in SHAPES
    ]
    overall = statistics.median(samples.ratio(f"{s}/async", f"{s}/sync") for s in SHAPES)
    return Section(
        title="Faces, single call: calls/s one after the other (TCP loopback)",
        columns=["call", "sync calls/s", "async calls/s", "async / sync"],
        rows=rows,
        ratios=[
            Ratio(f"async / sync, {shape}", samples.ratio(f"{shape}/async", f"{shape}/sync"), 0.9)
            for shape in SHAPES
        ]
        + [Ratio("async / sync, median of the five calls", overall, 0.9)],
        notes=[
            f"{len(rounds)} rounds of {seconds:g} s blocks per face and call, faces in "
            "turn (the first face alternates); ratio = median of the per-round ratios",
            f"load average at the end: {_loadavg()} (2 cores, shared)",
        ],
    )


def concurrent(ctx: Context) -> Section:
    from asgiref.sync import sync_to_async

    from redisparts_app.multiplexed import MultiplexedRedis

    client = ctx.client("tcp")
    prepare(client, CONCURRENCY)
    loop = asyncio.new_event_loop()
    aclient = MultiplexedRedis.from_url(ctx.url("tcp"))
    workers = [make_calls(client, aclient, worker) for worker in range(CONCURRENCY)]
    pool = ThreadPoolExecutor(CONCURRENCY)
    seconds = ctx.seconds(BLOCK * 2, 0.1)
    rounds: list[dict[str, float]] = []
    for _ in range(ctx.repetitions):
        figures: dict[str, float] = {}
        for shape in SHAPES:
            sync_calls = [calls[shape][0] for calls in workers]
            async_calls = [calls[shape][1] for calls in workers]
            hopped = [sync_to_async(call) for call in sync_calls]
            figures[f"{shape}/async"] = loop.run_until_complete(
                concurrent_block(async_calls, seconds)
            )
            figures[f"{shape}/hop"] = loop.run_until_complete(concurrent_block(hopped, seconds))
            figures[f"{shape}/threads"] = threads_block(pool, sync_calls, seconds)
        rounds.append(figures)
    pool.shutdown()
    loop.run_until_complete(aclient.aclose())
    loop.close()
    samples = Samples(rounds)
    rows = [
        [
            shape,
            samples.median(f"{shape}/hop"),
            samples.median(f"{shape}/threads"),
            samples.median(f"{shape}/async"),
            samples.ratio(f"{shape}/async", f"{shape}/hop"),
            samples.ratio(f"{shape}/async", f"{shape}/threads"),
        ]
        for shape in SHAPES
    ]
    return Section(
        title=f"Faces, {CONCURRENCY} concurrent calls: calls/s in all (TCP loopback)",
        columns=[
            "call",
            "sync via sync_to_async",
            f"sync, {CONCURRENCY} threads",
            "async",
            "async / sync_to_async",
            "async / threads",
        ],
        rows=rows,
        ratios=[
            Ratio(
                f"async / sync via sync_to_async, {shape}",
                samples.ratio(f"{shape}/async", f"{shape}/hop"),
                3.0,
            )
            for shape in SHAPES
        ]
        + [
            Ratio(
                f"async / sync on {CONCURRENCY} threads, {shape}",
                samples.ratio(f"{shape}/async", f"{shape}/threads"),
            )
            for shape in SHAPES
        ],
        notes=[
            f"{ctx.repetitions} rounds of {seconds:g} s per variant and call; each of the "
            f"{CONCURRENCY} callers has its own mailbox, chat, user and lock",
            "sync_to_async: Django's default for sync code called from async code (one "
            "thread, calls one at a time); threads: thread_sensitive=False would spread "
            "them over a pool like this one",
            f"load average at the end: {_loadavg()} (2 cores, shared)",
        ],
    )


def run(ctx: Context) -> list[Section]:
    from django.test import override_settings

    # Services given an async client keep get_redis() for their sync methods: point it at
    # the same server.
    connections = {"default": {"URL": ctx.url("tcp")}}
    with override_settings(REDISPARTS={"KEY_PREFIX": "bench", "CONNECTIONS": connections}):
        return [single(ctx), concurrent(ctx)]


if __name__ == "__main__":
    main(run, __doc__.splitlines()[0])
