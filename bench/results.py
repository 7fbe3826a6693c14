"""Results: enqueue → wait for the result, on an idle worker, beside Celery, Huey and a floor.

One caller enqueues a task returning its argument and waits for its result, call after
call, into a running idle worker: ours, ``enqueue()`` then ``result.get()`` (a blocking
read on the task's own key); Celery 5, ``delay()`` then ``AsyncResult.get()`` with its
Redis result backend (pub/sub), the solo pool, prefetch 1, acks late as in
bench/queues.py; Huey 3, the call then ``result.get(blocking=True)`` with
``notify_result=True`` (a BLPOP, its fastest wait; without it Huey polls from 50 ms);
and the floor, the leanest correct round trip: LPUSH of the job, a worker loop's BLMOVE
into its in-progress list, LPUSH of the reply on the call's own list and LREM, the
caller's BLPOP. Each queue takes its turn per round (order alternating), its worker
forked for the round; 5 warm-up calls, then p50 and p99 of the round trips.
Targets (issue 41): ours ≤ 0.5 x Celery's and ≤ 1.0 x Huey's, on p50 and on p99.

    .venv/bin/python -m bench.results [--quick] [--repetitions 3]
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import statistics
import time

import redis

from bench.harness import Context, Ratio, Samples, Section, main, serve_celery
from redisparts_app.services.tasks import TaskQueue, Worker, get_task, task

GROUP = QUEUE = "bench-results"
TASK_NAME = "bench.echo"
BARE_KEY = "bench:bare"
FORK = multiprocessing.get_context("fork")
WARMUP = 5
LABELS = {
    "ours": "redisparts enqueue + result.get()",
    "celery": "Celery delay + AsyncResult.get(), Redis backend",
    "huey": "Huey call + result.get(blocking=True), notify_result",
    "bare": "floor: LPUSH / BLMOVE worker / reply LPUSH / BLPOP",
}
TARGETS = [("celery", 0.5), ("huey", 1.0), ("bare", None)]


def echo(value: int) -> int:
    return value


# -- each queue: a call (enqueue and wait) and a worker ---------------------------------


def ours_side(url: str):
    queue = TaskQueue(GROUP, client=redis.Redis.from_url(url))

    def call(value: int) -> int:
        return queue.enqueue(TASK_NAME, args=(value,), queue=QUEUE).get(timeout=30)

    def serve() -> None:
        Worker([QUEUE], group=GROUP, client=redis.Redis.from_url(url)).run()

    return call, serve


def celery_side(url: str):
    from celery import Celery

    app = Celery("bench-results", broker=url, backend=url)
    app.conf.update(
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    celery_echo = app.task(name="bench.celery_echo")(echo)

    def call(value: int) -> int:
        return celery_echo.delay(value).get(timeout=30)

    def serve() -> None:
        serve_celery(app)

    return call, serve


def huey_side(url: str):
    from huey import RedisHuey

    huey = RedisHuey(GROUP, url=url, notify_result=True)
    huey_echo = huey.task(name="echo")(echo)

    def call(value: int) -> int:
        return huey_echo(value).get(blocking=True, timeout=30)

    def serve() -> None:
        logging.getLogger("huey").setLevel(logging.ERROR)
        huey.create_consumer(workers=1, periodic=False, check_worker_health=False).run()

    return call, serve


def bare_side(url: str):
    client = redis.Redis.from_url(url)

    def call(value: int) -> int:
        reply = f"{BARE_KEY}:reply:{os.urandom(8).hex()}"
        client.lpush(BARE_KEY, json.dumps({"reply": reply, "args": [value]}))
        return json.loads(client.blpop([reply], timeout=30)[1])

    def serve() -> None:
        conn = redis.Redis.from_url(url)
        working = f"{BARE_KEY}:working"
        while True:
            raw = conn.blmove(BARE_KEY, working, 0, "RIGHT", "LEFT")
            job = json.loads(raw)
            value = echo(*job["args"])
            with conn.pipeline(transaction=True) as pipe:
                pipe.lpush(job["reply"], json.dumps(value))
                pipe.expire(job["reply"], 60)
                pipe.lrem(working, 1, raw)
                pipe.execute()

    return call, serve


SIDES = {"ours": ours_side, "celery": celery_side, "huey": huey_side, "bare": bare_side}


# -- a round ----------------------------------------------------------------------------


def measure(ctx: Context, label: str, calls: int, sender) -> None:
    """In a process of its own (the peers' clients and threads die with it): fork the
    queue's worker, warm up, time ``calls`` round trips; send p50 and p99 (ms)."""
    try:
        ctx.client()  # an emptied server
        call, serve = SIDES[label](ctx.url())
        worker = FORK.Process(target=serve, daemon=True)
        worker.start()
        try:
            for value in range(WARMUP):
                assert call(value) == value
            times = []
            for value in range(calls):
                time.sleep(0.005)  # the worker back to waiting: idle
                started = time.perf_counter()
                if call(value) != value:
                    raise AssertionError(f"{label}: wrong result")
                times.append(1000 * (time.perf_counter() - started))
        finally:
            os.kill(worker.pid, signal.SIGTERM)
            worker.join(10)
            if worker.is_alive():
                worker.kill()
                worker.join()
        times.sort()
        sender.send(
            {"p50": statistics.median(times), "p99": times[min(calls - 1, int(0.99 * calls))]}
        )
    except BaseException as exc:
        sender.send(exc)
        raise


def one_round(ctx: Context, label: str, calls: int) -> dict:
    receiver, sender = FORK.Pipe(duplex=False)
    part = FORK.Process(target=measure, args=(ctx, label, calls, sender))
    part.start()
    result = receiver.recv()
    part.join()
    if isinstance(result, BaseException):
        raise result
    return result


def run(ctx: Context) -> list[Section]:
    if get_task(TASK_NAME) is None:
        task(name=TASK_NAME, queue=QUEUE, group=GROUP, max_retries=0)(echo)
    calls = 30 if ctx.quick else 500
    rounds = []
    for n in range(ctx.repetitions):
        order = list(SIDES) if n % 2 == 0 else list(reversed(SIDES))
        rounds.append({label: one_round(ctx, label, calls) for label in order})
    samples = Samples(rounds)
    ratios = [
        Ratio(
            f"redisparts / {LABELS[peer]}, {figure} (lower is better)",
            samples.ratio("ours", peer, figure),
            target,
            at_most=True,
        )
        for peer, target in TARGETS
        for figure in ("p50", "p99")
    ]
    return [
        Section(
            "Results: enqueue → result, one caller, an idle worker (ms per round trip)",
            ["queue", "p50 ms", "range", "p99 ms", "range"],
            [
                [
                    LABELS[label],
                    samples.median(label, "p50"),
                    samples.spread(label, "p50"),
                    samples.median(label, "p99"),
                    samples.spread(label, "p99"),
                ]
                for label in SIDES
            ],
            ratios=ratios,
            notes=[
                f"{calls} calls per round after {WARMUP} warm-up calls, 5 ms apart; median of "
                f"{ctx.repetitions} rounds; TCP loopback server; every result checked"
            ],
        )
    ]


if __name__ == "__main__":
    main(run, __doc__.splitlines()[0])
