"""What the request paths and scrapes cost as the keyspace grows from 10,000 to 1,000,000 keys.

Four readers, on three servers holding 10,000, 100,000 and 1,000,000 keys (unix
sockets), measured in turn at every size in every round, so that each ratio of a size
to the smallest pairs figures of the same moment: the mail compose
autocomplete (``recipient_suggestions``, run on each keystroke of the To field), one
Prometheus scrape (``RedispartsCollector``), the admin dashboard's reads
(``figures.overview``) and one health probe (the checks of ``redisparts_checks``). The
app's own state stays the same at every size (4 queue groups, 60 locks, 20 semaphores,
100 chats, 20 guilds of 50 members, 10 counters); the keyspace grows with keys of the
shapes a busy site holds besides (mailboxes, recent contacts, inventories, sessions).
The bare SCAN walk over the prefix is the cost the same readers had when they found
names with SCAN, shown for scale. Target: each reader at 1,000,000 keys costs at most
1.2 times what it costs at 10,000.

    .venv/bin/python -m bench.keyspace [--quick]
"""

import time

from bench.harness import Ratio, Section, alternate, main

SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (2_000, 20_000)
CALLS = 20  # each figure is the median of this many calls, so a ms-long reader is not noise


def _populate() -> None:
    """Make the app's state through the services."""
    from redisparts_app.services import chat, counters
    from redisparts_app.services.autocomplete import AddressBook, RecentContacts
    from redisparts_app.services.locks import Lock
    from redisparts_app.services.semaphores import Semaphore
    from redisparts_app.services.tasks import TaskQueue

    for group in ("default", "mail", "reports", "exports"):
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
    for n in range(20):
        AddressBook(f"guild-{n}").join_many(f"user{n * 25 + m}" for m in range(50))
    for n in range(30):
        RecentContacts("user0").add(f"user{n * 7}")
    for n in range(10):
        counters.update_counter(f"counter-{n}", 3)


def _fill(client, start: int, stop: int) -> None:
    """Keys of other parts of a busy site: mailboxes, contacts, inventories, sessions."""
    pipe = client.pipeline(transaction=False)
    for n in range(start, stop):
        user = f"member{n // 10}"
        shape = n % 10
        if shape == 0:
            pipe.rpush(f"bench:mail:{{{user}}}:inbox", "message")
        elif shape == 1:
            pipe.rpush(f"bench:ac:{{{user}}}:recent", "friend")
        elif shape == 2:
            pipe.sadd(f"bench:market:{{{user}}}:inventory", "sword")
        elif shape == 3:
            pipe.hset(f"bench:market:{{{user}}}:user", "funds", 100)
        else:
            pipe.set(f"sessions:{n}", b"x" * 64)
        if n % 5000 == 4999:
            pipe.execute()
    pipe.execute()


def _median_ms(function) -> float:
    times = []
    for _ in range(CALLS):
        start = time.perf_counter()
        function()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return times[len(times) // 2]


def run(ctx) -> list[Section]:
    import tempfile

    from django.test import override_settings

    from marketplace.social.guilds import recipient_suggestions
    from redisparts_app.monitoring.health import redisparts_checks
    from redisparts_app.monitoring.metrics import RedispartsCollector
    from redisparts_app.services import registry
    from redisparts_app.services.figures import overview
    from redisparts_app.testing import RedisServer

    sizes = QUICK_SIZES if ctx.quick else SIZES
    readers = {
        "compose": lambda: recipient_suggestions("user0", "user1"),
        "scrape": lambda: list(RedispartsCollector().collect()),
        "dashboard": overview,
        "probe": lambda: [check.run() for check in checks],
    }
    checks: list = []
    with tempfile.TemporaryDirectory() as folder:
        servers = {
            size: RedisServer(f"{folder}/{size}", unix_socket=True).start() for size in sizes
        }
        try:
            settings = {
                size: {"KEY_PREFIX": "bench", "CONNECTIONS": {"default": server.url}}
                for size, server in servers.items()
            }
            walks = {}
            for size, server in servers.items():
                with override_settings(REDISPARTS=settings[size]), server.client() as client:
                    registry.forget_noted()
                    _populate()
                    _fill(client, client.dbsize(), size)
                    start = time.perf_counter()
                    sum(1 for _ in client.scan_iter(match="bench:*", count=500))
                    walks[size] = (time.perf_counter() - start) * 1000
            with override_settings(REDISPARTS=settings[sizes[0]]):
                checks = [check(**options) for check, options in redisparts_checks()]

            def measure(reader, size):
                def variant() -> float:
                    with override_settings(REDISPARTS=settings[size]):
                        readers[reader]()  # a new client for this server, out of the timing
                        return _median_ms(readers[reader])

                return variant

            variants = {
                f"{reader}@{size}": measure(reader, size) for reader in readers for size in sizes
            }
            samples = alternate(variants, ctx.repetitions, warmup=True)
        finally:
            for server in servers.values():
                server.stop()
    rows = [
        [size, *(samples.median(f"{reader}@{size}") for reader in readers), walks[size]]
        for size in sizes
    ]
    ratios = [
        Ratio(
            f"{reader} at {size:,} keys / at {sizes[0]:,}",
            samples.ratio(f"{reader}@{size}", f"{reader}@{sizes[0]}"),
            1.2 if size == SIZES[-1] else None,
            at_most=True,
        )
        for size in sizes[1:]
        for reader in readers
    ]
    return [
        Section(
            title="Keyspace: what each reader costs as the keyspace grows, ms",
            columns=[
                "keys",
                "compose autocomplete",
                "scrape",
                "dashboard",
                "health probe",
                "SCAN walk (for scale)",
            ],
            rows=rows,
            ratios=ratios,
            notes=[
                f"each figure: the median of {CALLS} calls, then of the rounds; each round "
                "measures every reader at every size in turn, and a ratio is the median of "
                "the rounds' ratios",
                "the app's state is the same at every size; the walk is one SCAN over the "
                "prefix, what finding names by SCAN cost before the registries",
            ],
        )
    ]


if __name__ == "__main__":
    main(run, __doc__.splitlines()[0])
