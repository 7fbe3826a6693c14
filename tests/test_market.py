import asyncio
import contextlib
import dataclasses
import json
import random
import time

import pytest
import redis
import redis.asyncio
from redis.crc import key_slot

from redisparts_app import keys, lua
from redisparts_app.connection import aclose_async_clients, get_async_redis
from redisparts_app.exceptions import (
    InsufficientFunds,
    InvalidKeyPart,
    InvalidPrice,
    ItemAlreadyHeld,
    ItemListed,
    ItemNotHeld,
    ListingNotFound,
    MarketBusy,
    OwnItem,
    PriceChanged,
    UnknownStrategy,
    UnknownUser,
    UserExists,
)
from redisparts_app.services import market
from redisparts_app.services.locks import Lock, lock_keys
from tests.processes import CONTEXT, run_in_processes
from tests.test_faces import run

pytestmark = pytest.mark.cluster

STRATEGIES = list(market.STRATEGIES)


@pytest.fixture
def mkt(face):
    """The market's calls on the sync face, then on the async face (``apurchase``, ...)."""
    return face(market)


@pytest.fixture
def shop(redis_client):
    market.create_user("alice", 1000)
    market.create_user("bob", 500)
    market.give_item("alice", "sword")
    market.give_item("alice", "shield")
    return redis_client


def _snapshot(client) -> dict:
    """Every market key and its content, to prove a refused call changed nothing."""
    state = {}
    for key in sorted(client.scan_iter(match="rp:market:*")):
        kind = client.type(key)
        if kind == b"hash":
            state[key] = client.hgetall(key)
        elif kind == b"set":
            state[key] = client.smembers(key)
        else:
            state[key] = client.zrange(key, 0, -1, withscores=True)
    return state


def test_all_market_keys_share_one_cluster_slot():
    slots = {
        key_slot(key.encode())
        for key in (
            market.user_key("alice"),
            market.user_key("Zoë 🙂 王"),
            market.inventory_key("alice"),
            market.listings_key(),
            market.outbox_key(),
            market.notice_key("0123abcd"),
        )
    }
    assert len(slots) == 1


def test_create_user_twice_keeps_the_first_funds(shop, mkt):
    with pytest.raises(UserExists):
        mkt.create_user("alice", 5)
    assert mkt.get_funds("alice") == 1000


@pytest.mark.parametrize("bad", [-1, 0, 1.5, "12.5", "abc", "", True, None, 10**30, "1" * 30])
def test_bad_prices_are_refused_before_anything_is_written(shop, bad, mkt):
    before = _snapshot(shop)
    with pytest.raises(InvalidPrice):
        mkt.list_item("alice", "sword", bad)
    assert _snapshot(shop) == before


def test_price_as_digit_string_is_accepted(shop, mkt):
    mkt.list_item("alice", "sword", "250")
    assert mkt.get_price("sword", "alice") == 250


@pytest.mark.parametrize("bad", ["", "a:b", "x{y}", "star*", "tab\there", "x" * 300])
def test_bad_names_are_refused(shop, bad, mkt):
    with pytest.raises(InvalidKeyPart):
        mkt.give_item("alice", bad)
    with pytest.raises(InvalidKeyPart):
        mkt.create_user(bad, 10)


def test_unknown_users_are_refused(shop, mkt):
    with pytest.raises(UnknownUser):
        mkt.give_item("nobody", "x")
    with pytest.raises(UnknownUser):
        mkt.get_funds("nobody")
    mkt.list_item("alice", "sword", 100)
    for strategy in STRATEGIES:
        with pytest.raises(UnknownUser):
            mkt.purchase("nobody", "sword", "alice", 100, strategy=strategy)
    assert mkt.get_price("sword", "alice") == 100


def test_listing_moves_the_item_and_listing_an_item_not_held_is_refused(shop, mkt):
    mkt.list_item("alice", "sword", 300)
    assert mkt.get_inventory("alice") == ["shield"]
    assert mkt.get_listings() == [market.Listing("sword", "alice", 300)]
    before = _snapshot(shop)
    with pytest.raises(ItemNotHeld):
        mkt.list_item("alice", "sword", 300)  # already listed
    with pytest.raises(ItemNotHeld):
        mkt.list_item("bob", "shield", 300)  # alice's
    assert _snapshot(shop) == before


