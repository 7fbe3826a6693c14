"""The "heavily loaded marketplace" of Redis in Action 6.2, for every purchase strategy.

Lister processes move items from their inventories to the market as fast as
they can (never running out of items: uncapped, as in the book's benchmark) while
buyer processes buy among the ten cheapest listings, for a few seconds, on a
throwaway redis-server (never the configured one: each run starts from an empty
database). A row gives what the book's table gives —
items listed, items bought, WATCH retries, average wait per purchase (time
spent in ``purchase`` calls, lost races included, per item bought) — plus
the purchases lost to another buyer, those refused as busy, and three
invariants checked afterwards from the buyers' own records:

- money conserved: every buyer paid, and every seller received, exactly the
  prices of the items recorded as bought, and the total is unchanged;
- no item sold twice: no item appears in two purchase records;
- inventories consistent: every item is in exactly one place (an inventory or
  the market) and each buyer holds exactly what it recorded buying.

Beside the service's strategies run its peers (``bench/market_peers.py``): the
book's market-wide and per-item lock purchases and the floor, a bare one-script
purchase. Used by ``manage.py rp_bench_market`` and ``bench/market.py``.
"""

import contextlib
import math
import multiprocessing
import random
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from bench import market_peers
from redisparts_app.exceptions import ListingNotFound, MarketBusy, MarketError, PriceChanged
from redisparts_app.services import market
from redisparts_app.testing import RedisServer

CONFIGURATIONS = ((1, 1), (5, 1), (5, 5))
BUYER_FUNDS = 10**12  # cents; no buyer runs out
ITEMS_PER_LISTER = 10_000  # at least; a longer run gives each lister more (see items_for)
LISTINGS_PER_SECOND = 5_000  # above what one lister process reaches, so none runs out
CHEAPEST = 10  # buyers pick at random among the cheapest listings
STRATEGIES = (*market.STRATEGIES, *market_peers.PEERS)
# The targets: items bought by the first strategy per item bought by the second, per load.
TARGETS = tuple(
    (a, b, target, load)
    for a, b, target in (
        ("market_lock", "book_market_lock", 1.0),
        ("item_lock", "book_item_lock", 1.0),
        ("lua", "floor", 0.9),
    )
    for load in CONFIGURATIONS
)


def items_for(seconds: float) -> int:
    """Return how many items each lister starts with: more than it can list in ``seconds``."""
    return max(ITEMS_PER_LISTER, int(seconds * LISTINGS_PER_SECOND))


@dataclass
class Row:
    """One strategy under one load (listers/buyers); figures are medians of the runs."""

    strategy: str
    listers: int
    buyers: int
    listed: float = 0
    bought: float = 0
    retries: float = 0
    lost: float = 0
    busy: float = 0
    wait_ms: float = 0
    runs: int = 0
    invariants: dict[str, bool] = field(default_factory=dict)
    bought_per_run: list[int] = field(default_factory=list)  # in run order

    @property
    def holds(self) -> bool:
        return all(self.invariants.values())


def _lister(url: str, name: str, seconds: float, start, results) -> None:
    client = redis.Redis.from_url(url)
    rng = random.Random(name)
    listed, items = 0, items_for(seconds)
    start.wait()
    end = time.monotonic() + seconds
    while time.monotonic() < end and listed < items:
        market.list_item(name, f"{name}-{listed}", rng.randint(1, 1000), client=client)
        listed += 1
    results.put(("lister", name, {"listed": listed}))


def _buyer(url: str, name: str, strategy: str, seconds: float, start, results) -> None:
    client = redis.Redis.from_url(url)
    rng = random.Random(name)
    bought: list[tuple[str, str, int]] = []
    retries = lost = busy = 0
    waited = 0.0
    peer = market_peers.purchaser(strategy, client) if strategy in market_peers.PEERS else None
    start.wait()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        listings = market.get_listings(0, CHEAPEST, client=client)
        if not listings:
            time.sleep(0.001)
            continue
        pick = rng.choice(listings)
        began = time.perf_counter()
        if peer is not None:
            outcome = peer(name, pick.item, pick.seller, pick.price)
            waited += time.perf_counter() - began
            if outcome:
                bought.append((pick.item, pick.seller, pick.price))
            elif outcome is None:
                lost += 1
            else:
                busy += 1
            continue
        try:
            done = market.purchase(
                name, pick.item, pick.seller, pick.price, strategy=strategy, client=client
            )
        except (ListingNotFound, PriceChanged):
            lost += 1
        except MarketBusy:
            busy += 1
        else:
            bought.append((pick.item, pick.seller, pick.price))
            retries += done.retries
        waited += time.perf_counter() - began
    figures = {"bought": bought, "retries": retries, "lost": lost, "busy": busy, "waited": waited}
    results.put(("buyer", name, figures))


