"""Marketplace transactions: users with funds, inventories, and a market of listed items.

Import: ``from redisparts_app.services import market``.

Prices and funds are integers in cents (``validate_price`` refuses anything else).
Keys, all under the one hash tag ``{market}`` so that each atomic step is one slot::

    rp:market:{market}:user:<name>        hash   name, funds (cents)
    rp:market:{market}:inventory:<name>   set    items the user holds
    rp:market:{market}:listings           zset   "<item>:<seller>" -> price (cents)
    rp:market:{market}:outbox             zset   sale record JSON -> sold at (ms)
    rp:market:{market}:notice:<sale id>   string send marker of the sale's notice (TTL)

Guarantee: an item is in exactly one place, and a purchase moves the money and the item
and writes its sale record in one script or one WATCHed MULTI, or changes nothing and
raises a ``MarketError``, whatever the strategy (``"watch"``, ``"market_lock"``,
``"item_lock"``, ``"lua"``) and the mix of calls from any number of processes. Every call
that talks to Redis has an async twin named with an ``a`` on the same core (``faces``);
``relay_sales`` and ``relay_sale`` stay sync. See docs/components/market.md.
"""

import hashlib
import json
import logging
import math
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from json.encoder import encode_basestring
from typing import Any

import redis

from .. import faces, keys, lua
from ..conf import app_settings
from ..connection import Client, resolve_async_client, resolve_client
from ..exceptions import (
    InsufficientFunds,
    InvalidPrice,
    ItemAlreadyHeld,
    ItemListed,
    ItemNotHeld,
    ListingNotFound,
    MarketBusy,
    MarketError,
    OwnItem,
    PriceChanged,
    UnknownStrategy,
    UnknownUser,
    UserExists,
)
from ..frozen import filled
from .lease import Lease
from .locks import lock_keys

__all__ = [
    "STRATEGIES",
    "Listing",
    "Purchase",
    "Sale",
    "aabandon_notice",
    "abandon_notice",
    "abegin_notice",
    "acancel_listing",
    "acount_listings",
    "acount_pending_sales",
    "acreate_user",
    "afinish_notice",
    "aget_funds",
    "aget_inventory",
    "aget_listings",
    "aget_price",
    "agive_item",
    "alist_item",
    "apending_sales",
    "apurchase",
    "begin_notice",
    "cancel_listing",
    "count_listings",
    "count_pending_sales",
    "create_user",
    "finish_notice",
    "get_funds",
    "get_inventory",
    "get_listings",
    "get_price",
    "give_item",
    "inventory_key",
    "list_item",
    "listings_key",
    "lock_name",
    "notice_key",
    "outbox_key",
    "pending_sales",
    "purchase",
    "relay_sale",
    "relay_sales",
    "user_key",
    "validate_price",
]

logger = logging.getLogger(__name__)

COMPONENT = "market"
TAG = "market"
STRATEGIES = ("watch", "market_lock", "item_lock", "lua")
LOCKED = ("market_lock", "item_lock")  # the strategies that queue on a lock
MAX_PAGE = 1000
ITEM_LOCK_STRIPES = 4096


@dataclass(frozen=True)
class Listing:
    """One item on the market."""

    item: str
    seller: str
    price: int  # cents


