"""Locks: redisparts Lock against redis-py's Lock, python-redis-lock and pottery's Redlock.

Two sections, all on the harness's TCP loopback server, every lock with its defaults
for waiting (redis-py polls every 0.1 s, python-redis-lock blocks in BLPOP on a
release signal, pottery's Redlock retries after a random delay of up to 0.2 s,
redisparts blocks in BLPOP until a release wakes one waiter):

- uncontended: acquire + release pairs per second, one process, a new lock object
  per pair as users write it (``with Lock(...):``); the variants take turns pair by
  pair (in a new random order each turn: ``paired.interleaved``) and a figure is 1 /
  the median time of a pair, so a pair of
  one variant is compared with pairs of the others made microseconds apart (on a
  loaded machine, slices of wall time swing from one to the next by 10x or more).
  pottery takes its turns in a window of its own next to each round: every acquire and
  release of it starts and joins a thread pool, which slows whatever call comes next.
  Beside them the floor, the leanest correct lock: SET NX PX of a random token and a
  compare-and-delete script, and the cost of redisparts' guarantees as a row of its own:
  its two scripts sent bare (the fencing token's INCR, the wake-up signal's push);
- contended: 4 processes each doing 500 read-modify-write increments (GET, +1, SET)
  of one counter under the lock; throughput (increments/s over the whole run), the
  mean and max wait to acquire, and lost updates, checked independently: every
  increment also INCRs a separate key outside the lock, and the counter must equal it.
  Commands per increment come from INFO commandstats (polling shows up there).

    .venv/bin/python -m bench.locks [--quick] [--repetitions 3]
"""

from __future__ import annotations

import os
import time
import warnings

from bench.harness import (
    Check,
    Context,
    Ratio,
    Samples,
    Section,
    alternate,
    main,
    run_processes,
)
from bench.paired import interleaved

PROCESSES = 4
INCREMENTS = 500
ROUND, ROUNDS = 2.0, 2  # uncontended: seconds per round, rounds per repetition
TTL = 10  # seconds; long enough for any wait in a run, so no lock expires under load
COUNTER, DONE = "bench:counter", "bench:done"

LABELS = {
    "redisparts": "redisparts Lock",
    "redis-py": "redis-py Lock",
    "python-redis-lock": "python-redis-lock",
    "pottery": "pottery Redlock (1 master)",
}


def use_lock(label: str, client, name: str):
    """Return a function that takes and releases lock ``name`` as users write it:
    ``with <a new lock object>:``, for the variant ``label``."""
    if label == "redisparts":
        from redisparts_app.services.locks import Lock

        def use() -> None:
            with Lock(name, ttl=TTL, timeout=60, client=client):
                pass

        return use
    if label == "redis-py":

        def use() -> None:
            with client.lock(name, timeout=TTL):
                pass

        return use
    if label == "python-redis-lock":
        import redis_lock

        def use() -> None:
            with redis_lock.Lock(client, name, expire=TTL):
                pass

        return use
    from pottery import Redlock

    warnings.simplefilter("ignore")  # pottery warns about a single master; that is the setup

    def use() -> None:
        with Redlock(key=name, masters={client}, auto_release_time=TTL):
            pass

    return use


def make_lock(label: str, client, name: str):
    """Return (acquire(), release()) of a fresh lock object of the variant ``label``."""
    if label == "redisparts":
        from redisparts_app.services.locks import Lock

        lock = Lock(name, ttl=TTL, timeout=60, client=client)
        return lock.acquire, lock.release
    if label == "redis-py":
        lock = client.lock(name, timeout=TTL)
        return lock.acquire, lock.release
    if label == "python-redis-lock":
        import redis_lock

        lock = redis_lock.Lock(client, name, expire=TTL)
        return lock.acquire, lock.release
    from pottery import Redlock

    warnings.simplefilter("ignore")  # pottery warns about a single master; that is the setup
    lock = Redlock(key=name, masters={client}, auto_release_time=TTL)
    return lock.acquire, lock.release


COMPARE_AND_DELETE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