def run_once(url: str, strategy: str, listers: int, buyers: int, seconds: float) -> dict:
    """Run one load on the (throwaway) server at ``url``; return its figures and checks."""
    client = redis.Redis.from_url(url)
    client.flushdb()
    lister_names = [f"lister{n}" for n in range(listers)]
    buyer_names = [f"buyer{n}" for n in range(buyers)]
    items = items_for(seconds)
    for name in lister_names:
        market.create_user(name, 0, client=client)
        for first in range(0, items, 10_000):
            batch = range(first, min(items, first + 10_000))
            client.sadd(market.inventory_key(name), *(f"{name}-{i}" for i in batch))
    for name in buyer_names:
        market.create_user(name, BUYER_FUNDS, client=client)
    context = multiprocessing.get_context("fork")
    start, results = context.Event(), context.Queue()
    processes = [
        context.Process(target=_lister, args=(url, name, seconds, start, results))
        for name in lister_names
    ] + [
        context.Process(target=_buyer, args=(url, name, strategy, seconds, start, results))
        for name in buyer_names
    ]
    for process in processes:
        process.start()
    start.set()
    reports = [results.get(timeout=seconds + 120) for _ in processes]
    for process in processes:
        process.join(30)
    listed = [figures for kind, _, figures in reports if kind == "lister"]
    bought = {name: figures for kind, name, figures in reports if kind == "buyer"}
    purchases = sum(len(figures["bought"]) for figures in bought.values())
    waited = sum(figures["waited"] for figures in bought.values())
    return {
        "listed": sum(figures["listed"] for figures in listed),
        "bought": purchases,
        "retries": sum(figures["retries"] for figures in bought.values()),
        "lost": sum(figures["lost"] for figures in bought.values()),
        "busy": sum(figures["busy"] for figures in bought.values()),
        "wait_ms": 1000 * waited / purchases if purchases else float("inf"),
        "invariants": check_invariants(client, lister_names, bought, items),
    }


def check_invariants(
    client: redis.Redis, listers: list[str], bought: dict, items: int = ITEMS_PER_LISTER
) -> dict[str, bool]:
    """Check money, sales and inventories against the buyers' purchase records."""
    records = [(buyer, *sale) for buyer, figures in bought.items() for sale in figures["bought"]]
    paid, received = Counter(), Counter()
    for buyer, _item, seller, price in records:
        paid[buyer] += price
        received[seller] += price
    funds = {name: market.get_funds(name, client=client) for name in [*listers, *bought]}
    money = (
        sum(funds.values()) == BUYER_FUNDS * len(bought)
        and all(funds[b] == BUYER_FUNDS - paid[b] for b in bought)
        and all(funds[s] == received[s] for s in listers)
    )
    sold_once = len({item for _, item, _, _ in records}) == len(records)
    places = Counter()
    for name in [*listers, *bought]:
        places.update(m.decode() for m in client.smembers(market.inventory_key(name)))
    places.update(m.decode().partition(":")[0] for m in client.zrange(market.listings_key(), 0, -1))
    holdings_match = all(
        set(market.get_inventory(b, client=client)) == {item for item, _, _ in figures["bought"]}
        for b, figures in bought.items()
    )
    inventories = (
        len(places) == items * len(listers) and set(places.values()) == {1} and holdings_match
    )
    return {"money conserved": money, "no item sold twice": sold_once,
            "inventories consistent": inventories}  # fmt: skip


