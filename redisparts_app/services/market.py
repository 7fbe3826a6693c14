"""Marketplace transactions: users with funds, inventories, and a market of listed items.

Prices and funds are integers in cents (``validate_price`` refuses anything else).
Keys, all under the one hash tag ``{market}``::

    rp:market:{market}:user:<name>        hash   name, funds (cents)
    rp:market:{market}:inventory:<name>   set    items the user holds
    rp:market:{market}:listings           zset   "<item>:<seller>" -> price (cents)

An item is in exactly one place: an inventory or the listings. User and item
names pass ``keys.validate_key_part``, so neither holds ``:`` and a listing
member splits unambiguously at its one ``:``.

Why one hash tag: every purchase touches the buyer, the seller and the market
in one MULTI or one script, which a Redis Cluster only runs when all keys share
a slot. So the whole market lives on one node and its throughput is that node's.
Sharding by user would spread the load but break the atomic purchase (a
cross-slot step would need two-phase commit). Locks are keys of their own,
outside the market's slot: they are not part of the atomic step.

``purchase`` takes a strategy by name (default REDISPARTS["MARKET_PURCHASE_STRATEGY"]):

- ``"watch"``: WATCH the market and the buyer, check, MULTI/EXEC; retry on conflict.
- ``"market_lock"``: the same under one market-wide lock, so buyers queue instead of retrying.
- ``"item_lock"``: the same under a lock per listing (one of ITEM_LOCK_STRIPES lock
  names chosen by a hash of the listing), so only buyers of one item queue.
- ``"lua"``: one script checks and moves everything; no retries, no lock.

The lock strategies still commit under WATCH: listing, cancelling and the
other strategies do not take their lock, and one buyer's funds are shared by
all items, so the lock only cuts contention while WATCH keeps the step safe.
The strategies are therefore interchangeable, even mixed. On failure each
raises a ``MarketError`` subclass and changes nothing: ``PriceChanged`` (the
listed price is not the one the buyer saw), ``InsufficientFunds``,
``ListingNotFound`` (sold or withdrawn), ``OwnItem``, ``UnknownUser``,
``MarketBusy`` (WATCH retries or the lock wait exceeded their time limit,
REDISPARTS["MARKET_RETRY_TIMEOUT"] / ["MARKET_LOCK_WAIT"], in seconds).
Success returns a ``Purchase`` with the number of WATCH retries it took.

On a Redis Cluster every strategy runs: redis-py 5.2's cluster client has no
WATCH/MULTI, so the transactions go to the plain client of the primary holding
the ``{market}`` slot (``connection.on_slot``), which holds every key they touch.
"""

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis
from redis.client import Pipeline

from .. import keys, lua
from ..conf import app_settings
from ..connection import get_redis, on_slot
from ..exceptions import (
    InsufficientFunds,
    InvalidPrice,
    ItemNotHeld,
    ListingNotFound,
    LockNotOwned,
    LockTimeout,
    MarketBusy,
    OwnItem,
    PriceChanged,
    UnknownStrategy,
    UnknownUser,
    UserExists,
)
from .locks import Lock

logger = logging.getLogger(__name__)

COMPONENT = "market"
TAG = "market"
STRATEGIES = ("watch", "market_lock", "item_lock", "lua")
MAX_PAGE = 1000
ITEM_LOCK_STRIPES = 4096


@dataclass(frozen=True)
class Listing:
    """One item on the market."""

    item: str
    seller: str
    price: int  # cents


@dataclass(frozen=True)
class Purchase:
    """A completed purchase and what it cost to get it through."""

    buyer: str
    seller: str
    item: str
    price: int  # cents
    strategy: str
    retries: int  # WATCH conflicts retried (always 0 for "lua")


def user_key(user: str) -> str:
    return keys.make_key(COMPONENT, TAG, "user", user)


def inventory_key(user: str) -> str:
    return keys.make_key(COMPONENT, TAG, "inventory", user)


def listings_key() -> str:
    return keys.make_key(COMPONENT, TAG, "listings")


def listing_member(item: str, seller: str) -> str:
    return f"{item}:{seller}"


def validate_price(value: object, kind: str = "price", *, allow_zero: bool = False) -> int:
    """Return ``value`` as an integer number of cents, or raise InvalidPrice.

    Accept an int or a string of ASCII digits (as a form sends it); refuse bools,
    floats, negatives, zero (unless ``allow_zero``) and values above
    REDISPARTS["MARKET_MAX_PRICE"] (prices) or ["MARKET_MAX_FUNDS"] (funds).
    """
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidPrice(f"{kind} must be a whole number of cents, got {value!r}")
    limit = app_settings.MARKET_MAX_FUNDS if kind == "funds" else app_settings.MARKET_MAX_PRICE
    if value < 0 or (value == 0 and not allow_zero):
        raise InvalidPrice(f"{kind} must be positive, got {value}")
    if value > limit:
        raise InvalidPrice(f"{kind} {value} is above the limit of {limit} cents")
    return value


def _client(client: redis.Redis | None) -> redis.Redis:
    return client if client is not None else get_redis()