def test_cancel_returns_the_item_and_only_the_owner_can_cancel(shop, mkt):
    mkt.list_item("alice", "sword", 300)
    with pytest.raises(ListingNotFound):
        mkt.cancel_listing("bob", "sword")
    mkt.cancel_listing("alice", "sword")
    assert mkt.get_inventory("alice") == ["shield", "sword"]
    assert mkt.count_listings() == 0
    with pytest.raises(ListingNotFound):
        mkt.cancel_listing("alice", "sword")


def test_listings_are_sorted_by_price_and_paged(shop, mkt):
    mkt.create_user("carol", 0)
    for n, price in enumerate([500, 100, 300, 200, 400]):
        mkt.give_item("carol", f"thing {n}")
        mkt.list_item("carol", f"thing {n}", price)
    prices = [listing.price for listing in mkt.get_listings(0, 3)]
    assert prices == [100, 200, 300]
    assert [listing.price for listing in mkt.get_listings(3, 3)] == [400, 500]
    assert mkt.get_listings(10, 3) == []
    with pytest.raises(ValueError, match="offset"):
        mkt.get_listings(-1, 3)
    with pytest.raises(ValueError, match="limit"):
        mkt.get_listings(0, 0)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_purchase_moves_money_and_item(shop, strategy, mkt):
    mkt.list_item("alice", "sword", 300)
    result = mkt.purchase("bob", "sword", "alice", 300, strategy=strategy)
    assert (result.price, result.strategy, result.retries) == (300, strategy, 0)
    # The results are filled in without their __init__: the same as one built with it.
    for value in (result, result.sale):
        rebuilt = dataclasses.replace(value)  # through __init__, every field from value
        assert (rebuilt, hash(rebuilt), repr(rebuilt)) == (value, hash(value), repr(value))
        with pytest.raises(dataclasses.FrozenInstanceError):
            value.price = 1
    assert mkt.get_funds("bob") == 200
    assert mkt.get_funds("alice") == 1300
    assert mkt.get_inventory("bob") == ["sword"]
    assert mkt.count_listings() == 0


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_refused_purchases_change_nothing(shop, strategy, mkt):
    mkt.list_item("alice", "sword", 300)
    mkt.list_item("alice", "shield", 600)
    mkt.create_user("carol", 0)
    mkt.give_item("carol", "bow")
    mkt.list_item("carol", "bow", 50)
    before = _snapshot(shop)
    with pytest.raises(PriceChanged) as stale:
        mkt.purchase("bob", "sword", "alice", 250, strategy=strategy)
    assert stale.value.actual == 300
    with pytest.raises(InsufficientFunds) as poor:
        mkt.purchase("bob", "shield", "alice", 600, strategy=strategy)
    assert (poor.value.funds, poor.value.price) == (500, 600)
    with pytest.raises(OwnItem):
        mkt.purchase("carol", "bow", "carol", 50, strategy=strategy)
    with pytest.raises(ListingNotFound):
        mkt.purchase("bob", "axe", "alice", 100, strategy=strategy)
    assert _snapshot(shop) == before


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_item_sold_or_withdrawn_cannot_be_bought(shop, strategy, mkt):
    mkt.create_user("carol", 1000)
    mkt.list_item("alice", "sword", 300)
    mkt.list_item("alice", "shield", 100)
    mkt.purchase("carol", "sword", "alice", 300, strategy=strategy)
    mkt.cancel_listing("alice", "shield")
    for item in ("sword", "shield"):
        with pytest.raises(ListingNotFound):
            mkt.purchase("bob", item, "alice", 300, strategy=strategy)
    assert mkt.get_funds("bob") == 500


@pytest.mark.parametrize(
    ("buyer", "item", "sold_at"),
    [("bob", "sword", 1700000000.123456), ('Zoë "the" 🙂 王', "épée \u2028", 1e-7), ("b", "i", 3)],
)
def test_a_sale_record_is_sorted_compact_json_and_parses_back(buyer, item, sold_at):
    sale = market.Sale("0f" * 16, "alice", buyer, item, 1_500, sold_at)
    fields = {"buyer": buyer, "item": item, "price": 1_500, "sale": "0f" * 16,
              "seller": "alice", "time": sold_at}  # fmt: skip
    expected = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert sale.record() == expected
    assert market.Sale.from_record(sale.record().encode()) == sale