def run_table(
    seconds: float = 1.5,
    repetitions: int = 3,
    strategies: tuple[str, ...] = STRATEGIES,
    configurations: tuple[tuple[int, int], ...] = CONFIGURATIONS,
    url: str | None = None,
    progress: Callable[[Row], object] | None = None,
) -> list[Row]:
    """Measure every strategy under every load, the strategies in turn within a load.

    The order of the strategies is reversed every other repetition, so none
    always runs after the same one.

    Without ``url``, on a redis-server started for the purpose (on TCP loopback)
    and stopped afterwards. ``progress(row)`` is called after each run.
    """
    if url is None:
        with tempfile.TemporaryDirectory() as directory, RedisServer(directory) as server:
            return run_table(seconds, repetitions, strategies, configurations, server.url,
                             progress)  # fmt: skip
    rows = []
    for listers, buyers in configurations:
        runs: dict[str, list[dict]] = {strategy: [] for strategy in strategies}
        for repetition in range(repetitions):
            for strategy in strategies[:: -1 if repetition % 2 else 1]:
                runs[strategy].append(run_once(url, strategy, listers, buyers, seconds))
                if progress is not None:
                    progress(Row(strategy, listers, buyers))
        for strategy, figures in runs.items():
            row = Row(strategy, listers, buyers, runs=len(figures))
            row.bought_per_run = [f["bought"] for f in figures]
            for name in ("listed", "bought", "retries", "lost", "busy", "wait_ms"):
                setattr(row, name, statistics.median(f[name] for f in figures))
            row.invariants = {
                check: all(f["invariants"][check] for f in figures)
                for check in figures[0]["invariants"]
            }
            rows.append(row)
    return rows


def bought_ratio(rows: list[Row], a: str, b: str, load: tuple[int, int] = (5, 5)) -> float:
    """Items bought by strategy ``a`` per item bought by ``b`` under ``load``.

    The median of the per-repetition ratios (a and b ran side by side in each);
    NaN when either was not measured, infinity when ``b`` bought nothing.
    """
    found = {row.strategy: row.bought_per_run for row in rows if (row.listers, row.buyers) == load}
    if a not in found or b not in found:
        return math.nan
    ratios = [x / y if y else math.inf for x, y in zip(found[a], found[b], strict=True)]
    return statistics.median(ratios)


def target_label(a: str, b: str, load: tuple[int, int]) -> str:
    return f"{a} / {b}, items bought at {load[0]}/{load[1]}"


def target_lines(rows: list[Row]) -> list[str]:
    """Return each target ratio measured in ``rows`` as "label: value (target: met)"."""
    lines = []
    for a, b, target, load in TARGETS:
        value = bought_ratio(rows, a, b, load)
        if not math.isnan(value):
            met = "met" if value >= target else "MISSED"
            lines.append(f"{target_label(a, b, load)}: {value:.2f}x (target >= {target:g}x: {met})")
    return lines


COLUMNS = ["strategy", "listers/buyers", "listed", "bought", "retries", "lost races", "busy",
           "wait/purchase ms", "invariants"]  # fmt: skip


def table_rows(rows: list[Row]) -> list[list]:
    return [
        [row.strategy, f"{row.listers}/{row.buyers}", row.listed, row.bought, row.retries,
         row.lost, row.busy, round(row.wait_ms, 2),
         "all hold" if row.holds else "BROKEN: " + ", ".join(
             name for name, ok in row.invariants.items() if not ok)]
        for row in rows
    ]  # fmt: skip


# -- one buyer, two processes: the funds race -----------------------------------------------

RACE_PRICE = 100


def _race_buyer(url: str, strategy: str, side: int, rounds: int, barrier) -> None:
    client = redis.Redis.from_url(url)
    peer = market_peers.purchaser(strategy, client) if strategy in market_peers.PEERS else None
    for round_ in range(rounds):
        buyer, item, seller = f"racer{round_}", f"race{round_}-{side}", f"seller{side}"
        barrier.wait(30)
        if peer is not None:
            peer(buyer, item, seller, RACE_PRICE)
            continue
        with contextlib.suppress(MarketError):  # InsufficientFunds: the other bought first
            market.purchase(buyer, item, seller, RACE_PRICE, strategy=strategy, client=client)


def overdraw_race(url: str, strategy: str, rounds: int) -> int:
    """Return in how many of ``rounds`` one buyer ended with negative funds.

    Each round, a buyer with funds for one item buys two different items (two sellers,
    so two per-item locks) from two processes released at the same moment.
    """
    client = redis.Redis.from_url(url)
    client.flushdb()
    for side in (0, 1):
        market.create_user(f"seller{side}", 0, client=client)
    for round_ in range(rounds):
        market.create_user(f"racer{round_}", RACE_PRICE, client=client)
        for side in (0, 1):
            item = f"race{round_}-{side}"
            market.give_item(f"seller{side}", item, client=client)
            market.list_item(f"seller{side}", item, RACE_PRICE, client=client)
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(2)
    processes = [
        context.Process(target=_race_buyer, args=(url, strategy, side, rounds, barrier))
        for side in (0, 1)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
    return sum(market.get_funds(f"racer{r}", client=client) < 0 for r in range(rounds))
