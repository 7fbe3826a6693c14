"""Most simultaneous holders seen: the book's semaphores against redisparts', side by side.

8 processes contend for a semaphore of limit 3 for a few seconds on a throwaway local
redis-server. Each one loops: try to acquire (no wait), and when it gets in, count itself
in with INCR on a separate key (keeping the highest count seen), sleep 5 ms, DECR, and
release; when it does not, sleep 1 ms as the book's callers do. Any figure above 3 is a
broken limit. The book's versions are re-implemented faithfully (same steps and
pipelines, current redis-py API), race included::

    .venv/bin/python bench/semaphores.py [--seconds 4] [--processes 8] [--limit 3]

Acquisitions per second are shown for context only; they are noise on a shared machine.
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

ENTER_LUA = """
local n = redis.call('INCR', KEYS[1])
if n > tonumber(redis.call('GET', KEYS[2]) or '0') then
  redis.call('SET', KEYS[2], n)
end
return n
"""
ACTIVE, HIGHEST = "bench:active", "bench:highest"


# The book's versions (Redis in Action 6.3), with the race they have.


def book_acquire(conn, semname, limit, timeout=10):
    identifier = str(uuid.uuid4())
    now = time.time()
    pipe = conn.pipeline(True)
    pipe.zremrangebyscore(semname, "-inf", now - timeout)
    pipe.zadd(semname, {identifier: now})
    pipe.zrank(semname, identifier)
    if pipe.execute()[-1] < limit:
        return identifier
    conn.zrem(semname, identifier)
    return None


def book_release(conn, semname, identifier):
    return conn.zrem(semname, identifier)


def book_acquire_fair(conn, semname, limit, timeout=10):
    identifier = str(uuid.uuid4())
    czset, ctr = semname + ":owner", semname + ":counter"
    now = time.time()
    pipe = conn.pipeline(True)
    pipe.zremrangebyscore(semname, "-inf", now - timeout)
    pipe.zinterstore(czset, {czset: 1, semname: 0})
    pipe.incr(ctr)
    counter = pipe.execute()[-1]
    pipe.zadd(semname, {identifier: now})
    pipe.zadd(czset, {identifier: counter})
    pipe.zrank(czset, identifier)
    if pipe.execute()[-1] < limit:
        return identifier
    pipe.zrem(semname, identifier)
    pipe.zrem(czset, identifier)
    pipe.execute()
    return None


def book_release_fair(conn, semname, identifier):
    pipe = conn.pipeline(True)
    pipe.zrem(semname, identifier)
    pipe.zrem(semname + ":owner", identifier)
    return pipe.execute()[0]


def book_acquire_lock(conn, lockname, acquire_timeout):
    identifier = str(uuid.uuid4())
    end = time.time() + acquire_timeout
    while time.time() < end:
        if conn.setnx("lock:" + lockname, identifier):
            return identifier
        time.sleep(0.001)
    return False


def book_release_lock(conn, lockname, identifier):
    lockname = "lock:" + lockname
    with conn.pipeline(True) as pipe:
        while True:
            try:
                pipe.watch(lockname)
                if pipe.get(lockname) == identifier.encode():
                    pipe.multi()
                    pipe.delete(lockname)
                    pipe.execute()
                    return True
                pipe.unwatch()
                break
            except Exception:  # noqa: S112 - WatchError: retry, as the book does
                continue
    return False


def book_acquire_with_lock(conn, semname, limit, timeout=10):
    identifier = book_acquire_lock(conn, semname, acquire_timeout=0.01)
    if identifier:
        try:
            return book_acquire_fair(conn, semname, limit, timeout)
        finally:
            book_release_lock(conn, semname, identifier)
    return None


def contenders(conn, limit):
    """Return {label: (acquire(), release(id))} for every variant measured."""
    from redisparts_app.services.semaphores import FairSemaphore, Semaphore

    basic = Semaphore("bench", limit, client=conn)
    fair = FairSemaphore("bench", limit, client=conn)
    return {
        "book basic (acquire_semaphore)": (
            lambda: book_acquire(conn, "sem:basic", limit),
            lambda i: book_release(conn, "sem:basic", i),
        ),
        "book fair (acquire_fair_semaphore)": (
            lambda: book_acquire_fair(conn, "sem:fair", limit),
            lambda i: book_release_fair(conn, "sem:fair", i),
        ),
        "book fair + lock (acquire_semaphore_with_lock)": (
            lambda: book_acquire_with_lock(conn, "sem:locked", limit),
            lambda i: book_release_fair(conn, "sem:locked", i),
        ),
        "redisparts Semaphore (Lua)": (basic.acquire, basic.release),
        "redisparts FairSemaphore (Lua, TIME)": (fair.acquire, fair.release),
    }


def worker(url: str, label: str, limit: int, seconds: float, results) -> None:
    import redis

    conn = redis.Redis.from_url(url)
    enter = conn.register_script(ENTER_LUA)
    acquire, release = contenders(conn, limit)[label]
    entries = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        identifier = acquire()
        if not identifier:
            time.sleep(0.001)
            continue
        enter(keys=[ACTIVE, HIGHEST])
        time.sleep(0.005)
        conn.decr(ACTIVE)
        release(identifier)
        entries += 1
    results.put(entries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--limit", type=int, default=3)
    options = parser.parse_args()
    settings.configure(REDISPARTS={"KEY_PREFIX": "bench"}, INSTALLED_APPS=[])
    django.setup()
    from redisparts_app.testing import RedisServer

    context = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory() as directory, RedisServer(directory) as server:
        client = server.client()
        labels = list(contenders(client, options.limit))
        print(
            f"{options.processes} processes, limit {options.limit}, "
            f"{options.seconds:g} s each; most holders seen at once:"
        )
        for label in labels:
            client.flushdb()
            results = context.Queue()
            procs = [
                context.Process(
                    target=worker,
                    args=(server.url, label, options.limit, options.seconds, results),
                )
                for _ in range(options.processes)
            ]
            for proc in procs:
                proc.start()
            entries = sum(results.get(timeout=options.seconds + 60) for _ in procs)
            for proc in procs:
                proc.join()
            highest = int(client.get(HIGHEST) or 0)
            verdict = "ok" if highest <= options.limit else "LIMIT BROKEN"
            print(
                f"  {label:<48} {highest:>2}  {verdict:<12} "
                f"({entries / options.seconds:.0f} acquisitions/s)"
            )


if __name__ == "__main__":
    main()
