import contextlib
import json
import random
import time

import pytest
from redis.crc import key_slot

from redisparts_app import keys
from redisparts_app.exceptions import (
    InsufficientFunds,
    InvalidKeyPart,
    InvalidPrice,
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
from redisparts_app.services.locks import Lock
from tests.processes import CONTEXT, run_in_processes

pytestmark = pytest.mark.cluster

STRATEGIES = list(market.STRATEGIES)


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


def test_create_user_twice_keeps_the_first_funds(shop):
    with pytest.raises(UserExists):
        market.create_user("alice", 5)
    assert market.get_funds("alice") == 1000


@pytest.mark.parametrize("bad", [-1, 0, 1.5, "12.5", "abc", "", True, None, 10**30, "1" * 30])
def test_bad_prices_are_refused_before_anything_is_written(shop, bad):
    before = _snapshot(shop)
    with pytest.raises(InvalidPrice):
        market.list_item("alice", "sword", bad)
    assert _snapshot(shop) == before


def test_price_as_digit_string_is_accepted(shop):
    market.list_item("alice", "sword", "250")
    assert market.get_price("sword", "alice") == 250


@pytest.mark.parametrize("bad", ["", "a:b", "x{y}", "star*", "tab\there", "x" * 300])
def test_bad_names_are_refused(shop, bad):
    with pytest.raises(InvalidKeyPart):
        market.give_item("alice", bad)
    with pytest.raises(InvalidKeyPart):
        market.create_user(bad, 10)


def test_unknown_users_are_refused(shop):
    with pytest.raises(UnknownUser):
        market.give_item("nobody", "x")
    with pytest.raises(UnknownUser):
        market.get_funds("nobody")
    market.list_item("alice", "sword", 100)
    for strategy in STRATEGIES:
        with pytest.raises(UnknownUser):
            market.purchase("nobody", "sword", "alice", 100, strategy=strategy)
    assert market.get_price("sword", "alice") == 100


def test_listing_moves_the_item_and_listing_an_item_not_held_is_refused(shop):
    market.list_item("alice", "sword", 300)
    assert market.get_inventory("alice") == ["shield"]
    assert market.get_listings() == [market.Listing("sword", "alice", 300)]
    before = _snapshot(shop)
    with pytest.raises(ItemNotHeld):
        market.list_item("alice", "sword", 300)  # already listed
    with pytest.raises(ItemNotHeld):
        market.list_item("bob", "shield", 300)  # alice's
    assert _snapshot(shop) == before


def test_cancel_returns_the_item_and_only_the_owner_can_cancel(shop):
    market.list_item("alice", "sword", 300)
    with pytest.raises(ListingNotFound):
        market.cancel_listing("bob", "sword")
    market.cancel_listing("alice", "sword")
    assert market.get_inventory("alice") == ["shield", "sword"]
    assert market.count_listings() == 0
    with pytest.raises(ListingNotFound):
        market.cancel_listing("alice", "sword")


def test_listings_are_sorted_by_price_and_paged(shop):
    market.create_user("carol", 0)
    for n, price in enumerate([500, 100, 300, 200, 400]):
        market.give_item("carol", f"thing {n}")
        market.list_item("carol", f"thing {n}", price)
    prices = [listing.price for listing in market.get_listings(0, 3)]
    assert prices == [100, 200, 300]
    assert [listing.price for listing in market.get_listings(3, 3)] == [400, 500]
    assert market.get_listings(10, 3) == []
    with pytest.raises(ValueError, match="offset"):
        market.get_listings(-1, 3)
    with pytest.raises(ValueError, match="limit"):
        market.get_listings(0, 0)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_purchase_moves_money_and_item(shop, strategy):
    market.list_item("alice", "sword", 300)
    result = market.purchase("bob", "sword", "alice", 300, strategy=strategy)
    assert (result.price, result.strategy, result.retries) == (300, strategy, 0)
    assert market.get_funds("bob") == 200
    assert market.get_funds("alice") == 1300
    assert market.get_inventory("bob") == ["sword"]
    assert market.count_listings() == 0


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_refused_purchases_change_nothing(shop, strategy):
    market.list_item("alice", "sword", 300)
    market.list_item("alice", "shield", 600)
    market.create_user("carol", 0)
    market.give_item("carol", "bow")
    market.list_item("carol", "bow", 50)
    before = _snapshot(shop)
    with pytest.raises(PriceChanged) as stale:
        market.purchase("bob", "sword", "alice", 250, strategy=strategy)
    assert stale.value.actual == 300
    with pytest.raises(InsufficientFunds):
        market.purchase("bob", "shield", "alice", 600, strategy=strategy)
    with pytest.raises(OwnItem):
        market.purchase("carol", "bow", "carol", 50, strategy=strategy)
    with pytest.raises(ListingNotFound):
        market.purchase("bob", "axe", "alice", 100, strategy=strategy)
    assert _snapshot(shop) == before


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_item_sold_or_withdrawn_cannot_be_bought(shop, strategy):
    market.create_user("carol", 1000)
    market.list_item("alice", "sword", 300)
    market.list_item("alice", "shield", 100)
    market.purchase("carol", "sword", "alice", 300, strategy=strategy)
    market.cancel_listing("alice", "shield")
    for item in ("sword", "shield"):
        with pytest.raises(ListingNotFound):
            market.purchase("bob", item, "alice", 300, strategy=strategy)
    assert market.get_funds("bob") == 500


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


def test_unknown_strategy_is_refused(shop):
    with pytest.raises(UnknownStrategy):
        market.purchase("bob", "sword", "alice", 300, strategy="magic")


@pytest.mark.parametrize("strategy", ["market_lock", "item_lock"])
def test_lock_strategies_wait_for_their_lock_and_give_up_with_market_busy(shop, settings, strategy):
    settings.REDISPARTS = {"MARKET_LOCK_WAIT": 0.2}
    market.list_item("alice", "sword", 300)
    market.list_item("alice", "shield", 100)
    before = _snapshot(shop)
    with Lock(market.lock_name("sword", "alice", strategy), ttl=30, timeout=1):
        with pytest.raises(MarketBusy):
            market.purchase("bob", "sword", "alice", 300, strategy=strategy)
        assert _snapshot(shop) == before
        # Another listing is behind the same market-wide lock, not behind the same item lock.
        if strategy == "item_lock":
            market.purchase("bob", "shield", "alice", 100, strategy=strategy)
        else:
            with pytest.raises(MarketBusy):
                market.purchase("bob", "shield", "alice", 100, strategy=strategy)
    assert market.purchase("bob", "sword", "alice", 300, strategy=strategy).price == 300


def test_item_lock_names_are_valid_and_spread_over_stripes():
    names = {market.lock_name(f"item {n}", "alice", "item_lock") for n in range(200)}
    assert len(names) > 190
    assert all(keys.validate_key_part(name) == name for name in names)
    assert market.lock_name("x", "y", "market_lock") == "market"


def test_default_strategy_comes_from_settings(shop, settings):
    settings.REDISPARTS = {"MARKET_PURCHASE_STRATEGY": "watch"}
    market.list_item("alice", "sword", 300)
    assert market.purchase("bob", "sword", "alice", 300).strategy == "watch"


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


@pytest.mark.slow
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_concurrent_trading_conserves_money_and_items(redis_client, strategy):
    items = {}
    for lister in LISTERS:
        market.create_user(lister, START_FUNDS)
        for n in range(ITEMS_PER_LISTER):
            item = f"{lister}-item-{n}"
            market.give_item(lister, item)
            items[item] = lister
    for buyer in BUYERS:
        market.create_user(buyer, START_FUNDS)
    users = LISTERS + BUYERS

    jobs = [(_lister, (name, 3.0, n)) for n, name in enumerate(LISTERS)]
    jobs += [(_buyer, (name, strategy, 3.0, 10 + n)) for n, name in enumerate(BUYERS)]
    results = run_in_processes(lambda fn, args: fn(*args), jobs, timeout=60)
    buyer_results = results[len(LISTERS) :]

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

    # The independent sales log explains every balance; only listers list, so an item
    # sells at most once and ends in its buyer's inventory.
    sales = [entry.decode().split("|") for entry in redis_client.lrange(SALES_LOG, 0, -1)]
    assert len(sales) == sum(r["bought"] for r in buyer_results)
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
