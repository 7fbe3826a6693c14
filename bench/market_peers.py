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
  the sale record in the outbox; called by SHA with nothing else around it. And the
  floor with the sale record: the same plus the outbox ZADD of the record (the
  service's guarantee that no sale is without its record), to show that cost.

Each purchase function returns True (bought), None (refused: sold, repriced,
no funds) or False (the lock was not had in time).
"""

import math
import os
import time
import uuid
from json.encoder import encode_basestring
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
if KEYS[5] then redis.call('zadd', KEYS[5], ARGV[6], ARGV[5]) end
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
    """The one-script purchase, its script loaded once and called by SHA; with
    ``record``, it also writes the sale record to the outbox."""

    def __init__(self, conn: redis.Redis, record: bool = False) -> None:
        self.conn = conn
        self.sha = conn.script_load(FLOOR_SCRIPT)
        self.listings = market.listings_key()
        self.outbox = market.outbox_key() if record else None

    def __call__(self, buyer: str, item: str, seller: str, price: int) -> bool | None:
        keys = [
            self.listings,
            market.user_key(buyer),
            market.user_key(seller),
            market.inventory_key(buyer),
        ]
        args: list[Any] = [f"{item}:{seller}", item, price, f"{item}:{buyer}"]
        if self.outbox is not None:
            sold_at = time.time()
            record = (
                f'{{"buyer":{encode_basestring(buyer)},"item":{encode_basestring(item)},'
                f'"price":{price},"sale":"{os.urandom(16).hex()}",'
                f'"seller":{encode_basestring(seller)},"time":{sold_at!r}}}'
            )
            keys.append(self.outbox)
            args += [record, int(sold_at * 1000)]
        code = self.conn.evalsha(self.sha, len(keys), *keys, *args)
        return True if code == 1 else None


PEERS = ("book_market_lock", "book_item_lock", "floor", "floor_record")


def purchaser(name: str, conn: redis.Redis) -> Any:
    """Return the purchase function of peer ``name`` on ``conn``."""
    if name in ("floor", "floor_record"):
        return Floor(conn, record=name == "floor_record")
    function = book_market_lock if name == "book_market_lock" else book_item_lock
    return lambda buyer, item, seller, price: function(conn, buyer, item, seller, price)