def _require_user(client: redis.Redis, user: str) -> None:
    if not client.exists(user_key(user)):
        raise UnknownUser(user)


def create_user(name: str, funds: int = 0, *, client: redis.Redis | None = None) -> None:
    """Create user ``name`` with ``funds`` cents; raise UserExists if the name is taken."""
    name = keys.validate_key_part(name, "user")
    funds = validate_price(funds, "funds", allow_zero=True)
    with on_slot(_client(client), user_key(name)) as server:
        pipe = server.pipeline(transaction=True)
        # Both HSETNX in one MULTI: an existing user keeps its funds untouched.
        pipe.hsetnx(user_key(name), "name", name)
        pipe.hsetnx(user_key(name), "funds", funds)
        created, _ = pipe.execute()
    if not created:
        raise UserExists(name)


def give_item(user: str, item: str, *, client: redis.Redis | None = None) -> bool:
    """Put ``item`` in ``user``'s inventory; return False when it was already there."""
    user = keys.validate_key_part(user, "user")
    item = keys.validate_key_part(item, "item")
    client = _client(client)
    _require_user(client, user)
    return bool(client.sadd(inventory_key(user), item))


def get_funds(user: str, *, client: redis.Redis | None = None) -> int:
    """Return ``user``'s funds in cents; raise UnknownUser."""
    user = keys.validate_key_part(user, "user")
    funds = _client(client).hget(user_key(user), "funds")
    if funds is None:
        raise UnknownUser(user)
    return int(funds)


def get_inventory(user: str, *, client: redis.Redis | None = None) -> list[str]:
    """Return the items ``user`` holds (not those listed), sorted by name."""
    user = keys.validate_key_part(user, "user")
    client = _client(client)
    _require_user(client, user)
    return sorted(item.decode() for item in client.smembers(inventory_key(user)))


def get_listings(
    offset: int = 0, limit: int = 50, *, client: redis.Redis | None = None
) -> list[Listing]:
    """Return up to ``limit`` listings from ``offset``, cheapest first (ties by member)."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a non-negative integer, got {offset!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be an integer from 1 to {MAX_PAGE}, got {limit!r}")
    rows = _client(client).zrange(listings_key(), offset, offset + limit - 1, withscores=True)
    listings = []
    for member, score in rows:
        item, _, seller = member.decode().partition(":")
        listings.append(Listing(item=item, seller=seller, price=int(score)))
    return listings


def count_listings(*, client: redis.Redis | None = None) -> int:
    """Return the number of items on the market."""
    return _client(client).zcard(listings_key())


def get_price(item: str, seller: str, *, client: redis.Redis | None = None) -> int | None:
    """Return the listed price of ``item`` by ``seller`` in cents, or None when not listed."""
    item = keys.validate_key_part(item, "item")
    seller = keys.validate_key_part(seller, "user")
    score = _client(client).zscore(listings_key(), listing_member(item, seller))
    return None if score is None else int(score)


def list_item(
    seller: str,
    item: str,
    price: int,
    *,
    client: redis.Redis | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Move ``item`` from ``seller``'s inventory to the market at ``price`` cents.

    WATCHes the inventory so a concurrent sale or listing of the same item
    cannot slip in between the check and the move. Raise ItemNotHeld when the
    seller does not hold the item, UnknownUser, InvalidPrice, or MarketBusy after
    REDISPARTS["MARKET_RETRY_TIMEOUT"] seconds of conflicts. Return the retries.
    """
    seller = keys.validate_key_part(seller, "user")
    item = keys.validate_key_part(item, "item")
    price = validate_price(price)
    client = _client(client)
    _require_user(client, seller)
    inventory = inventory_key(seller)
    member = listing_member(item, seller)

    def attempt(pipe: Pipeline) -> None:
        pipe.watch(inventory)
        if not pipe.sismember(inventory, item):
            raise ItemNotHeld(seller, item)
        pipe.multi()
        pipe.zadd(listings_key(), {member: price})
        pipe.srem(inventory, item)
        pipe.execute()

    return _retry_on_conflict(client, attempt, f"listing {item!r}", clock)