def bare_floor(client):
    """Return the leanest correct acquire + release: SET NX PX, compare-and-delete script."""
    key = "bench:floor-lock"
    release = client.script_load(COMPARE_AND_DELETE)

    def pair() -> None:
        token = os.urandom(16).hex()
        client.execute_command("SET", key, token, "NX", "PX", TTL * 1000)
        client.execute_command("EVALSHA", release, 1, key, token)

    return pair


def script_floor(client):
    """Return a pair of bare EVALSHA of redisparts' acquire and release scripts."""
    from redisparts_app import lua
    from redisparts_app.services.locks import lock_keys

    owner, fence, signal = lock_keys("u-floor")
    acquire = client.script_load(lua.source("lease_acquire"))
    release = client.script_load(lua.source("lease_release"))

    def pair() -> None:
        token = os.urandom(16).hex()
        client.execute_command("EVALSHA", acquire, 2, owner, fence, token, TTL * 1000)
        client.execute_command("EVALSHA", release, 2, owner, signal, token, 2000)

    return pair


def uncontended(ctx: Context) -> Section:
    client = ctx.client()
    pairs = {}
    for label in LABELS:
        use = use_lock(label, client, f"u-{label}")
        pairs[label] = lambda _number, use=use: use()
    floor, scripts = bare_floor(client), script_floor(client)
    pairs["floor"] = lambda _number: floor()
    pairs["scripts"] = lambda _number: scripts()
    pottery = {"pottery": pairs.pop("pottery")}
    rounds = []
    for _ in range(ctx.repetitions * ROUNDS):
        rounds += interleaved(pairs, ctx.seconds(ROUND), 1).rounds
        rounds[-1].update(interleaved(pottery, ctx.seconds(ROUND) / 4, 1).rounds[0])
    samples = Samples(rounds)
    names = {
        **LABELS,
        "floor": "floor: SET NX PX + compare-and-delete script",
        "scripts": "redisparts' 2 scripts, bare (floor + fence + wake-up)",
    }
    rows = [
        [
            names[label],
            samples.median(label),
            samples.spread(label),
            samples.ratio("redisparts", label),
        ]
        for label in names
    ]
    return Section(
        title="Locks, uncontended: acquire + release pairs/s (one process, TCP loopback)",
        columns=["lock", "pairs/s", "range", "redisparts / this"],
        rows=rows,
        ratios=[
            Ratio("redisparts / floor", samples.ratio("redisparts", "floor"), 0.9),
            Ratio("redisparts' 2 scripts, bare / floor", samples.ratio("scripts", "floor")),
            Ratio("redisparts / redis-py Lock", samples.ratio("redisparts", "redis-py"), 1.0),
            Ratio(
                "redisparts / python-redis-lock",
                samples.ratio("redisparts", "python-redis-lock"),
                1.3,
            ),
            Ratio("redisparts / pottery Redlock", samples.ratio("redisparts", "pottery")),
        ],
        notes=[
            f"{ctx.repetitions * ROUNDS} rounds of {ctx.seconds(ROUND):g} s; in each, the "
            "variants take turns pair by pair and a figure is 1 / the median time of a pair; "
            "range = min..max of the rounds; pottery in its own window after each round "
            "(its thread pool slows the call after it)",
            "every variant builds a new lock object per pair (with Lock(...): as users "
            "write it); the floor and the bare scripts are sent with execute_command and "
            "nothing else, the fastest an acquire + release of two round trips can be",
            "redisparts' guarantees beyond the floor, in its scripts: a fencing token "
            "(INCR) per acquire, a wake-up push per release (waiters block in BLPOP "
            "instead of polling); the bare-scripts row shows what they cost",
        ],
    )


