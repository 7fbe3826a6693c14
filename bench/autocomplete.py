"""Address-book completion: the ZRANGEBYLEX method against the book's sentinel + WATCH method.

A throwaway local redis-server holds one guild of ``--names`` generated names (Latin,
accented, Chinese, two-word). Each variant runs ``--processes`` processes looking up
random 1-3 character prefixes (limit 10) for ``--seconds``, optionally with one more
process joining and leaving names all the time (``--writers 1``). Side by side with the
physical limits of the same run: PING (one round trip) and one bare ZRANGEBYLEX
``LIMIT 0 10`` (one round trip that reads the same entries, without sentinel
filtering or de-duplication)::

    .venv/bin/python bench/autocomplete.py [--seconds 3] [--processes 4] [--writers 1]

Figures are lookups per second over all processes and, for the book method, the WATCH
conflicts per lookup and the lookups that gave up (CompletionConflict after 100
attempts); absolute numbers are noise on a shared machine, compare ratios.
"""

import argparse
import multiprocessing
import random
import sys
import tempfile
import time
from pathlib import Path

import django
from django.conf import settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

GUILD = "bench"
SYLLABLES = ["an", "be", "ca", "do", "é", "fi", "gö", "ha", "li", "mo", "nu", "ra", "so", "zo"]
CHINESE = "李王张刘陈杨黄赵吴周"


def make_names(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    names: set[str] = set()
    while len(names) < count:
        first = "".join(rng.choices(SYLLABLES, k=rng.randint(2, 3))).capitalize()
        kind = rng.random()
        if kind < 0.1:
            names.add("".join(rng.choices(CHINESE, k=rng.randint(2, 3))))
        elif kind < 0.5:
            last = "".join(rng.choices(SYLLABLES, k=2)).capitalize()
            names.add(f"{first} {last}")
        else:
            names.add(first)
    return sorted(names)


def prefixes(names: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)
    return [name[: rng.randint(1, 3)] for name in rng.sample(names, 500)]


def lookup_worker(url: str, label: str, names: list[str], seconds: float, seed, results):
    import redis

    from redisparts_app.exceptions import CompletionConflict
    from redisparts_app.services.autocomplete import AddressBook, validate_prefix

    client = redis.Redis.from_url(url)
    book = AddressBook(GUILD, method=label if label in ("lex", "book") else "lex", client=client)
    queries = prefixes(names, seed)
    if label == "PING":
        call = lambda prefix: client.ping()  # noqa: E731
    elif label == "bare ZRANGEBYLEX":

        def call(prefix: str):
            query = validate_prefix(prefix).encode()
            return client.zrangebylex(book.index_key, b"[" + query, b"(" + query + b"\xff", 0, 10)
    else:
        call = book.complete
    done = failed = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        try:
            call(queries[done % len(queries)])
        except CompletionConflict:
            failed += 1
        done += 1
    results.put(("lookup", done, book.conflicts, failed))


def writer_worker(url: str, seconds: float, results) -> None:
    import redis

    from redisparts_app.services.autocomplete import AddressBook

    book = AddressBook(GUILD, client=redis.Redis.from_url(url))
    writes = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        name = f"Anna Writer {writes % 50}"
        book.join(name)
        book.leave(name)
        writes += 2
    results.put(("write", writes, 0, 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--writers", type=int, default=1, choices=[0, 1])
    parser.add_argument("--names", type=int, default=20_000)
    options = parser.parse_args()
    settings.configure(REDISPARTS={"KEY_PREFIX": "bench"}, INSTALLED_APPS=[])
    django.setup()
    from redisparts_app.services.autocomplete import AddressBook
    from redisparts_app.testing import RedisServer

    context = multiprocessing.get_context("fork")
    names = make_names(options.names)
    with tempfile.TemporaryDirectory() as directory, RedisServer(directory) as server:
        client = server.client()
        AddressBook(GUILD, client=client).join_many(names)
        print(
            f"{len(names)} names, {options.processes} lookup processes, "
            f"{options.writers} writer, {options.seconds:g} s per variant"
        )
        print(
            f"{'variant':<20} {'lookups/s':>10} {'conflicts/lookup':>17} {'gave up':>8}"
            f" {'writes/s':>9}"
        )
        for label in ("PING", "bare ZRANGEBYLEX", "lex", "book"):
            results = context.Queue()
            procs = [
                context.Process(
                    target=lookup_worker,
                    args=(server.url, label, names, options.seconds, seed, results),
                )
                for seed in range(options.processes)
            ]
            if options.writers:
                procs.append(
                    context.Process(
                        target=writer_worker, args=(server.url, options.seconds, results)
                    )
                )
            for proc in procs:
                proc.start()
            outcomes = [results.get(timeout=options.seconds + 60) for _ in procs]
            for proc in procs:
                proc.join()
            done = sum(count for kind, count, _, _ in outcomes if kind == "lookup")
            conflicts = sum(conflict for _, _, conflict, _ in outcomes)
            failed = sum(fail for _, _, _, fail in outcomes)
            writes = sum(count for kind, count, _, _ in outcomes if kind == "write")
            print(
                f"{label:<20} {done / options.seconds:>10.0f} {conflicts / max(done, 1):>17.3f}"
                f" {failed:>8} {writes / options.seconds:>9.0f}"
            )


if __name__ == "__main__":
    main()