def test_unknown_strategy_is_refused(shop, mkt):
    with pytest.raises(UnknownStrategy):
        mkt.purchase("bob", "sword", "alice", 300, strategy="magic")


@pytest.mark.parametrize("strategy", ["market_lock", "item_lock"])
def test_lock_strategies_wait_for_their_lock_and_give_up_with_market_busy(
    shop, settings, strategy, mkt
):
    settings.REDISPARTS = {"MARKET_LOCK_WAIT": 0.2}
    mkt.list_item("alice", "sword", 300)
    mkt.list_item("alice", "shield", 100)
    before = _snapshot(shop)
    with Lock(market.lock_name("sword", "alice", strategy), ttl=30, timeout=1):
        with pytest.raises(MarketBusy):
            mkt.purchase("bob", "sword", "alice", 300, strategy=strategy)
        assert _snapshot(shop) == before
        # Another listing is behind the same market-wide lock, not behind the same item lock.
        if strategy == "item_lock":
            mkt.purchase("bob", "shield", "alice", 100, strategy=strategy)
        else:
            with pytest.raises(MarketBusy):
                mkt.purchase("bob", "shield", "alice", 100, strategy=strategy)
    assert mkt.purchase("bob", "sword", "alice", 300, strategy=strategy).price == 300


def test_item_lock_names_are_valid_and_spread_over_stripes():
    names = {market.lock_name(f"item {n}", "alice", "item_lock") for n in range(200)}
    assert len(names) > 190
    assert all(keys.validate_key_part(name) == name for name in names)
    assert market.lock_name("x", "y", "market_lock") == "market"


def test_default_strategy_comes_from_settings(shop, settings, mkt):
    settings.REDISPARTS = {"MARKET_PURCHASE_STRATEGY": "watch"}
    mkt.list_item("alice", "sword", 300)
    assert mkt.purchase("bob", "sword", "alice", 300).strategy == "watch"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_purchase_records_its_sale_in_the_outbox(shop, strategy, mkt):
    mkt.list_item("alice", "sword", 300)
    done = mkt.purchase("bob", "sword", "alice", 300, strategy=strategy)
    sale = done.sale
    assert (sale.buyer, sale.seller, sale.item, sale.price) == ("bob", "alice", "sword", 300)
    assert mkt.pending_sales() == [sale]
    assert mkt.count_pending_sales() == 1
    assert shop.zscore(market.outbox_key(), sale.record()) == int(sale.sold_at * 1000)
    with pytest.raises(ValueError, match="limit"):
        mkt.pending_sales(0)


def test_a_held_or_listed_name_is_not_given_twice(shop, mkt):
    assert mkt.give_item("alice", "sword") is False  # already held: nothing written
    mkt.list_item("alice", "sword", 300)
    with pytest.raises(ItemListed):
        mkt.give_item("alice", "sword")
    assert mkt.get_inventory("alice") == ["shield"]
    assert mkt.get_price("sword", "alice") == 300


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_buying_a_name_the_buyer_holds_or_lists_is_refused_and_changes_nothing(shop, strategy, mkt):
    mkt.list_item("alice", "sword", 300)
    mkt.give_item("bob", "sword")
    held = _snapshot(shop)
    with pytest.raises(ItemAlreadyHeld):
        mkt.purchase("bob", "sword", "alice", 300, strategy=strategy)
    mkt.list_item("bob", "sword", 50)
    listed = _snapshot(shop)
    with pytest.raises(ItemAlreadyHeld):
        mkt.purchase("bob", "sword", "alice", 300, strategy=strategy)
    assert (held, listed) != (listed, held)  # the listing moved bob's sword
    assert _snapshot(shop) == listed


