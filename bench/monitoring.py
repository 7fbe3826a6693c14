"""Cost of a metrics scrape and of a health probe against the size of the keyspace.

A scrape walks the keyspace once with SCAN to find queue groups, locks, semaphores and
chats, then reads their figures with pipelines; a health probe runs the five checks of
``redisparts_checks()``. Both are measured in turn with the bare SCAN walk over the
prefix (no reads), the floor a scrape cannot go below, on a unix socket, with the app's
own keys (3 queue groups, 60 locks, 20 semaphores, 100 chats, 10 counters) among filler
keys of another application sharing the server.

    .venv/bin/python -m bench.monitoring [--quick]
"""

import time

from bench.harness import Ratio, Section, alternate, main

SIZES = (10_000, 100_000)
QUICK_SIZES = (2_000,)


def _populate() -> None:
    """Make the app's state through the services."""
    from redisparts_app.services import chat, counters
    from redisparts_app.services.locks import Lock
    from redisparts_app.services.semaphores import Semaphore
    from redisparts_app.services.tasks import TaskQueue

    for group in ("default", "mail", "reports"):
        queue = TaskQueue(group)
        for n in range(50):
            queue.enqueue("bench.job", args=[n], queue=f"q{n % 2}", on_commit=False)
    for n in range(60):
        Lock(f"item-{n}", ttl=3600).acquire()
    for n in range(20):
        semaphore = Semaphore(f"account-{n}", 3, timeout=3600)
        for _ in range(2):
            semaphore.acquire()
    for n in range(100):
        chat.create_chat(f"user{n}", [f"user{n + 1}"], "hello", chat_id=f"chat-{n}")
    for n in range(10):
        counters.update_counter(f"counter-{n}", 3)


def _timed(function) -> float:
    start = time.perf_counter()
    function()
    return (time.perf_counter() - start) * 1000


def run(ctx) -> list[Section]:
    from django.test import override_settings

    from redisparts_app.monitoring.health import redisparts_checks
    from redisparts_app.monitoring.metrics import RedispartsCollector

    settings = {"KEY_PREFIX": "bench", "CONNECTIONS": {"default": ctx.url("unix")}}
    client = ctx.client("unix")
    rows, ratios = [], []
    with override_settings(REDISPARTS=settings):
        _populate()
        app_keys = client.dbsize()
        checks = [check(**options) for check, options in redisparts_checks()]

        def scrape() -> float:
            return _timed(lambda: list(RedispartsCollector().collect()))

        def probe() -> float:
            return _timed(lambda: [check.run() for check in checks])

        def walk() -> float:
            return _timed(lambda: sum(1 for _ in client.scan_iter(match="bench:*", count=500)))

        filled = 0
        for size in QUICK_SIZES if ctx.quick else SIZES:
            pipe = client.pipeline(transaction=False)
            for n in range(filled, size - app_keys):
                pipe.set(f"other:{n}", b"x")
                if n % 5000 == 4999:
                    pipe.execute()
            pipe.execute()
            filled = size - app_keys
            samples = alternate(
                {"scrape": scrape, "probe": probe, "walk": walk}, ctx.repetitions, warmup=True
            )
            ratio = samples.ratio("scrape", "walk")
            rows.append(
                [
                    client.dbsize(),
                    samples.median("scrape"),
                    samples.median("probe"),
                    samples.median("walk"),
                    ratio,
                ]
            )
            ratios.append(Ratio(f"scrape / SCAN walk ({size} keys)", ratio))
    client.close()
    return [
        Section(
            title="Monitoring: one metrics scrape and one health probe, ms",
            columns=["keys", "scrape", "health probe", "SCAN walk (floor)", "scrape / walk"],
            rows=rows,
            ratios=ratios,
            notes=[
                f"{app_keys} keys of the app among the filler keys; unix socket; medians of "
                "the rounds, the three measured in turn",
                "the probe runs QueueBacklog and ExpiredLeases (a SCAN for queue groups "
                "each), LocksWithoutTTL (a SCAN for locks), ReplicationLag and a PING",
            ],
        )
    ]


if __name__ == "__main__":
    main(run, __doc__.splitlines()[0])