@dataclass(frozen=True)
class Sale:
    """One completed sale, as recorded in the outbox by the purchase that made it."""

    sale_id: str
    seller: str
    buyer: str
    item: str
    price: int  # cents
    sold_at: float  # seconds since the epoch, the buyer's host clock

    def record(self) -> str:
        """Return the outbox member: JSON with sorted keys, the same bytes for the same sale."""
        if type(self.price) is int and type(self.sold_at) is float and math.isfinite(self.sold_at):
            # What json.dumps below writes, without its machinery (on every purchase):
            # the same string escaping, and floats and ints in their repr.
            quote = encode_basestring
            return (
                f'{{"buyer":{quote(self.buyer)},"item":{quote(self.item)},'
                f'"price":{self.price!r},"sale":{quote(self.sale_id)},'
                f'"seller":{quote(self.seller)},"time":{self.sold_at!r}}}'
            )
        fields = {
            "buyer": self.buyer,
            "item": self.item,
            "price": self.price,
            "sale": self.sale_id,
            "seller": self.seller,
            "time": self.sold_at,
        }
        return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_record(cls, raw: bytes | str) -> "Sale":
        """Parse an outbox member; raise ValueError when it is not a sale record."""
        try:
            fields = json.loads(raw)
            sale = cls(
                sale_id=fields["sale"],
                seller=fields["seller"],
                buyer=fields["buyer"],
                item=fields["item"],
                price=fields["price"],
                sold_at=fields["time"],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a sale record: {raw!r}") from exc
        if not isinstance(sale.price, int) or not isinstance(sale.sold_at, (int, float)):
            raise ValueError(f"not a sale record: {raw!r}")
        return sale


@dataclass(frozen=True)
class Purchase:
    """A completed purchase and what it cost to get it through."""

    buyer: str
    seller: str
    item: str
    price: int  # cents
    strategy: str
    retries: int  # WATCH conflicts retried (only "watch" retries; 0 for the others)
    sale: Sale  # the record the purchase wrote to the outbox


def user_key(user: str) -> str:
    return keys.make_key(COMPONENT, TAG, "user", user)


def inventory_key(user: str) -> str:
    return keys.make_key(COMPONENT, TAG, "inventory", user)


def listings_key() -> str:
    return keys.make_key(COMPONENT, TAG, "listings")


def outbox_key() -> str:
    return keys.make_key(COMPONENT, TAG, "outbox")


def notice_key(sale_id: str) -> str:
    return keys.make_key(COMPONENT, TAG, "notice", keys.validate_key_part(sale_id, "sale id"))


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


def _require_user(user: str) -> faces.Op:
    """EXISTS of the user's hash, raising UnknownUser when it is missing."""

    def known(exists: int) -> None:
        if not exists:
            raise UnknownUser(user)

    return faces.command("exists", user_key(user), then=known)


def create_user(name: str, funds: int = 0, *, client: Client | None = None) -> None:
    """Create user ``name`` with ``funds`` cents; raise UserExists if the name is taken."""
    faces.run(_create_user(name, funds), resolve_client(client))


async def acreate_user(name: str, funds: int = 0, *, client: Client | None = None) -> None:
    """The async twin of ``create_user`` (``client``: a redis.asyncio client or None)."""
    await faces.arun(_create_user(name, funds), client)


def _create_user(name: str, funds: int) -> faces.Op:
    name = keys.validate_key_part(name, "user")
    funds = validate_price(funds, "funds", allow_zero=True)

    def created(replies: list[Any]) -> None:
        if not replies[0]:
            raise UserExists(name)

    # Both HSETNX in one MULTI: an existing user keeps its funds untouched.
    ops = [
        faces.command("hsetnx", user_key(name), "name", name),
        faces.command("hsetnx", user_key(name), "funds", funds),
    ]
    return faces.transaction(user_key(name), ops, then=created)


def give_item(user: str, item: str, *, client: Client | None = None) -> bool:
    """Put a new ``item`` in ``user``'s inventory; return False when it was already there.

    Raise ItemListed when the user has an item of that name on the market (a
    second one would be in two places once the listing is cancelled), UnknownUser.
    """
    return faces.run(_give_item(user, item), resolve_client(client))


async def agive_item(user: str, item: str, *, client: Client | None = None) -> bool:
    """The async twin of ``give_item``."""
    return await faces.arun(_give_item(user, item), client)


def _give_item(user: str, item: str) -> faces.Op:
    user = keys.validate_key_part(user, "user")
    item = keys.validate_key_part(item, "item")

    def given(code: int) -> bool:
        if code == -3:
            raise UnknownUser(user)
        if code == -1:
            raise ItemListed(user, item)
        return code == 1

    return faces.script(
        "market_give",
        [user_key(user), inventory_key(user), listings_key()],
        [item, listing_member(item, user)],
        then=given,
    )


def get_funds(user: str, *, client: Client | None = None) -> int:
    """Return ``user``'s funds in cents; raise UnknownUser."""
    return faces.run(_get_funds(user), resolve_client(client))


async def aget_funds(user: str, *, client: Client | None = None) -> int:
    """The async twin of ``get_funds``."""
    return await faces.arun(_get_funds(user), client)


def _get_funds(user: str) -> faces.Op:
    user = keys.validate_key_part(user, "user")

    def cents(funds: bytes | None) -> int:
        if funds is None:
            raise UnknownUser(user)
        return int(funds)

    return faces.command("hget", user_key(user), "funds", then=cents)


def get_inventory(user: str, *, client: Client | None = None) -> list[str]:
    """Return the items ``user`` holds (not those listed), sorted by name."""
    return faces.run(_get_inventory(user), resolve_client(client))


async def aget_inventory(user: str, *, client: Client | None = None) -> list[str]:
    """The async twin of ``get_inventory``."""
    return await faces.arun(_get_inventory(user), client)


def _get_inventory(user: str) -> faces.Steps[list[str]]:
    user = keys.validate_key_part(user, "user")
    yield _require_user(user)
    items = yield faces.command("smembers", inventory_key(user))
    return sorted(item.decode() for item in items)


def get_listings(
    offset: int = 0, limit: int = 50, *, client: Client | None = None
) -> list[Listing]:
    """Return up to ``limit`` listings from ``offset``, cheapest first (ties by member)."""
    return faces.run(_get_listings(offset, limit), resolve_client(client))


async def aget_listings(
    offset: int = 0, limit: int = 50, *, client: Client | None = None
) -> list[Listing]:
    """The async twin of ``get_listings``."""
    return await faces.arun(_get_listings(offset, limit), client)


def _get_listings(offset: int, limit: int) -> faces.Op:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a non-negative integer, got {offset!r}")
    _check_limit(limit)

    def listings(rows: list[Any]) -> list[Listing]:
        page = []
        for member, score in rows:
            item, _, seller = member.decode().partition(":")
            page.append(Listing(item=item, seller=seller, price=int(score)))
        return page

    return faces.command(
        "zrange", listings_key(), offset, offset + limit - 1, withscores=True, then=listings
    )


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be an integer from 1 to {MAX_PAGE}, got {limit!r}")


def count_listings(*, client: Client | None = None) -> int:
    """Return the number of items on the market."""
    return faces.run(faces.command("zcard", listings_key()), resolve_client(client))


async def acount_listings(*, client: Client | None = None) -> int:
    """The async twin of ``count_listings``."""
    return await faces.arun(faces.command("zcard", listings_key()), client)


def get_price(item: str, seller: str, *, client: Client | None = None) -> int | None:
    """Return the listed price of ``item`` by ``seller`` in cents, or None when not listed."""
    return faces.run(_get_price(item, seller), resolve_client(client))


async def aget_price(item: str, seller: str, *, client: Client | None = None) -> int | None:
    """The async twin of ``get_price``."""
    return await faces.arun(_get_price(item, seller), client)


def _get_price(item: str, seller: str) -> faces.Op:
    item = keys.validate_key_part(item, "item")
    seller = keys.validate_key_part(seller, "user")
    return faces.command(
        "zscore", listings_key(), listing_member(item, seller), then=_cents_or_none
    )


def _cents_or_none(score: float | None) -> int | None:
    return None if score is None else int(score)


def list_item(
    seller: str,
    item: str,
    price: int,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Move ``item`` from ``seller``'s inventory to the market at ``price`` cents.

    WATCHes the inventory so a concurrent sale or listing of the same item
    cannot slip in between the check and the move. Raise ItemNotHeld when the
    seller does not hold the item, ItemListed when it is already listed (its
    price stays; cancel to reprice), UnknownUser, InvalidPrice, or MarketBusy
    after REDISPARTS["MARKET_RETRY_TIMEOUT"] seconds of conflicts. Return the retries.
    """
    return faces.run(_list_item(seller, item, price, clock), resolve_client(client))


async def alist_item(
    seller: str,
    item: str,
    price: int,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """The async twin of ``list_item``."""
    return await faces.arun(_list_item(seller, item, price, clock), client)


def _list_item(seller: str, item: str, price: int, clock: Callable[[], float]) -> faces.Steps[int]:
    seller = keys.validate_key_part(seller, "user")
    item = keys.validate_key_part(item, "item")
    price = validate_price(price)
    yield _require_user(seller)
    market, inventory = listings_key(), inventory_key(seller)
    member = listing_member(item, seller)

    def refusal(reads: list[Any]) -> MarketError | None:
        listed, held = reads
        if listed is not None:
            return ItemListed(seller, item)
        return None if held else ItemNotHeld(seller, item)

    # Only the inventory is watched: every step that puts <item>:<seller> on the
    # market takes the item out of this inventory, so the check cannot go stale
    # before EXEC without a WatchError.
    reads = [faces.command("zscore", market, member), faces.command("sismember", inventory, item)]
    moves = [faces.command("zadd", market, {member: price}), faces.command("srem", inventory, item)]
    watched = _checked_watch(inventory, reads, refusal, moves)
    return (yield from _until_no_conflict(watched, f"listing {item!r}", clock))


def _checked_watch(
    key: str,
    reads: list[faces.Op],
    refusal: Callable[[list[Any]], MarketError | None],
    writes: list[faces.Op],
    also: tuple[str, ...] = (),
) -> faces.Op:
    """A WATCH transaction of ``writes``, or of nothing when ``refusal(read replies)`` is
    an error, raised once EXEC has confirmed the reads.

    The reads are separate round trips: a write between two of them gives a state that
    never was. Committing nothing (MULTI/EXEC of no command) costs the round trip an
    UNWATCH would, and EXEC refuses such torn reads with a WatchError (a retry), so a
    refusal always says what the market held.
    """

    def write(replies: list[Any]) -> list[faces.Op]:
        return [] if refusal(replies) is not None else writes

    def confirmed(reply: tuple[list[Any], list[Any]]) -> None:
        error = refusal(reply[0])
        if error is not None:
            raise error

    return faces.watch(key, reads, write, also=also, then=confirmed)


def _until_no_conflict(
    op: faces.Op, what: str, clock: Callable[[], float] = time.monotonic
) -> faces.Steps[int]:
    """Run the WATCH transaction ``op`` until no WatchError; return the retries, or raise
    MarketBusy after REDISPARTS["MARKET_RETRY_TIMEOUT"] seconds of conflicts."""
    deadline = clock() + app_settings.MARKET_RETRY_TIMEOUT
    retries = 0
    while True:
        try:
            yield op
            return retries
        except redis.WatchError as exc:
            retries += 1
            if clock() > deadline:
                raise MarketBusy(f"{what} kept conflicting for {retries} retries") from exc


def cancel_listing(seller: str, item: str, *, client: Client | None = None) -> None:
    """Withdraw ``seller``'s own listing of ``item`` and return the item to their inventory.

    Only the owner can cancel: the listing is addressed by its seller. Raise
    ListingNotFound when it is not listed (sold or already withdrawn).
    """
    faces.run(_cancel_listing(seller, item), resolve_client(client))


async def acancel_listing(seller: str, item: str, *, client: Client | None = None) -> None:
    """The async twin of ``cancel_listing``."""
    await faces.arun(_cancel_listing(seller, item), client)


def _cancel_listing(seller: str, item: str) -> faces.Steps[None]:
    seller = keys.validate_key_part(seller, "user")
    item = keys.validate_key_part(item, "item")
    yield _require_user(seller)
    cancelled = yield faces.script(
        "market_cancel",
        [listings_key(), inventory_key(seller)],
        [listing_member(item, seller), item],
    )
    if not cancelled:
        raise ListingNotFound(seller, item)


@dataclass(slots=True)
class _Order:
    buyer: str
    seller: str
    item: str
    price: int
    strategy: str
    sale: Sale

    def done(self, retries: int) -> Purchase:
        return filled(
            Purchase,
            {"buyer": self.buyer, "seller": self.seller, "item": self.item, "price": self.price,
             "strategy": self.strategy, "retries": retries, "sale": self.sale},
        )  # fmt: skip

    def bought(self, reply: int | list[Any]) -> Purchase:
        """Decode the ``market_purchase`` script's reply: the Purchase, or the refusal."""
        if reply == 1:
            return self.done(0)
        code, value = reply if isinstance(reply, list) else (reply, 0)
        if code == 0:
            raise PriceChanged(self.item, self.price, int(value))
        if code == -1:
            raise ListingNotFound(self.seller, self.item)
        if code == -2:
            raise InsufficientFunds(self.buyer, int(value), self.price)
        if code == -4:
            raise ItemAlreadyHeld(self.buyer, self.item)
        raise UnknownUser(self.buyer)


def purchase(
    buyer: str,
    item: str,
    seller: str,
    expected_price: int,
    *,
    strategy: str | None = None,
    client: Client | None = None,
) -> Purchase:
    """Buy ``item`` listed by ``seller`` if it still costs ``expected_price`` cents.

    ``strategy`` is one of STRATEGIES (default REDISPARTS["MARKET_PURCHASE_STRATEGY"]).
    Money moves from buyer to seller, the item to the buyer's inventory and the
    sale record into the outbox in one atomic step, or nothing happens and a
    MarketError subclass says why. The returned Purchase carries the Sale.
    """
    order = _order(buyer, item, seller, expected_price, strategy)
    client = resolve_client(client)
    if order.strategy in LOCKED:
        lease, name = _purchase_lease(order, client)
        if not lease.acquire(app_settings.MARKET_LOCK_WAIT):
            raise _lock_busy(name)
        try:
            return order.bought(lua.call(client, "market_purchase", *_purchase_call(order)))
        finally:
            lease.release()
    if order.strategy == "lua":  # one script, sent at once: a hot path
        return order.bought(lua.call(client, "market_purchase", *_purchase_call(order)))
    return faces.run(_purchase_watch(order), client)


async def apurchase(
    buyer: str,
    item: str,
    seller: str,
    expected_price: int,
    *,
    strategy: str | None = None,
    client: Client | None = None,
) -> Purchase:
    """The async twin of ``purchase``: a lock strategy's wait blocks only this coroutine.

    A task cancelled while it holds the purchase lock still releases it.
    """
    order = _order(buyer, item, seller, expected_price, strategy)
    client = resolve_async_client(client)
    if order.strategy in LOCKED:
        # The lock's release is a call of its own, not the end of the purchase's core:
        # a core closed by a cancellation cannot send another command, a finally can.
        lease, name = _purchase_lease(order, client)
        if not await lease.aacquire(app_settings.MARKET_LOCK_WAIT):
            raise _lock_busy(name)
        try:
            return await faces.arun(_purchase_lua(order), client)
        finally:
            await lease.arelease()
    return await faces.arun(_purchase(order), client)


def _order(buyer: str, item: str, seller: str, expected_price: int, strategy: str | None) -> _Order:
    buyer = keys.validate_key_part(buyer, "user")
    seller = keys.validate_key_part(seller, "user")
    item = keys.validate_key_part(item, "item")
    expected_price = validate_price(expected_price)
    strategy = strategy if strategy is not None else app_settings.MARKET_PURCHASE_STRATEGY
    if strategy not in STRATEGIES:
        raise UnknownStrategy(f"unknown purchase strategy {strategy!r}; use one of {STRATEGIES}")
    if buyer == seller:
        raise OwnItem(buyer, item)
    sale = filled(
        Sale,
        {"sale_id": new_sale_id(), "seller": seller, "buyer": buyer, "item": item,
         "price": expected_price, "sold_at": time.time()},
    )  # fmt: skip
    return _Order(buyer, seller, item, expected_price, strategy, sale)


def new_sale_id() -> str:
    """Return a fresh sale id (32 hex digits, random: ids never repeat across hosts)."""
    return os.urandom(16).hex()  # 128 random bits, no uuid object to build


def _purchase(order: _Order) -> faces.Core[Purchase]:
    """The core of a ``lua`` or ``watch`` purchase (the lock strategies take their lock
    around ``_purchase_lua``)."""
    return _purchase_lua(order) if order.strategy == "lua" else _purchase_watch(order)


@lru_cache(maxsize=16)
def _base_key(prefix: str) -> str:
    """The market's keys' common start, built once per KEY_PREFIX in force."""
    return keys.make_key(COMPONENT, TAG)


def _purchase_lua(order: _Order) -> faces.Op:
    return faces.script("market_purchase", *_purchase_call(order), then=order.bought)


def _purchase_call(order: _Order) -> tuple[list[str], list[Any]]:
    """The KEYS and ARGV of the ``market_purchase`` script for ``order``."""
    # The keys built on one base: the names are validated key parts already.
    base = _base_key(app_settings.KEY_PREFIX)
    keys = [
        f"{base}:listings",
        f"{base}:user:{order.buyer}",
        f"{base}:user:{order.seller}",
        f"{base}:inventory:{order.buyer}",
        f"{base}:outbox",
    ]
    args = [
        listing_member(order.item, order.seller),
        order.item,
        order.price,
        listing_member(order.item, order.buyer),
        order.sale.record(),
        int(order.sale.sold_at * 1000),
    ]
    return keys, args


def _purchase_watch(order: _Order) -> faces.Steps[Purchase]:
    """Check and commit under WATCH of the market and the buyer; retry on conflict."""
    market, buyer = listings_key(), user_key(order.buyer)
    inventory = inventory_key(order.buyer)
    member = listing_member(order.item, order.seller)
    record, sold_at = order.sale.record(), int(order.sale.sold_at * 1000)

    def refusal(reads: list[Any]) -> MarketError | None:
        (listed, own_listing), funds, held = reads
        if funds is None:
            return UnknownUser(order.buyer)
        if listed is None:
            return ListingNotFound(order.seller, order.item)
        if int(listed) != order.price:
            return PriceChanged(order.item, order.price, int(listed))
        if int(funds) < order.price:
            return InsufficientFunds(order.buyer, int(funds), order.price)
        if held or own_listing is not None:
            return ItemAlreadyHeld(order.buyer, order.item)
        return None

    sale = [
        faces.command("hincrby", user_key(order.seller), "funds", order.price),
        faces.command("hincrby", buyer, "funds", -order.price),
        faces.command("sadd", inventory, order.item),
        faces.command("zrem", market, member),
        # The sale record commits with the sale or not at all: the outbox.
        faces.command("zadd", outbox_key(), {record: sold_at}),
    ]

    # The seller's funds only grow by commutative HINCRBY, so they need no WATCH;
    # the buyer's inventory is watched for the one-item-per-name check.
    reads = [
        faces.command("zmscore", market, [member, listing_member(order.item, order.buyer)]),
        faces.command("hget", buyer, "funds"),
        faces.command("sismember", inventory, order.item),
    ]
    watched = _checked_watch(market, reads, refusal, sale, also=(buyer, inventory))
    return order.done((yield from _until_no_conflict(watched, f"purchase of {order.item!r}")))


def lock_name(item: str, seller: str, strategy: str) -> str:
    """Return the name of the lock a ``strategy`` purchase of one listing takes."""
    if strategy == "market_lock":
        return "market"
    # A fixed set of stripes, not one lock per listing: a bounded set of names that a
    # Lock may take too (a Lock leaves a fencing counter behind for good per name).
    # Two listings sharing a stripe only queue their buyers together.
    digest = hashlib.sha256(listing_member(item, seller).encode()).digest()
    return f"market-item-{int.from_bytes(digest[:4], 'big') % ITEM_LOCK_STRIPES}"


def _purchase_lease(order: _Order, client: Client | None) -> tuple[Lease, str]:
    """Return the lease a lock strategy's purchase queues on, and its lock's name.

    The lock makes buyers of one listing (or of the market) wait their turn instead of
    racing; the purchase itself is the ``lua`` strategy's script, whose checks (listed,
    price, funds, item in one place) hold whoever else writes meanwhile: listers, other
    strategies, or this buyer's purchases of other items under other locks. So nothing
    is retried, and a lock lost before its release costs nothing but a warning (the
    lease logs it; the script's step was atomic regardless).

    The lock is taken as a bare lease on the ``Lock``'s owner and wake-up keys, so a
    ``Lock(lock_name(...))`` holder excludes purchases and the other way round: no
    fencing token (the script needs none, and a fence counter per name would stay
    behind for good) and no note in the lock registry (a hold lasts one script call).
    """
    name = lock_name(order.item, order.seller, order.strategy)
    owner_key, _fence_key, signal_key = lock_keys(name)
    lease = Lease(owner_key, app_settings.MARKET_LOCK_TTL, client=client, signal_key=signal_key)
    return lease, name


def _lock_busy(name: str) -> MarketBusy:
    wait = app_settings.MARKET_LOCK_WAIT
    return MarketBusy(f"purchase lock {name!r} stayed held for {wait:g}s")


# --- the outbox and the notice markers ---------------------------------------------------


def pending_sales(limit: int = 100, *, client: Client | None = None) -> list[Sale]:
    """Return up to ``limit`` sales not yet relayed, oldest first."""
    return faces.run(_pending_sales(limit), resolve_client(client))


async def apending_sales(limit: int = 100, *, client: Client | None = None) -> list[Sale]:
    """The async twin of ``pending_sales``."""
    return await faces.arun(_pending_sales(limit), client)


def _pending_sales(limit: int) -> faces.Op:
    _check_limit(limit)
    return faces.command(
        "zrange",
        outbox_key(),
        0,
        limit - 1,
        then=lambda rows: [Sale.from_record(raw) for raw in rows],
    )


def count_pending_sales(*, client: Client | None = None) -> int:
    """Return the number of sales in the outbox."""
    return faces.run(faces.command("zcard", outbox_key()), resolve_client(client))


async def acount_pending_sales(*, client: Client | None = None) -> int:
    """The async twin of ``count_pending_sales``."""
    return await faces.arun(faces.command("zcard", outbox_key()), client)


def relay_sales(
    deliver: Callable[[Sale], object], limit: int = 100, *, client: Client | None = None
) -> int:
    """Hand up to ``limit`` pending sales, oldest first, to ``deliver``; return how many.

    Each record leaves the outbox only after ``deliver(sale)`` returned, so a
    relay killed in between, or two relays at once, deliver a sale again:
    ``deliver`` must be idempotent per ``sale.sale_id``. An exception from
    ``deliver`` (or a record that does not parse: ValueError) propagates and
    leaves that record and the later ones pending. Keys: rp:market:{market}:outbox.
    """
    _check_limit(limit)
    client = resolve_client(client)
    delivered = 0
    for raw in client.zrange(outbox_key(), 0, limit - 1):
        deliver(Sale.from_record(raw))
        # ZREM of the exact member: safe beside other relays, unlike trimming by rank.
        client.zrem(outbox_key(), raw)
        delivered += 1
    return delivered


def relay_sale(
    sale: Sale, deliver: Callable[[Sale], object], *, client: Client | None = None
) -> bool:
    """Deliver one sale now (the fast path after a purchase) and drop its outbox record.

    Same contract as relay_sales; return False when a relay had already dropped it
    (it was delivered then, and ``deliver`` ran again here, idempotently).
    """
    deliver(sale)
    return bool(resolve_client(client).zrem(outbox_key(), sale.record()))


SENT = b"sent"


def begin_notice(sale_id: str, claim_ttl: float, *, client: Client | None = None) -> str:
    """Claim the sending of the sale's notice; return a claim token, "sent" or "busy".

    A token: send, then call finish_notice (or abandon_notice on failure).
    "sent": a previous run sent it; do nothing. "busy": another run holds a claim
    (or died holding it, until ``claim_ttl`` seconds pass); try again later.
    Bound: a run killed after the notice left and before finish_notice makes the
    next run after ``claim_ttl`` send it again (at most once per such kill).
    Keys: rp:market:{market}:notice:<sale id>.
    """
    return faces.run(_begin_notice(sale_id, claim_ttl), resolve_client(client))


async def abegin_notice(sale_id: str, claim_ttl: float, *, client: Client | None = None) -> str:
    """The async twin of ``begin_notice``."""
    return await faces.arun(_begin_notice(sale_id, claim_ttl), client)


def _begin_notice(sale_id: str, claim_ttl: float) -> faces.Steps[str]:
    key = notice_key(sale_id)
    if not isinstance(claim_ttl, (int, float)) or isinstance(claim_ttl, bool) or claim_ttl <= 0:
        raise ValueError(f"claim_ttl must be a positive number of seconds, got {claim_ttl!r}")
    token = f"sending:{secrets.token_hex(8)}"
    if (yield faces.command("set", key, token, nx=True, px=max(1, int(claim_ttl * 1000)))):
        return token
    return "sent" if (yield faces.command("get", key)) == SENT else "busy"


def finish_notice(sale_id: str, keep: float, *, client: Client | None = None) -> None:
    """Mark the sale's notice sent for ``keep`` seconds (redeliveries within it send nothing)."""
    faces.run(_finish_notice(sale_id, keep), resolve_client(client))


async def afinish_notice(sale_id: str, keep: float, *, client: Client | None = None) -> None:
    """The async twin of ``finish_notice``."""
    await faces.arun(_finish_notice(sale_id, keep), client)


def _finish_notice(sale_id: str, keep: float) -> faces.Op:
    if not isinstance(keep, (int, float)) or isinstance(keep, bool) or keep <= 0:
        raise ValueError(f"keep must be a positive number of seconds, got {keep!r}")
    return faces.command("set", notice_key(sale_id), SENT, px=max(1, int(keep * 1000)))


def abandon_notice(sale_id: str, token: str, *, client: Client | None = None) -> bool:
    """Drop the claim ``token`` (the send failed) so a retry may send; False if not held."""
    return faces.run(_abandon_notice(sale_id, token), resolve_client(client))


async def aabandon_notice(sale_id: str, token: str, *, client: Client | None = None) -> bool:
    """The async twin of ``abandon_notice``."""
    return await faces.arun(_abandon_notice(sale_id, token), client)


def _abandon_notice(sale_id: str, token: str) -> faces.Op:
    return faces.script("market_notice_abandon", [notice_key(sale_id)], [token], then=bool)
