"""The book's "heavily loaded marketplace" table for every purchase strategy.

Listers/buyers 1/1, 5/1 and 5/5 processes; the four strategies run in turn
within each load on a redis-server of their own (each run starts from an empty
database). See ``bench/market_load.py`` for the workload and the
invariant checks; ``manage.py rp_bench_market`` prints the same table.

    .venv/bin/python -m bench.market [--quick]
"""

from bench.harness import Check, Ratio, Section, main


def run(ctx) -> list[Section]:
    from bench import market_load

    seconds = ctx.seconds(2.0, 0.5)
    rows = market_load.run_table(seconds, ctx.repetitions, url=ctx.url("tcp"))
    return [
        Section(
            title=f'Marketplace under load ("heavily loaded marketplace"), {seconds:g} s runs',
            columns=market_load.COLUMNS,
            rows=market_load.table_rows(rows),
            ratios=[
                Ratio(f"{a} / {b}, items bought at 5/5", market_load.bought_ratio(rows, a, b), t)
                for a, b, t in market_load.TARGETS
            ],
            checks=[
                Check(f"{check} in every row", all(row.invariants[check] for row in rows))
                for check in rows[0].invariants
            ],
            notes=[
                f"medians of {ctx.repetitions} run(s), the strategies in turn (order reversed"
                " every other round), ratios the median of per-round ratios; wait/purchase:"
                " time in purchase calls (lost races included) per item bought; lost races:"
                " the listing was bought by another buyer first; busy: MarketBusy",
            ],
        )
    ]


if __name__ == "__main__":
    main(run, __doc__.splitlines()[0])