def _retry_on_conflict(
    client: redis.Redis,
    attempt: Callable[[Pipeline], None],
    what: str,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Run ``attempt(pipe)`` until no WatchError; return the retries, or raise MarketBusy."""
    deadline = clock() + app_settings.MARKET_RETRY_TIMEOUT
    retries = 0
    with on_slot(client, listings_key()) as server, server.pipeline(transaction=True) as pipe:
        while True:
            try:
                attempt(pipe)
                return retries
            except redis.WatchError as exc:
                retries += 1
                if clock() > deadline:
                    raise MarketBusy(f"{what} kept conflicting for {retries} retries") from exc


def cancel_listing(seller: str, item: str, *, client: redis.Redis | None = None) -> None:
    """Withdraw ``seller``'s own listing of ``item`` and return the item to their inventory.

    Only the owner can cancel: the listing is addressed by its seller. Raise
    ListingNotFound when it is not listed (sold or already withdrawn).
    """
    seller = keys.validate_key_part(seller, "user")
    item = keys.validate_key_part(item, "item")
    client = _client(client)
    _require_user(client, seller)
    cancelled = lua.script(client, "market_cancel")(
        keys=[listings_key(), inventory_key(seller)], args=[listing_member(item, seller), item]
    )
    if not cancelled:
        raise ListingNotFound(seller, item)


@dataclass(frozen=True)
class _Order:
    buyer: str
    seller: str
    item: str
    price: int


def purchase(
    buyer: str,
    item: str,
    seller: str,
    expected_price: int,
    *,
    strategy: str | None = None,
    client: redis.Redis | None = None,
) -> Purchase:
    """Buy ``item`` listed by ``seller`` if it still costs ``expected_price`` cents.

    ``strategy`` is one of STRATEGIES (default REDISPARTS["MARKET_PURCHASE_STRATEGY"]).
    Money moves from buyer to seller and the item to the buyer's inventory in
    one atomic step, or nothing happens and a MarketError subclass says why.
    """
    buyer = keys.validate_key_part(buyer, "user")
    seller = keys.validate_key_part(seller, "user")
    item = keys.validate_key_part(item, "item")
    expected_price = validate_price(expected_price)
    strategy = strategy if strategy is not None else app_settings.MARKET_PURCHASE_STRATEGY
    if strategy not in STRATEGIES:
        raise UnknownStrategy(f"unknown purchase strategy {strategy!r}; use one of {STRATEGIES}")
    if buyer == seller:
        raise OwnItem(buyer, item)
    client = _client(client)
    order = _Order(buyer, seller, item, expected_price)
    if strategy == "lua":
        retries = _purchase_lua(client, order)
    elif strategy == "watch":
        retries = _purchase_watch(client, order)
    else:
        retries = _purchase_locked(client, order, strategy)
    return Purchase(buyer, seller, item, expected_price, strategy, retries)


_LUA_REFUSALS = {-1: "not listed", -2: "funds", -3: "unknown buyer"}


def _purchase_lua(client: redis.Redis, order: _Order) -> int:
    code, value = lua.script(client, "market_purchase")(
        keys=[
            listings_key(),
            user_key(order.buyer),
            user_key(order.seller),
            inventory_key(order.buyer),
        ],
        args=[listing_member(order.item, order.seller), order.item, order.price],
    )
    if code == 1:
        return 0
    if code == 0:
        raise PriceChanged(order.item, order.price, int(value))
    if code == -1:
        raise ListingNotFound(order.seller, order.item)
    if code == -2:
        raise InsufficientFunds(order.buyer, int(value), order.price)
    raise UnknownUser(order.buyer)


def _purchase_watch(client: redis.Redis, order: _Order) -> int:
    """Check and commit under WATCH of the market and the buyer; return the retries."""
    market, buyer = listings_key(), user_key(order.buyer)
    member = listing_member(order.item, order.seller)

    def attempt(pipe: Pipeline) -> None:
        # The seller's funds and the buyer's inventory only grow by commutative
        # HINCRBY/SADD, so they need no WATCH.
        pipe.watch(market, buyer)
        listed = pipe.zscore(market, member)
        funds = pipe.hget(buyer, "funds")
        if funds is None:
            raise UnknownUser(order.buyer)
        if listed is None:
            raise ListingNotFound(order.seller, order.item)
        if int(listed) != order.price:
            raise PriceChanged(order.item, order.price, int(listed))
        if int(funds) < order.price:
            raise InsufficientFunds(order.buyer, int(funds), order.price)
        pipe.multi()
        pipe.hincrby(user_key(order.seller), "funds", order.price)
        pipe.hincrby(buyer, "funds", -order.price)
        pipe.sadd(inventory_key(order.buyer), order.item)
        pipe.zrem(market, member)
        pipe.execute()

    return _retry_on_conflict(client, attempt, f"purchase of {order.item!r}")


def lock_name(item: str, seller: str, strategy: str) -> str:
    """Return the name of the lock a ``strategy`` purchase of one listing takes."""
    if strategy == "market_lock":
        return "market"
    # A fixed set of stripes, not one lock per listing: every lock name leaves a
    # fencing counter behind for good. Two listings sharing a stripe only queue
    # their buyers together.
    digest = hashlib.sha256(listing_member(item, seller).encode()).digest()
    return f"market-item-{int.from_bytes(digest[:4], 'big') % ITEM_LOCK_STRIPES}"


def _purchase_locked(client: redis.Redis, order: _Order, strategy: str) -> int:
    name = lock_name(order.item, order.seller, strategy)
    wait = app_settings.MARKET_LOCK_WAIT
    retries: int | None = None
    try:
        with Lock(name, ttl=app_settings.MARKET_LOCK_TTL, timeout=wait, client=client):
            retries = _purchase_watch(client, order)
    except LockTimeout as exc:
        raise MarketBusy(f"purchase lock {name!r} stayed held for {wait:g}s") from exc
    except LockNotOwned:
        if retries is None:
            raise
        # The lock expired before the release; WATCH still made the commit safe.
        logger.warning("purchase lock %r expired before release; purchase committed", name)
    return retries
