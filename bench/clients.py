"""Clients: the services' calls on another redis-py (8.1: RESP3 by default, and protocol=2).

A user who installs the app today gets redis-py 8.1, which speaks RESP3 unless a client
asks for ``protocol=2``; the other benchmarks run on the pinned 5.2.1. This one measures
the services' own paths on both, side by side, against the harness's TCP loopback server:
the client floor's single-command paths and redis-py's GET, SET and ZADD (plain
commands), a lock pair, an enqueue and a chat message (EVALSHA scripts), a chat fetch
over 10 chats (a script with a bigger reply), presence recorded (MULTI/EXEC) and the
unread counts of 10 chats (a pipeline of scripts), and the async faces (on the
``MultiplexedRedis`` that ``get_async_redis()`` builds; redis-py's own path when the
client speaks RESP3), one call at a time and 100 concurrent callers, beside a SCARD on a
plain ``redis.asyncio.Redis`` (redis-py's pooled path, no service; left out of the medians).

Three variants, each a long-lived worker process (``python -m bench.clients --worker``)
with the services configured as a user would (``REDISPARTS["CONNECTIONS"]`` with a URL),
its own key prefix and the same cases:

- this interpreter's redis-py with its defaults (``make bench``: 5.2.1, RESP2);
- ``--client-python``'s redis-py with its defaults (``make bench``: 8.1.0, a bench-only
  virtualenv on the same Python, so only redis-py differs): no ``protocol`` argument;
- the same with ``OPTIONS = {"protocol": 2}``.

The workers take turns case by case (one block of BLOCK seconds each, in a new random
order each turn, seeded), so the three meet the same moments of a shared machine; only
one works at a time. Each call is timed on its own, with the process's CPU clock and
the wall clock, so the untimed set-up of a call (the chat fetch's new messages) stays
out. A figure is the CPU per call (the client's cost: what RESP3 parsing would add) and
the median wall time per call; a ratio is the median of the per-turn ratios, beside
their spread (lowest..highest). The worker checks which protocol its connections spoke
(HELLO 3 or none) and whether its async client shares one connection.

    .venv/bin/python -m bench.clients --client-python .venv-bench-redis8/bin/python [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

from bench.harness import (
    ROOT,
    Check,
    Context,
    Ratio,
    Samples,
    Section,
    main,
    redis_benchmark_path,
)

TIMEOUT = 900  # seconds: 20 cases, 3 variants, 12 turns of BLOCK seconds
BLOCK = 0.3  # seconds of calls per variant, case and turn
TURNS = 4  # turns per repetition
CHATS = 10  # chats of the fetch and unread-count cases
CONCURRENCY = 100

# redis-py's own asyncio client, no service and no shared connection: what a protocol
# costs on redis-py's pooled path, which the async faces take when they cannot share.
POOLED = "redis.asyncio.Redis SCARD (redis-py's pooled path)"
# (case, what it sends, async?) in the order of the tables.
CASES = [
    ("GET", "GET", False),
    ("SET", "SET", False),
    ("ZADD", "ZADD", False),
    ("presence.is_online", "ZSCORE", False),
    ("AddressBook.complete (lex)", "ZRANGEBYLEX, 10 names", False),
    ("RecentContacts.add", "EVALSHA", False),
    ("Lock.try_acquire, lock held", "EVALSHA", False),
    ("Lock acquire + release", "2 EVALSHA", False),
    ("TaskQueue.enqueue", "EVALSHA", False),
    ("chat.send_message", "EVALSHA", False),
    (f"chat.fetch_pending_messages, {CHATS} chats", "EVALSHA, 10 messages back", False),
    ("presence.record_activity", "MULTI/EXEC of 6", False),
    (f"chat.unread_counts, {CHATS} chats", "ZRANGE, pipeline of 10 EVALSHA", False),
    ("async Mailbox.unread_count", "SCARD", True),
    ("async chat.send_message", "EVALSHA", True),
    ("async RateLimit.hit", "EVALSHA", True),
    ("async presence.record_activity", "MULTI/EXEC of 6", True),
    ("async Lock acquire + release", "2 EVALSHA", True),
    (POOLED, "SCARD", True),
    (f"async Mailbox.unread_count, {CONCURRENCY} concurrent", "one read per caller", True),
]


# -- the worker: one interpreter, one protocol setting ----------------------------------


def configure(url: str, protocol: int | None, prefix: str) -> None:
    """Configure Django as a user would: one URL connection, ``protocol`` in its OPTIONS
    when given (none: the client's default)."""
    import django
    from django.conf import settings

    options = {} if protocol is None else {"protocol": protocol}
    settings.configure(
        INSTALLED_APPS=[],
        REDISPARTS={
            "KEY_PREFIX": prefix,
            "CONNECTIONS": {"default": {"URL": url, "OPTIONS": options}},
        },
    )
    django.setup()


def spoken_protocol(client: Any) -> int:
    """The RESP version a connection of ``client``'s pool spoke: 3 after a HELLO 3
    handshake, else 2 (redis-py sends no HELLO for RESP2)."""
    pool = client.connection_pool
    with warnings.catch_warnings():  # redis-py 8 deprecates get_connection's arguments
        warnings.simplefilter("ignore")
        connection = pool.get_connection("PING")
    try:
        connection.connect()
        meta = connection.handshake_metadata or {}
        proto = meta.get(b"proto", meta.get("proto"))
        return int(proto) if proto is not None else 2
    finally:
        pool.release(connection)


def sync_cases(client: Any) -> dict[str, tuple[Callable[[], Any], Callable[[], Any] | None]]:
    """Return {case: (call, untimed preparation or None)} of the sync paths."""
    from bench.client_floor import paths, prepare
    from redisparts_app.services import chat, presence
    from redisparts_app.services.locks import Lock
    from redisparts_app.services.tasks import TaskQueue

    prepare(client)
    floor = paths(client)
    for n in range(CHATS):
        chat.create_chat("poster", ["reader", "counter"], "hello", chat_id=f"c{n}", client=client)
    chat.create_chat("poster", ["reader"], "hello", chat_id="room", client=client)
    chat.fetch_pending_messages("reader", client=client)  # learns the chats: one trip after
    queue = TaskQueue("bench", client=client)

    def lock_pair() -> None:
        with Lock("pair", ttl=10, timeout=10, client=client):
            pass

    def new_messages() -> None:
        chat.fetch_pending_messages("poster", client=client)  # so read messages are deleted
        for n in range(CHATS):
            chat.send_message(f"c{n}", "poster", "a new message", client=client)

    chosen = {
        name: floor[name]
        for name in (
            "GET",
            "SET",
            "ZADD",
            "presence.is_online",
            "AddressBook.complete (lex)",
            "RecentContacts.add",
            "Lock.try_acquire, lock held",
        )
    }
    return {
        **{name: (call, None) for name, call in chosen.items()},
        "Lock acquire + release": (lock_pair, None),
        "TaskQueue.enqueue": (
            lambda: queue.enqueue("bench.job", args=(1, 0.0), queue="bench"),
            None,
        ),
        "chat.send_message": (
            lambda: chat.send_message("room", "poster", "hello", client=client),
            None,
        ),
        f"chat.fetch_pending_messages, {CHATS} chats": (
            lambda: chat.fetch_pending_messages("reader", client=client),
            new_messages,
        ),
        "presence.record_activity": (
            lambda: presence.record_activity("alice", client=client),
            None,
        ),
        f"chat.unread_counts, {CHATS} chats": (
            lambda: chat.unread_counts("counter", client=client),
            None,
        ),
    }


def async_cases(aclient: Any) -> dict[str, Callable[[], Any]]:
    """Return {case: coroutine function} of the async faces (one caller)."""
    from redisparts_app.services import chat, mail, presence, ratelimit
    from redisparts_app.services.locks import Lock

    box = mail.Mailbox("ann", client=aclient)
    # A 1 s window: the log keeps about a second of events whatever the run's length.
    limit = ratelimit.RateLimit("bench", 10**9, 1, client=aclient)
    lock = Lock("apair", ttl=10, timeout=10, client=aclient)

    async def lock_pair() -> None:
        await lock.aacquire()
        await lock.arelease()

    return {
        "async Mailbox.unread_count": box.aunread_count,
        "async chat.send_message": lambda: chat.asend_message(
            "room", "poster", "hello", client=aclient
        ),
        "async RateLimit.hit": lambda: limit.ahit("room"),
        "async presence.record_activity": lambda: presence.arecord_activity("bob", client=aclient),
        "async Lock acquire + release": lock_pair,
    }


def time_sync(call: Callable[[], Any], prepare: Callable[[], Any] | None, seconds: float):
    """Call ``call`` for ``seconds``; return (CPU µs per call, median wall µs per call)."""
    cpu_clock, wall_clock = time.process_time, time.perf_counter
    cpu, walls = 0.0, []
    end = wall_clock() + seconds
    while wall_clock() < end:
        if prepare is not None:
            prepare()
        cpu_start, wall_start = cpu_clock(), wall_clock()
        call()
        walls.append(wall_clock() - wall_start)
        cpu += cpu_clock() - cpu_start
    return 1e6 * cpu / len(walls), 1e6 * statistics.median(walls)


async def time_async(call: Callable[[], Any], seconds: float):
    """The async twin of ``time_sync``: ``call()`` awaited one after the other."""
    cpu_clock, wall_clock = time.process_time, time.perf_counter
    cpu, walls = 0.0, []
    end = wall_clock() + seconds
    while wall_clock() < end:
        cpu_start, wall_start = cpu_clock(), wall_clock()
        await call()
        walls.append(wall_clock() - wall_start)
        cpu += cpu_clock() - cpu_start
    return 1e6 * cpu / len(walls), 1e6 * statistics.median(walls)


async def time_concurrent(calls: list[Callable[[], Any]], seconds: float):
    """``calls`` (one per caller) all at once for ``seconds``: (CPU µs per call, wall
    µs per call, i.e. the elapsed time over the calls made)."""
    end = time.perf_counter() + seconds
    counts = [0] * len(calls)

    async def caller(index: int) -> None:
        while time.perf_counter() < end:
            await calls[index]()
            counts[index] += 1

    cpu_start, wall_start = time.process_time(), time.perf_counter()
    await asyncio.gather(*(caller(index) for index in range(len(calls))))
    total = sum(counts)
    return (
        1e6 * (time.process_time() - cpu_start) / total,
        1e6 * (time.perf_counter() - wall_start) / total,
    )


def worker(url: str, protocol: int | None, prefix: str) -> None:
    """Answer requests read from stdin, one JSON line each ({"case", "seconds"}), with
    one JSON line of figures on stdout, after a first line describing the client."""
    out, sys.stdout = sys.stdout, sys.stderr  # stdout carries the answers only
    configure(url, protocol, prefix)
    import hiredis
    import redis
    import redis.asyncio

    from redisparts_app.connection import get_async_redis, get_redis
    from redisparts_app.services import mail

    client = get_redis()
    calls = sync_cases(client)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    async def make_async() -> Any:
        return get_async_redis()

    aclient = loop.run_until_complete(make_async())
    acalls = async_cases(aclient)
    options = {} if protocol is None else {"protocol": protocol}
    pooled = redis.asyncio.Redis.from_url(url, **options)
    acalls[POOLED] = lambda: pooled.scard("bench:set")
    boxes = [mail.Mailbox(f"user{n}", client=aclient).aunread_count for n in range(CONCURRENCY)]
    loop.run_until_complete(acalls["async Mailbox.unread_count"]())
    hello = {
        "redis_py": redis.__version__,
        "hiredis": hiredis.__version__,
        "python": sys.version.split()[0],
        "protocol_option": protocol,
        "spoken": spoken_protocol(client),
        "async_shared_connection": bool(aclient._can_multiplex()),
    }
    print(json.dumps(hello), file=out, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        case, seconds = request["case"], request["seconds"]
        if case in calls:
            figures = time_sync(*calls[case], seconds)
        elif case in acalls:
            figures = loop.run_until_complete(time_async(acalls[case], seconds))
        else:  # the concurrent case
            figures = loop.run_until_complete(time_concurrent(boxes, seconds))
        print(json.dumps({"cpu": figures[0], "wall": figures[1]}), file=out, flush=True)
    loop.run_until_complete(aclient.aclose())
    loop.run_until_complete(pooled.aclose())


class Worker:
    """A worker process of ``python`` (see ``worker``), asked for one figure at a time."""

    def __init__(self, python: str, url: str, protocol: int | None, prefix: str) -> None:
        command = [python, "-m", "bench.clients", "--worker", url, "--prefix", prefix]
        if protocol is not None:
            command += ["--protocol", str(protocol)]
        self.process = subprocess.Popen(
            command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.hello = self._answer()

    def _answer(self) -> dict[str, Any]:
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line:
            raise RuntimeError(f"bench.clients worker {self.process.args} ended early")
        return json.loads(line)

    def measure(self, case: str, seconds: float) -> dict[str, float]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"case": case, "seconds": seconds}) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# -- the run: three workers taking turns ------------------------------------------------

BASE, OTHER, OTHER2 = "base", "other", "other2"


def ping_baseline(server: Any) -> str | None:
    """``redis-benchmark -c 1 -P 1 -t ping`` on ``server``: its PING_MBULK requests/s and
    p50, the machine's round trip with no Python in it; None without redis-benchmark."""
    if redis_benchmark_path() is None:
        return None
    where = ["-h", server.host, "-p", str(server.port)]
    out = subprocess.run(
        [
            redis_benchmark_path(),
            *where,
            "-c",
            "1",
            "-P",
            "1",
            "-n",
            "20000",
            "-t",
            "ping",
            "--csv",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    # CSV: a header line, then "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...
    fields = [line.replace('"', "").split(",") for line in out.strip().splitlines()]
    row = next(row for row in fields if row[0] == "PING_MBULK")
    return f"{float(row[1]):,.0f} requests/s, p50 {1000 * float(row[4]):g} µs"


def measure(ctx: Context, python: str) -> tuple[dict[str, dict[str, Any]], Samples]:
    """Start the three workers, run the turns; return each worker's hello and the figures
    (per turn, ``"<case>|<variant>"``: {"cpu": µs, "wall": µs})."""
    url = ctx.url("tcp")
    ctx.flush()
    workers: dict[str, Worker] = {}
    try:
        workers[BASE] = Worker(sys.executable, url, None, "w0")
        workers[OTHER] = Worker(python, url, None, "w1")
        workers[OTHER2] = Worker(python, url, 2, "w2")
        seconds = ctx.seconds(BLOCK, 0.05)
        shuffle = random.Random(0).shuffle
        order = list(workers)
        for case, _sent, _async in CASES:  # a warm-up turn, dropped
            for name in order:
                workers[name].measure(case, min(seconds, 0.1))
        rounds = []
        for _ in range(2 if ctx.quick else ctx.repetitions * TURNS):
            figures: dict[str, dict[str, float]] = {}
            for case, _sent, _async in CASES:
                shuffle(order)
                for name in order:
                    figures[f"{case}|{name}"] = workers[name].measure(case, seconds)
            rounds.append(figures)
    finally:
        for each in workers.values():
            each.close()
    return {name: each.hello for name, each in workers.items()}, Samples(rounds)


def pairs(hello: dict[str, dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The ratios of each case: (variant, over variant, label)."""
    base, other = hello[BASE]["redis_py"], hello[OTHER]["redis_py"]
    return [
        (OTHER, BASE, f"{other} / {base}"),
        (OTHER2, BASE, f"{other} protocol=2 / {base}"),
        (OTHER, OTHER2, f"RESP{hello[OTHER]['spoken']} / RESP2 on {other}"),
    ]


def ratio_spread(samples: Samples, a: str, b: str, key: str) -> str:
    """The lowest..highest of the per-turn ratios a/b."""
    values = [row[a][key] / row[b][key] for row in samples.rounds if row[b][key]]
    return f"{min(values):.2f}..{max(values):.2f}"


def section(
    samples: Samples, hello: dict[str, dict[str, Any]], async_faces: bool, key: str
) -> Section:
    """One table: the sync paths or the async faces, by CPU (``key`` "cpu") or wall time.

    Each case's ratios are Ratios in the CPU tables; every table gives the median of
    its cases' ratios."""
    base, other = hello[BASE]["redis_py"], hello[OTHER]["redis_py"]
    kind = "async faces" if async_faces else "sync paths"
    figure = "CPU" if key == "cpu" else "wall"
    rows, ratios = [], []
    medians: dict[str, list[float]] = {}
    for case, sent, is_async in CASES:
        if is_async != async_faces:
            continue
        row: list[Any] = [case, sent]
        row += [samples.median(f"{case}|{name}", key) for name in (BASE, OTHER, OTHER2)]
        for a, b, label in pairs(hello):
            value = samples.ratio(f"{case}|{a}", f"{case}|{b}", key)
            if case != POOLED:  # not a service's path
                medians.setdefault(label, []).append(value)
            spread = ratio_spread(samples, f"{case}|{a}", f"{case}|{b}", key)
            row.append(f"{value:.2f} ({spread})")
            if key == "cpu":
                ratios.append(Ratio(f"{label} {figure}, {case}", value))
        rows.append(row)
    for label, values in medians.items():
        ratios.append(Ratio(f"{label} {figure}, median of the {kind}", statistics.median(values)))
    what = "CPU µs per call" if key == "cpu" else "wall µs per call (median)"
    return Section(
        title=f"Clients, {kind}: {what}, redis-py {other} beside {base}",
        columns=[
            "case",
            "sends",
            base,
            f"{other} (RESP{hello[OTHER]['spoken']})",
            f"{other} protocol=2",
            *(label for _a, _b, label in pairs(hello)),
        ],
        rows=rows,
        ratios=ratios,
    )


def run(ctx: Context) -> list[Section]:
    if not ctx.client_python:
        note = "no --client-python given (make bench passes its redis-py 8 virtualenv's)"
        return [Section("Clients: nothing to compare", ["case"], [], notes=[note])]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    before = ping_baseline(ctx.servers["tcp"])
    hello, samples = measure(ctx, ctx.client_python)
    after = ping_baseline(ctx.servers["tcp"])
    base, other = hello[BASE]["redis_py"], hello[OTHER]["redis_py"]
    sections = [
        section(samples, hello, async_faces, key)
        for key in ("cpu", "wall")
        for async_faces in (False, True)
    ]
    seconds = ctx.seconds(BLOCK, 0.05)
    spoken = {name: hello[name]["spoken"] for name in hello}
    sections[0].checks = [
        Check(
            f"{other} with protocol=2 speaks RESP2",
            spoken[OTHER2] == 2,
            f"{base}: RESP{spoken[BASE]}, {other}: RESP{spoken[OTHER]} (with no protocol "
            f"argument), {other} protocol=2: RESP{spoken[OTHER2]}",
        )
    ]
    shared = ", ".join(
        f"{label}: {'yes' if hello[name]['async_shared_connection'] else 'no'}"
        for name, label in ((BASE, base), (OTHER, other), (OTHER2, f"{other} protocol=2"))
    )
    for each in sections:
        each.notes = [
            f"{len(samples.rounds)} turns of {seconds:g} s per variant and case, the three "
            "variants in a new random order each turn; figures: medians of the turns; "
            "ratios: median of the per-turn ratios (lowest..highest)",
            "; ".join(
                f"{hello[name]['redis_py']}: Python {hello[name]['python']}, "
                f"hiredis {hello[name]['hiredis']}"
                for name in (BASE, OTHER)
            ),
        ]
    sections[0].notes.append(f"load average before the turns: {load}")
    if before is not None:
        sections[0].notes.append(
            f"redis-benchmark -c 1 -P 1 PING (the round trip without Python): {before} "
            f"before the turns, {after} after"
        )
    sections[1].notes.append(f"the async client shares one connection (MultiplexedRedis): {shared}")
    sections[3].notes.append(
        f"{CONCURRENCY} concurrent: the elapsed time over the calls made, not a median"
    )
    return sections


def worker_main() -> None:
    parser = argparse.ArgumentParser(description="a bench.clients worker (see the module)")
    parser.add_argument("--worker", metavar="URL", required=True)
    parser.add_argument("--protocol", type=int, default=None)
    parser.add_argument("--prefix", default="w0")
    options = parser.parse_args()
    worker(options.worker, options.protocol, options.prefix)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker_main()
    else:
        main(run, __doc__.splitlines()[0])
