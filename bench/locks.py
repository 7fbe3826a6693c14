"""Lock contention: redisparts Lock (Lua, BLPOP wake-up) against the book's 1 ms polling lock.

``--processes`` processes on a throwaway local redis-server take one lock over and over
for ``--seconds``, holding it ``--hold`` ms each time (a sleep standing for the work).
Variants:

- book ``acquire_lock_with_timeout``, with its SETNX/EXPIRE window closed (SET NX EX)
  and its release made to work (WATCH/MULTI on its own pipeline): waiters retry every 1 ms;
- redisparts ``Lock``: one Lua script per attempt, waiters block in BLPOP until a release
  wakes one of them.

Side by side with the physical limit of the same run: one holder at a time can do at most
1000 / hold-ms acquisitions per second. Figures: acquisitions per second over all
processes; per acquisition, the SET NX attempts (INFO commandstats, the SET inside the
Lua script included) and all commands the server ran (Lua-internal ones included); and
the fewest/most acquisitions of one process (fairness)::

    .venv/bin/python bench/locks.py [--seconds 4] [--processes 6] [--hold 2]

Absolute numbers are noise on a shared machine; compare the ratios.
"""

import argparse
import multiprocessing
import sys
import tempfile
import time
import uuid
from pathlib import Path

import django
from django.conf import settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def book_acquire(conn, lockname: str, acquire_timeout: float, lock_timeout: int) -> str | None:
    identifier = str(uuid.uuid4())
    end = time.time() + acquire_timeout
    while time.time() < end:
        if conn.set("lock:" + lockname, identifier, nx=True, ex=lock_timeout):
            return identifier
        time.sleep(0.001)
    return None


def book_release(conn, lockname: str, identifier: str) -> bool:
    import redis

    key = "lock:" + lockname
    with conn.pipeline(True) as pipe:
        while True:
            try:
                pipe.watch(key)
                if pipe.get(key) != identifier.encode():
                    pipe.unwatch()
                    return False
                pipe.multi()
                pipe.delete(key)
                pipe.execute()
                return True
            except redis.WatchError:
                continue


def worker(url: str, label: str, seconds: float, hold: float, results) -> None:
    import redis

    from redisparts_app.services.locks import Lock

    conn = redis.Redis.from_url(url)
    count = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        if label == "book":
            identifier = book_acquire(conn, "bench", acquire_timeout=30, lock_timeout=10)
            time.sleep(hold)
            book_release(conn, "bench", identifier)
        else:
            with Lock("bench", ttl=10, timeout=30, client=conn):
                time.sleep(hold)
        count += 1
    results.put(count)


LABELS = {
    "book": "book acquire_lock_with_timeout (1 ms poll)",
    "redisparts": "redisparts Lock (Lua + BLPOP wake-up)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--hold", type=float, default=2.0, help="milliseconds held each time")
    options = parser.parse_args()
    settings.configure(REDISPARTS={"KEY_PREFIX": "bench"}, INSTALLED_APPS=[])
    django.setup()
    from redisparts_app.testing import RedisServer

    hold = options.hold / 1000
    context = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory() as directory, RedisServer(directory) as server:
        client = server.client()
        print(
            f"{options.processes} processes, {options.seconds:g} s each, "
            f"lock held {options.hold:g} ms per acquisition"
        )
        print(f"  {'physical limit (one holder at a time)':<44} {1 / hold:>8.0f} acquisitions/s")
        for label, title in LABELS.items():
            client.flushdb()
            client.config_resetstat()
            results = context.Queue()
            procs = [
                context.Process(
                    target=worker, args=(server.url, label, options.seconds, hold, results)
                )
                for _ in range(options.processes)
            ]
            for proc in procs:
                proc.start()
            counts = [results.get(timeout=options.seconds + 60) for _ in procs]
            for proc in procs:
                proc.join()
            stats = client.info("commandstats")
            commands = sum(entry["calls"] for entry in stats.values())
            attempts = stats.get("cmdstat_set", {}).get("calls", 0)
            total = max(sum(counts), 1)
            print(
                f"  {title:<44} {total / options.seconds:>8.0f} acquisitions/s  "
                f"{attempts / total:>6.1f} SET attempts  {commands / total:>5.1f} commands each  "
                f"per process {min(counts)}..{max(counts)}"
            )


if __name__ == "__main__":
    main()