def test_notice_markers_claim_finish_and_abandon(redis_client, mkt):
    token = mkt.begin_notice("s1", 30)
    assert token.startswith("sending:")
    assert mkt.begin_notice("s1", 30) == "busy"
    assert mkt.abandon_notice("s1", "sending:another") is False
    assert mkt.abandon_notice("s1", token) is True
    token = mkt.begin_notice("s1", 30)
    mkt.finish_notice("s1", 60)
    assert mkt.begin_notice("s1", 30) == "sent"
    assert mkt.abandon_notice("s1", token) is False
    assert 0 < redis_client.pttl(market.notice_key("s1")) <= 60_000
    with pytest.raises(ValueError, match="sale id"):
        mkt.begin_notice("a:b", 30)
    with pytest.raises(ValueError, match="claim_ttl"):
        mkt.begin_notice("s2", 0)
    with pytest.raises(ValueError, match="keep"):
        mkt.finish_notice("s2", True)
    assert redis_client.exists(market.notice_key("s2")) == 0


def test_an_async_call_refuses_a_sync_client_before_anything_is_written(shop):
    before = _snapshot(shop)
    with pytest.raises(TypeError, match=r"redis\.asyncio client"):
        asyncio.run(market.apurchase("bob", "sword", "alice", 300, client=shop))
    with pytest.raises(TypeError, match=r"redis\.asyncio client"):
        asyncio.run(
            market.apurchase("bob", "sword", "alice", 300, strategy="item_lock", client=shop)
        )
    assert _snapshot(shop) == before


# --- the async face: waiting coroutines -----------------------------------------------------


def test_an_async_buyer_waiting_for_its_item_lock_leaves_the_loop_running(shop, settings):
    settings.REDISPARTS = {"MARKET_LOCK_WAIT": 10.0}
    market.list_item("alice", "sword", 300)
    market.list_item("alice", "shield", 100)
    sword = market.lock_name("sword", "alice", "item_lock")
    assert sword != market.lock_name("shield", "alice", "item_lock")
    held = Lock(sword, ttl=30, timeout=1)
    held.acquire()

    async def main():
        waiter = asyncio.create_task(
            market.apurchase("bob", "sword", "alice", 300, strategy="item_lock")
        )
        for _turn in range(30):  # the loop turns while the waiter waits (a blocked one would not)
            await asyncio.sleep(0.005)
            assert await market.aget_price("sword", "alice") == 300
            assert not waiter.done()
        # Another listing's buyer is behind another lock, not behind this waiter.
        other = await market.apurchase("bob", "shield", "alice", 100, strategy="item_lock")
        assert not waiter.done()
        released = time.monotonic()
        held.release()
        bought = await waiter
        return other, bought, time.monotonic() - released

    other, bought, woke_after = run(main())
    assert (other.item, bought.item, bought.strategy) == ("shield", "sword", "item_lock")
    assert woke_after < 2.0  # woken by the release, not by the end of its 10 s wait
    assert market.get_inventory("bob") == ["shield", "sword"]
    assert market.get_funds("bob") == 100


