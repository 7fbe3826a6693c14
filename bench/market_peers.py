"""The peers of the market's purchase strategies in ``bench/market.py``.

- The book's locks (Redis in Action 6.2.3 and 6.2.5): ``acquire_lock_with_timeout``
  (SET NX EX of a random identifier, polled every millisecond), the purchase under
  the lock as two MULTI pipelines (read the price and the funds; check; move the
  money and the item), and ``release_lock`` (WATCH the lock, GET, MULTI/DEL,
  retried on WatchError). The market-wide lock is named ``market:``; the per-item
  ("fine-grained") lock after the listing. Written here from the book's algorithm,
  on the market service's keys so the same invariant checks apply; the one
  addition is the check of the price the buyer saw, which every strategy makes.
  The per-item lock leaves a gap between the funds read and the write that no
  lock covers when one buyer buys two items at once: ``overdraw_race`` shows it.
- The floor: the leanest correct purchase, one script with the service script's
  checks (listed, price, funds, the item in exactly one place) and writes, minus
  the sale record in the outbox; called by SHA with nothing else around it.

Each purchase function returns True (bought), None (refused: sold, repriced,
no funds) or False (the lock was not had in time).
"""

import math
import time
import uuid
from typing import Any

import redis

from bench.semaphores import book_release_lock
from redisparts_app.services import market

LOCK_PREFIX = "lock:"  # the book's; release_lock (bench/semaphores.py) uses it too

FLOOR_SCRIPT = """
local listed = redis.call('zscore', KEYS[1], ARGV[1])
if not listed or tonumber(listed) ~= tonumber(ARGV[3]) then return 0 end
local price = tonumber(listed)
local funds = tonumber(redis.call('hget', KEYS[2], 'funds'))
if funds < price then return -2 end
if redis.call('sismember', KEYS[4], ARGV[2]) == 1 or redis.call('zscore', KEYS[1], ARGV[4])
then return -4 end
redis.call('hincrby', KEYS[2], 'funds', -price)
redis.call('hincrby', KEYS[3], 'funds', price)
redis.call('zrem', KEYS[1], ARGV[1])
redis.call('sadd', KEYS[4], ARGV[2])
return 1
"""


def acquire_lock_with_timeout(
    conn: redis.Redis, lockname: str, acquire_timeout: float = 10, lock_timeout: float = 10
) -> str | None:
    identifier = str(uuid.uuid4())
    lockname = LOCK_PREFIX + lockname
    lock_timeout = math.ceil(lock_timeout)
    end = time.time() + acquire_timeout
    while time.time() < end:
        if conn.set(lockname, identifier, ex=lock_timeout, nx=True):
            return identifier
        time.sleep(0.001)
    return None


def book_purchase(
    conn: redis.Redis, lockname: str, buyer: str, item: str, seller: str, price: int
) -> bool | None:
    """The book's purchase_item_with_lock, the lock named ``lockname``."""
    listings = market.listings_key()
    buyer_key = market.user_key(buyer)
    member = market.listing_member(item, seller)
    locked = acquire_lock_with_timeout(conn, lockname)
    if not locked:
        return False
    pipe = conn.pipeline(True)
    try:
        pipe.zscore(listings, member)
        pipe.hget(buyer_key, "funds")
        listed, funds = pipe.execute()
        if listed is None or int(listed) != price or price > int(funds):
            return None
        pipe.hincrby(market.user_key(seller), "funds", price)
        pipe.hincrby(buyer_key, "funds", -price)
        pipe.sadd(market.inventory_key(buyer), item)
        pipe.zrem(listings, member)
        pipe.execute()
        return True
    finally:
        book_release_lock(conn, lockname, locked)


def book_market_lock(conn: redis.Redis, buyer: str, item: str, seller: str, price: int) -> Any:
    return book_purchase(conn, "market:", buyer, item, seller, price)


def book_item_lock(conn: redis.Redis, buyer: str, item: str, seller: str, price: int) -> Any:
    return book_purchase(conn, market.listing_member(item, seller), buyer, item, seller, price)


class Floor:
    """The one-script purchase, its script loaded once and called by SHA."""

    def __init__(self, conn: redis.Redis) -> None:
        self.conn = conn
        self.sha = conn.script_load(FLOOR_SCRIPT)
        self.listings = market.listings_key()

    def __call__(self, buyer: str, item: str, seller: str, price: int) -> bool | None:
        code = self.conn.evalsha(
            self.sha,
            4,
            self.listings,
            market.user_key(buyer),
            market.user_key(seller),
            market.inventory_key(buyer),
            f"{item}:{seller}",
            item,
            price,
            f"{item}:{buyer}",
        )
        return True if code == 1 else None


PEERS = ("book_market_lock", "book_item_lock", "floor")


def purchaser(name: str, conn: redis.Redis) -> Any:
    """Return the purchase function of peer ``name`` on ``conn``."""
    if name == "floor":
        return Floor(conn)
    function = book_market_lock if name == "book_market_lock" else book_item_lock
    return lambda buyer, item, seller, price: function(conn, buyer, item, seller, price)
