"""Client floor: one connection, one command at a time, against redis-benchmark -c 1 -P 1.

For each path (redis-py's GET, SET and ZADD, and single-command paths of the services),
the command it sends is recorded once, then the path is timed from Python (calls/s) and
``redis-benchmark -c 1 -P 1`` sends that very command, same keys and arguments, to the
same server: the physical limit of one connection doing one round trip at a time. The
two are measured in alternating rounds, over TCP loopback and over a unix socket.
Without redis-benchmark on PATH (Debian: redis-tools) its column is skipped.

    .venv/bin/python -m bench.client_floor [--quick] [--repetitions 3]
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import redis

from bench.harness import (
    TRANSPORTS,
    Context,
    Ratio,
    Section,
    alternate,
    main,
    rate,
    redis_benchmark_path,
)

SLICE, SLICES = 0.3, 3  # seconds per measurement, rounds per repetition
TARGET = 0.5  # our single-command paths reach at least half of redis-benchmark -c 1
REDIS_PY = ("GET", "SET", "ZADD")


class RecordingRedis(redis.Redis):
    """A client that keeps the arguments of every command it sends."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.recorded: list[tuple] = []

    def execute_command(self, *args, **options):
        self.recorded.append(args)
        return super().execute_command(*args, **options)


def paths(client) -> dict[str, Callable[[], object]]:
    """Return {label: call} for every path measured, each sending one command on ``client``."""
    from redisparts_app.services import presence
    from redisparts_app.services.autocomplete import AddressBook, RecentContacts
    from redisparts_app.services.locks import Lock

    contacts = RecentContacts("alice", client=client)
    book = AddressBook("guild", method="lex", client=client)
    waiter = Lock("busy", ttl=600, client=client)
    return {
        "GET": lambda: client.get("bench:key"),
        "SET": lambda: client.set("bench:key", "xxx"),
        "ZADD": lambda: client.zadd("bench:zset", {"member": 1}),
        "presence.is_online": lambda: presence.is_online("alice", client=client),
        "RecentContacts.add": lambda: contacts.add("Bob"),
        "AddressBook.complete (lex)": lambda: book.complete("an"),
        "Lock.try_acquire, lock held": waiter.try_acquire,
    }


def prepare(client) -> None:
    """Write the data the paths read: a guild, a held lock, an active user."""
    from redisparts_app.services import presence
    from redisparts_app.services.autocomplete import AddressBook
    from redisparts_app.services.locks import Lock

    names = [f"{first} {last}" for first in ("Ana", "Anton", "Bea", "Ben") for last in "ABCDE"]
    AddressBook("guild", client=client).join_many(names)
    Lock("busy", ttl=600, client=client).acquire()
    presence.record_activity("alice", client=client)


def record(server, label: str) -> list[bytes]:
    """Return the one command ``label``'s path sends, as redis-benchmark arguments."""
    client = RecordingRedis.from_url(server.url)
    call = paths(client)[label]
    call()  # loads its script, if any, so the recorded EVALSHA finds it
    client.recorded.clear()
    call()
    if len(client.recorded) != 1:
        raise RuntimeError(f"{label} sent {len(client.recorded)} commands, not one")
    return [arg if isinstance(arg, bytes) else str(arg).encode() for arg in client.recorded[0]]


def redis_benchmark(server, command: list[bytes], requests: int) -> float:
    """Return requests/s of ``redis-benchmark -c 1 -P 1`` sending ``command``."""
    where = (
        ["-s", str(server.socket)] if server.socket else ["-h", server.host, "-p", str(server.port)]
    )
    options = ["-c", "1", "-P", "1", "-n", str(requests), "--csv"]
    out = subprocess.run(
        [redis_benchmark_path(), *where, *options, *command],
        capture_output=True,
        check=True,
        timeout=120,
    ).stdout.decode(errors="replace")
    # CSV: a header line, then "name","rps",...
    return float(out.strip().splitlines()[-1].split(",")[1].strip('"'))


def transport_section(ctx: Context, transport: str) -> Section:
    server = ctx.servers[transport]
    client = ctx.client(transport)
    prepare(client)
    calls = paths(client)
    have_benchmark = redis_benchmark_path() is not None
    seconds = ctx.seconds(SLICE, quick=0.2)
    variants = {}
    sent = {}
    for label, call in calls.items():
        variants[label] = lambda call=call: rate(call, seconds)
        command = sent[label] = record(server, label)
        if have_benchmark:
            # About as many requests as redis-py makes in the same time, for similar runs.
            requests = max(2000, int(rate(call, 0.1) * seconds * 1.5))
            variants[f"{label}|bench"] = lambda c=command, n=requests: redis_benchmark(server, c, n)
    # Many short slices in turn: each ratio compares runs a fraction of a second apart.
    samples = alternate(variants, ctx.repetitions * SLICES, warmup=True)
    rows, ratios = [], []
    for label in calls:
        bench = f"{label}|bench"
        ratio = samples.ratio(label, bench) if have_benchmark else None
        rows.append(
            [
                label,
                sent[label][0].decode(),
                samples.median(label),
                samples.spread(label),
                samples.median(bench) if have_benchmark else None,
                ratio,
            ]
        )
        if have_benchmark:
            target = None if label in REDIS_PY else TARGET
            ratios.append(Ratio(f"{label} / redis-benchmark -c 1, {transport}", ratio, target))
    notes = [
        f"{ctx.repetitions * SLICES} rounds of about {seconds:g} s per variant, Python and "
        "redis-benchmark taking turns; figures and ratios are medians of the rounds"
    ]
    if not have_benchmark:
        notes.append("redis-benchmark not found on PATH (Debian: redis-tools): column skipped")
    return Section(
        title=f"Client floor, {transport}: one command at a time on one connection",
        columns=["path", "command", "calls/s", "range", "redis-benchmark -c 1", "ratio"],
        rows=rows,
        ratios=ratios,
        notes=notes,
    )


def run(ctx: Context) -> list[Section]:
    return [transport_section(ctx, transport) for transport in TRANSPORTS]


if __name__ == "__main__":
    main(run, __doc__.splitlines()[0])
