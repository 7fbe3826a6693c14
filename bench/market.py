"""The book's "heavily loaded marketplace" table: every purchase strategy beside its peers.

Listers/buyers 1/1, 5/1 and 5/5 processes, listers uncapped (they list as fast as they
can, as in the book's benchmark); the strategies and their peers run in turn within
each load on a redis-server of their own (each run starts from an empty database).
The peers (``bench/market_peers.py``): the book's market-wide and per-item lock
purchases, and the floor, a bare one-script purchase with the same checks as the
``lua`` strategy's script but no sale record (and beside it the floor with the sale
record, the cost of the outbox guarantee as a row of its own). See ``bench/market_load.py`` for the
workload and the invariant checks; ``manage.py rp_bench_market`` prints the same table.

    .venv/bin/python -m bench.market [--quick]
"""

from bench.harness import Check, Ratio, Section, main

TIMEOUT = 2400  # seconds for the whole module in ``make bench``: 10 s runs, 3 x 8 per round
RACE_ROUNDS = 200


def run(ctx) -> list[Section]:
    from bench import market_load

    seconds = ctx.seconds(10.0, 0.5)
    url = ctx.url("tcp")
    rows = market_load.run_table(seconds, ctx.repetitions, url=url)
    races = {s: market_load.overdraw_race(url, s, RACE_ROUNDS) for s in ("item_lock", "lua")}
    book = market_load.overdraw_race(url, "book_item_lock", RACE_ROUNDS)
    ratios = [
        Ratio(market_load.target_label(a, b, load), market_load.bought_ratio(rows, a, b, load), t)
        for a, b, t, load in market_load.TARGETS
    ]
    ratios += [
        Ratio(market_load.target_label(a, b, (5, 5)), market_load.bought_ratio(rows, a, b))
        for a, b in (
            ("lua", "floor_record"),
            ("floor_record", "floor"),
            ("lua", "book_item_lock"),
            ("lua", "watch"),
        )
    ]
    checks = [
        Check(f"{check} in every row", all(row.invariants[check] for row in rows))
        for check in rows[0].invariants
    ]
    checks += [
        Check(
            f"{strategy}: one buyer buying two items at once from two processes never overdrew",
            races[strategy] == 0,
            f"negative funds in {races[strategy]} of {RACE_ROUNDS} rounds",
        )
        for strategy in races
    ]
    checks.append(
        Check(
            "book_item_lock: the same race overdrew the buyer (its funds check is outside"
            " any lock the two purchases share)",
            book > 0,
            f"negative funds in {book} of {RACE_ROUNDS} rounds",
        )
    )
    return [
        Section(
            title=f'Marketplace under load ("heavily loaded marketplace"), {seconds:g} s runs',
            columns=market_load.COLUMNS,
            rows=market_load.table_rows(rows),
            ratios=ratios,
            checks=checks,
            notes=[
                f"medians of {ctx.repetitions} run(s), the strategies in turn (order reversed"
                " every other round), ratios the median of per-round ratios; wait/purchase:"
                " time in purchase calls (lost races included) per item bought; lost races:"
                " the listing was bought by another buyer first; busy: MarketBusy (or the"
                " book's lock not had within its 10 s)",
                "book_market_lock, book_item_lock: Redis in Action 6.2's purchase under its"
                " SET NX lock (polled every ms; released by WATCH/GET/MULTI/DEL), the lock"
                " market-wide or per listing; floor: one script, same checks as lua's, no"
                " sale record; floor_record: the floor writing the sale record to the outbox"
                " in the same step, as the service's strategies do (floor_record / floor is"
                " the cost of that guarantee)",
                "bought counts are capped by what the listers list: a row whose bought is"
                " close to listed measures the listers as much as the buyers",
            ],
        )
    ]


if __name__ == "__main__":
    main(run, __doc__.splitlines()[0])