def increment_worker(url: str, label: str, increments: int) -> tuple[float, float, list[float]]:
    """Do ``increments`` locked GET/+1/SET of the counter.

    Return when it started and ended (perf_counter, one clock for every process on
    Linux) and the wait of each acquire.
    """
    import redis

    client = redis.Redis.from_url(url)
    client.ping()  # connected before the clock starts
    waits = []
    began = time.perf_counter()
    for _ in range(increments):
        acquire, release = make_lock(label, client, "contended")
        started = time.perf_counter()
        acquire()
        waits.append(time.perf_counter() - started)
        value = int(client.get(COUNTER) or 0)
        client.set(COUNTER, value + 1)
        release()
        client.incr(DONE)  # outside the lock: the independent count of increments
    return began, time.perf_counter(), waits


def contended_run(ctx: Context, label: str, increments: int) -> dict[str, float]:
    client = ctx.client()
    client.config_resetstat()
    results = run_processes(
        increment_worker, [(ctx.url(), label, increments)] * PROCESSES, timeout=600
    )
    # From the first process's start to the last one's end: process start-up is left out.
    elapsed = max(end for _, end, _ in results) - min(start for start, _, _ in results)
    waits = [process_waits for _, _, process_waits in results]
    stats = client.info("commandstats")
    done = int(client.get(DONE) or 0)
    counter = int(client.get(COUNTER) or 0)
    flat = [wait for process in waits for wait in process]
    return {
        "increments_per_s": done / elapsed,
        "mean_wait_ms": 1000 * sum(flat) / len(flat),
        "max_wait_ms": 1000 * max(flat),
        "commands_per_increment": sum(entry["calls"] for entry in stats.values()) / done,
        "lost_updates": done - counter,
        "done": done,
    }


def contended(ctx: Context) -> Section:
    increments = 50 if ctx.quick else INCREMENTS
    samples = alternate(
        {label: (lambda label=label: contended_run(ctx, label, increments)) for label in LABELS},
        ctx.repetitions,
    )
    rows = []
    for label in LABELS:
        rows.append(
            [
                LABELS[label],
                samples.median(label, "increments_per_s"),
                samples.spread(label, "increments_per_s"),
                samples.median(label, "mean_wait_ms"),
                samples.median(label, "max_wait_ms"),
                max(samples.values(label, "max_wait_ms")),
                samples.median(label, "commands_per_increment"),
                int(sum(samples.values(label, "lost_updates"))),
            ]
        )
    lost = {label: int(sum(samples.values(label, "lost_updates"))) for label in LABELS}
    expected = PROCESSES * increments
    return Section(
        title=(
            f"Locks, contended: {PROCESSES} processes x {increments} locked read-modify-write "
            "increments (TCP loopback)"
        ),
        columns=[
            "lock",
            "increments/s",
            "range",
            "mean wait ms",
            "max wait ms",
            "worst max ms",
            "commands/incr",
            "lost updates",
        ],
        rows=rows,
        ratios=[
            Ratio(
                "redisparts / redis-py Lock, throughput",
                samples.ratio("redisparts", "redis-py", "increments_per_s"),
                1.0,
            ),
            Ratio(
                "redisparts / redis-py Lock, max wait",
                samples.ratio("redisparts", "redis-py", "max_wait_ms"),
                1.0,
                at_most=True,
            ),
            Ratio(
                "redisparts / python-redis-lock, throughput",
                samples.ratio("redisparts", "python-redis-lock", "increments_per_s"),
            ),
            Ratio(
                "redisparts / pottery Redlock, throughput",
                samples.ratio("redisparts", "pottery", "increments_per_s"),
            ),
        ],
        checks=[
            Check(
                "redisparts: no lost update",
                lost["redisparts"] == 0,
                f"{lost['redisparts']} lost of {expected} x {ctx.repetitions}",
            ),
        ]
        + [
            Check(f"{LABELS[label]}: no lost update", lost[label] == 0, f"{lost[label]} lost")
            for label in LABELS
            if label != "redisparts"
        ],
        notes=[
            f"median of {ctx.repetitions} rounds, variants alternating; worst max = highest "
            "max wait of all rounds",
            "lost updates = increments counted outside the lock (INCR) minus the locked counter",
        ],
    )


def run(ctx: Context) -> list[Section]:
    return [uncontended(ctx), contended(ctx)]


if __name__ == "__main__":
    main(run, __doc__.splitlines()[0])