def test_a_cancelled_async_buyer_leaves_the_lock_and_the_listing_as_they_were(shop):
    market.list_item("alice", "sword", 300)
    name = market.lock_name("sword", "alice", "market_lock")
    held = Lock(name, ttl=30, timeout=1)
    held.acquire()

    async def main():
        waiter = asyncio.create_task(
            market.apurchase("bob", "sword", "alice", 300, strategy="market_lock")
        )
        await asyncio.sleep(0.1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    before = _snapshot(shop)
    run(main())
    assert _snapshot(shop) == before
    held.release()
    assert Lock(name, ttl=5).try_acquire() is not None  # nobody took it meanwhile
    assert market.get_price("sword", "alice") == 300


class StallingPurchases(redis.asyncio.Redis):
    """A real async client whose purchase scripts wait (until cancelled) before they leave."""

    stalled: asyncio.Event

    async def execute_command(self, *args, **options):
        if args[:2] == ("EVALSHA", lua.sha("market_purchase")):
            self.stalled.set()
            await asyncio.Event().wait()
        return await super().execute_command(*args, **options)


@pytest.mark.single_server  # a client of the session server
def test_a_purchase_task_cancelled_while_it_holds_the_lock_releases_it(shop, redis_url):
    market.list_item("alice", "sword", 300)
    owner_key = lock_keys(market.lock_name("sword", "alice", "item_lock"))[0]
    before = _snapshot(shop)

    async def main():
        client = StallingPurchases.from_url(redis_url)
        client.stalled = asyncio.Event()
        buyer = asyncio.create_task(
            market.apurchase("bob", "sword", "alice", 300, strategy="item_lock", client=client)
        )
        await asyncio.wait_for(client.stalled.wait(), 10)
        held = shop.exists(owner_key)
        buyer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await buyer
        await client.aclose()
        return held

    assert run(main()) == 1  # the lock was held when the task was cancelled
    assert shop.exists(owner_key) == 0
    assert _snapshot(shop) == before
    assert market.purchase("bob", "sword", "alice", 300, strategy="item_lock").price == 300


# --- several processes trading at once ----------------------------------------------------

LISTERS = ["lister0", "lister1"]
BUYERS = ["buyer0", "buyer1", "buyer2", "buyer3"]
ITEMS_PER_LISTER = 150
START_FUNDS = 4000
SALES_LOG = "test:market:sales"  # outside the market's keys: an independent record


def _lister(name: str, duration: float, seed: int) -> int:
    rng = random.Random(seed)
    end = time.monotonic() + duration
    actions = 0
    while time.monotonic() < end:
        held = market.get_inventory(name)
        if held and rng.random() < 0.8:
            market.list_item(name, rng.choice(held), rng.randint(1, 200))
        else:
            mine = [x for x in market.get_listings(0, 200) if x.seller == name]
            if mine:
                with contextlib.suppress(ListingNotFound):  # sold meanwhile
                    market.cancel_listing(name, rng.choice(mine).item)
        actions += 1
    return actions


def _buyer(name: str, strategy: str, duration: float, seed: int) -> dict:
    from redisparts_app.connection import get_redis

    rng = random.Random(seed)
    client = get_redis()
    end = time.monotonic() + duration
    bought, refused, retries = 0, 0, 0
    while time.monotonic() < end:
        page = market.get_listings(0, 20)
        if not page:
            continue
        listing = rng.choice(page)
        try:
            result = market.purchase(
                name, listing.item, listing.seller, listing.price, strategy=strategy
            )
        except (ListingNotFound, PriceChanged, InsufficientFunds):
            refused += 1
            continue
        client.rpush(SALES_LOG, f"{listing.item}|{listing.seller}|{name}|{listing.price}")
        bought += 1
        retries += result.retries
    return {"bought": bought, "refused": refused, "retries": retries}


def _stock(sellers: list[str], buyers: list[str]) -> dict[str, str]:
    """Create the users and give each seller ITEMS_PER_LISTER items; return item -> seller."""
    items = {}
    for seller in sellers:
        market.create_user(seller, START_FUNDS)
        for n in range(ITEMS_PER_LISTER):
            item = f"{seller}-item-{n}"
            market.give_item(seller, item)
            items[item] = seller
    for buyer in buyers:
        market.create_user(buyer, START_FUNDS)
    return items


def _check_trading(client, items: dict[str, str], users: list[str], bought: int) -> None:
    """Money conserved and never negative, every item in one place, and the independent
    sales log (``bought`` entries) explaining every balance."""
    funds = {user: market.get_funds(user) for user in users}
    assert sum(funds.values()) == START_FUNDS * len(users)
    assert min(funds.values()) >= 0

    # Every item in exactly one place: one inventory or the market.
    places: dict[str, list[str]] = {item: [] for item in items}
    for user in users:
        for item in market.get_inventory(user):
            places[item].append(f"inventory of {user}")
    for listing in market.get_listings(0, market.MAX_PAGE):
        places[listing.item].append(f"listed by {listing.seller}")
    assert {item: where for item, where in places.items() if len(where) != 1} == {}

    # Only sellers list, so an item sells at most once and ends in its buyer's inventory.
    sales = [entry.decode().split("|") for entry in client.lrange(SALES_LOG, 0, -1)]
    assert len(sales) == bought
    assert len(sales) > 0
    sold_items = [item for item, _, _, _ in sales]
    assert len(sold_items) == len(set(sold_items))
    expected = dict.fromkeys(users, START_FUNDS)
    for item, seller, buyer, price in sales:
        assert items[item] == seller
        assert places[item] == [f"inventory of {buyer}"]
        expected[seller] += int(price)
        expected[buyer] -= int(price)
    assert funds == expected


@pytest.mark.slow
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_concurrent_trading_conserves_money_and_items(redis_client, strategy):
    items = _stock(LISTERS, BUYERS)
    jobs = [(_lister, (name, 3.0, n)) for n, name in enumerate(LISTERS)]
    jobs += [(_buyer, (name, strategy, 3.0, 10 + n)) for n, name in enumerate(BUYERS)]
    results = run_in_processes(lambda fn, args: fn(*args), jobs, timeout=60)
    bought = sum(r["bought"] for r in results[len(LISTERS) :])
    _check_trading(redis_client, items, LISTERS + BUYERS, bought)


async def _abuy(buyer: str, duration: float, rng: random.Random) -> int:
    """Buy listings at random, each with a strategy drawn at random, until the market is
    empty or ``duration`` seconds have passed; log each purchase; return how many."""
    log = get_async_redis()
    end, bought = time.monotonic() + duration, 0
    while time.monotonic() < end and (page := await market.aget_listings(0, 20)):
        listing = rng.choice(page)
        try:
            await market.apurchase(
                buyer, listing.item, listing.seller, listing.price, strategy=rng.choice(STRATEGIES)
            )
        except (ListingNotFound, InsufficientFunds):
            continue
        await log.rpush(SALES_LOG, f"{listing.item}|{listing.seller}|{buyer}|{listing.price}")
        bought += 1
    return bought


def _async_buyers(buyers: list[str], duration: float, seed: int) -> int:
    """In this process, one event loop with three coroutines per buyer, all buying at once."""

    async def main() -> int:
        rngs = [random.Random(seed * 100 + n) for n in range(3 * len(buyers))]
        try:
            counts = await asyncio.gather(
                *(_abuy(buyer, duration, rngs.pop()) for buyer in buyers for _ in range(3))
            )
        finally:
            await aclose_async_clients()
        return sum(counts)

    return asyncio.run(main())


@pytest.mark.slow
def test_async_buyers_in_several_processes_conserve_money_and_items(redis_client, redis_backend):
    # Every buyer buys from three coroutines in each of two processes at once, with mixed
    # strategies, until the funds run out: only an atomic funds check keeps them >= 0.
    items = _stock(LISTERS, BUYERS)
    for lister in LISTERS:
        for item in market.get_inventory(lister):
            market.list_item(lister, item, random.Random(item).randint(50, 200))
    bought = sum(run_in_processes(_async_buyers, [(BUYERS, 4.0, n) for n in range(2)], 60))
    # The listings outlast the funds: each buyer spent all but less than one listing's price.
    assert all(market.get_funds(buyer) < 200 for buyer in BUYERS)
    _check_trading(redis_client, items, LISTERS + BUYERS, bought)


def _spend(buyer: str, strategy: str, items: list[tuple[str, str]], price: int, start) -> int:
    bought = 0
    start.wait(10)  # all processes buy at the same moment, to race for the same funds
    for item, seller in items:
        try:
            market.purchase(buyer, item, seller, price, strategy=strategy)
        except InsufficientFunds:
            continue
        bought += 1
    return bought


@pytest.mark.slow
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_one_buyer_in_several_processes_never_overdraws(redis_client, strategy):
    # Four processes of one buyer buy different items at once, so under "item_lock" they
    # hold different locks: only an atomic funds check keeps the buyer from overdrawing.
    price, affordable, rounds = 100, 3, 8
    per_process = 4
    for round_ in range(rounds):
        buyer, sellers = f"spender{round_}", [f"seller{round_}-{n}" for n in range(4)]
        market.create_user(buyer, price * affordable)
        jobs, start = [], CONTEXT.Barrier(len(sellers))
        for seller in sellers:
            market.create_user(seller, 0)
            items = [(f"{seller}-item-{n}", seller) for n in range(per_process)]
            for item, _ in items:
                market.give_item(seller, item)
                market.list_item(seller, item, price)
            jobs.append((buyer, strategy, items, price, start))
        bought = sum(run_in_processes(_spend, jobs, timeout=60))
        assert bought == affordable
        assert market.get_funds(buyer) == 0
        assert sum(market.get_funds(seller) for seller in sellers) == price * affordable
        assert len(market.get_inventory(buyer)) == affordable
