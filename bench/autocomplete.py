"""Address-book completion: the ZRANGEBYLEX method (``lex``) against the book's method.

One guild of 100,000 generated names (Latin, accented, Chinese, two-word) on the
TCP server. One process looks up random 1-3 character prefixes (limit 10). With no
writers, in two pairs whose two variants are called in turn, one call each: a bare
ZRANGEBYLEX ``LIMIT 0 10`` on the prefix folded beforehand (one round trip reading
the same entries, no validation, folding, sentinel filtering or de-duplication: the
floor) with ``lex``, then ``lex`` with ``book``. Then all three in alternating
windows while 3 writer processes join and leave names all the time.
The book method's figures count the lookups that succeeded; it gives up
(CompletionConflict) after 100 WATCH conflicts.

    .venv/bin/python -m bench.autocomplete [--quick]
"""

import multiprocessing
import random
import time

import redis

from bench.harness import Ratio, Section, alternate, main
from bench.paired import interleaved

GUILD = "bench"
NAMES = 100_000
WRITERS = 3
SYLLABLES = ["an", "be", "ca", "do", "é", "fi", "gö", "ha", "li", "mo", "nu", "ra", "so", "zo"]
CHINESE = "李王张刘陈杨黄赵吴周"


def make_names(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    names: set[str] = set()
    while len(names) < count:
        first = "".join(rng.choices(SYLLABLES, k=rng.randint(2, 4))).capitalize()
        kind = rng.random()
        if kind < 0.1:
            names.add("".join(rng.choices(CHINESE, k=rng.randint(2, 4))))
        elif kind < 0.6:
            last = "".join(rng.choices(SYLLABLES, k=rng.randint(2, 3))).capitalize()
            names.add(f"{first} {last}")
        else:
            names.add(first)
    return sorted(names)


def make_prefixes(names: list[str], seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [name[: rng.randint(1, 3)] for name in rng.sample(names, 1000)]


class Lookups:
    """Counts one variant's lookups over a window; keeps the book method's give-ups.

    ``written()`` gives the writers' total writes so far, to report their rate
    during each window.
    """

    def __init__(self, call, prefixes: list[str], seconds: float, written) -> None:
        self.call, self.prefixes, self.seconds, self.written = call, prefixes, seconds, written
        self.done = self.gave_up = 0

    def measure(self) -> dict[str, float]:
        from redisparts_app.exceptions import CompletionConflict

        succeeded, writes, start = 0, self.written(), time.perf_counter()
        end = start + self.seconds
        while time.perf_counter() < end:
            try:
                self.call(self.prefixes[self.done % len(self.prefixes)])
                succeeded += 1
            except CompletionConflict:
                self.gave_up += 1
            self.done += 1
        elapsed = time.perf_counter() - start
        return {
            "rate": succeeded / elapsed,
            # A window without a lookup counts as one: a bound in the variant's favour.
            "bounded": max(succeeded, 1) / elapsed,
            "writes": (self.written() - writes) / elapsed,
        }


def writer(url: str, number: int, stop, written) -> None:
    from redisparts_app.services.autocomplete import AddressBook

    book = AddressBook(GUILD, client=redis.Redis.from_url(url))
    writes = 0
    while not stop.is_set():
        name = f"Anna Writer{number} {writes % 50}"
        book.join(name)
        book.leave(name)
        writes += 2
        written[number] = writes


def run(ctx) -> list[Section]:
    from redisparts_app.services.autocomplete import AddressBook, validate_prefix

    url = ctx.url("tcp")
    client = redis.Redis.from_url(url)
    names = make_names(NAMES)
    started = time.monotonic()
    lex = AddressBook(GUILD, method="lex", client=client)
    lex.join_many(names)
    loaded = time.monotonic() - started
    book = AddressBook(GUILD, method="book", client=client)
    prefixes = make_prefixes(names)
    folded = {p: validate_prefix(p).encode() for p in prefixes}

    def bare(prefix: str) -> list[bytes]:
        query = folded[prefix]
        return client.zrangebylex(lex.index_key, b"[" + query, b"(" + query + b"\xff", 0, 10)

    calls = {"bare ZRANGEBYLEX": bare, "lex": lex.complete, "book": book.complete}

    def paired(*names: str):
        return interleaved(
            {name: lambda i, f=calls[name]: f(prefixes[i % len(prefixes)]) for name in names},
            ctx.seconds(2.0),
            ctx.repetitions,
        )

    # Two pairs: a call right after a book lookup (its WATCH/MULTI connection, its
    # sentinels) runs a few µs slower, which would tilt lex against the bare call.
    floor = paired("bare ZRANGEBYLEX", "lex")
    against_book = paired("lex", "book")
    quiet = {"bare ZRANGEBYLEX": floor, "lex": floor, "book": against_book}
    quiet_conflicts = book.conflicts

    context = multiprocessing.get_context("fork")
    stop, written = context.Event(), context.Array("q", WRITERS, lock=False)
    writers = [
        context.Process(target=writer, args=(url, n, stop, written), daemon=True)
        for n in range(WRITERS)
    ]
    for process in writers:
        process.start()
    book.conflicts = 0
    busy_lookups = {
        name: Lookups(f, prefixes, ctx.seconds(2.0, 0.5), lambda: sum(written))
        for name, f in calls.items()
    }
    try:
        busy = alternate({k: v.measure for k, v in busy_lookups.items()}, ctx.repetitions)
    finally:
        stop.set()
        for process in writers:
            process.join()
    busy_book = busy_lookups["book"]
    write_rates = [row[name]["writes"] for row in busy.rounds for name in calls]

    rows = [[name, quiet[name].median(name), busy.median(name, "rate"), "-", "-"] for name in calls]
    rows[-1][3:] = [
        f"{quiet_conflicts} / {book.conflicts}",
        f"{busy_book.gave_up} of {busy_book.done}",
    ]
    notes = [
        f"{len(names):,} names loaded by join_many in {loaded:.1f} s; {WRITERS} writers joined and"
        f" left names {min(write_rates):,.0f}..{max(write_rates):,.0f} times/s over the windows;"
        f" WATCH retries of the book method with no writers / {WRITERS} writers; it gives up a"
        f" lookup after {book.max_attempts}",
        "no writers: lookups/s = 1 / median time per lookup, the variants of a pair called in"
        " turn (bare and lex, then lex and book, each pair in alternating order);"
        f" {WRITERS} writers: lookups that succeeded per second in alternating"
        f" {ctx.seconds(2.0, 0.5):g} s windows",
        "book method's windows with writers, lookups/s at writes/s: "
        + ", ".join(
            f"{row['book']['rate']:.1f} at {row['book']['writes']:,.0f}" for row in busy.rounds
        )
        + "; in lex / book a window where it completed no lookup counts as one lookup",
    ]
    return [
        Section(
            title=f"Autocomplete: lookups/s on {NAMES:,} names, no writers and {WRITERS} writers",
            columns=[
                "variant",
                "lookups/s",
                f"lookups/s, {WRITERS} writers",
                "WATCH retries",
                f"gave up, {WRITERS} writers",
            ],
            rows=rows,
            ratios=[
                Ratio(
                    "lex / bare ZRANGEBYLEX, no writers",
                    floor.ratio("lex", "bare ZRANGEBYLEX"),
                    0.9,
                ),
                Ratio(
                    f"lex / book, {WRITERS} writers",
                    busy.ratio("lex", "book", "bounded"),
                    100.0,
                ),
            ],
            notes=notes,
        )
    ]


if __name__ == "__main__":
    main(run, __doc__.splitlines()[0])
