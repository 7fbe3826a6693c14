"""The market's figures (listings, sales waiting for their e-mail) copied from Redis into
the database, for reports that read SQL; the Stats page shows the copy.

Several processes may refresh it (``manage.py demo`` does every SUMMARY_INTERVAL seconds,
and so would each of several runners in production). One at a time holds the
``market-summary`` lock, and the row keeps the fencing token of the copy that wrote it:
a refresher paused past its lock's TTL (a slow read, a stalled process) cannot overwrite
a newer copy with its older figures, since its write carries a lower token and the
database refuses it.
"""

from contextlib import suppress

from django.utils import timezone

from redisparts_app.exceptions import LockNotOwned
from redisparts_app.services import market
from redisparts_app.services.locks import Lock

from .models import MarketSummary

SUMMARY = "market"
LOCK_NAME = "market-summary"
# Seconds a refresher may hold the lock; reading two counters takes milliseconds.
LOCK_TTL = 10.0
# Seconds between two refreshes by the demo's runner.
SUMMARY_INTERVAL = 10.0


def refresh_market_summary(*, ttl: float = LOCK_TTL, wait: float = 1.0) -> bool:
    """Copy the market's figures into the MarketSummary row; return whether they were written.

    False when a refresher with a later token wrote first. LockTimeout when another
    refresher held the lock for ``wait`` seconds.
    """
    lock = Lock(LOCK_NAME, ttl=ttl, timeout=wait)
    fence = lock.acquire()
    try:
        row, _ = MarketSummary.objects.get_or_create(name=SUMMARY)
        figures = {
            "listings": market.count_listings(),
            "pending_sales": market.count_pending_sales(),
            "taken_at": timezone.now(),
        }
        return MarketSummary.objects.fenced_update(row.pk, fence, **figures)
    finally:
        # Expired meanwhile (LockNotOwned): the fence has already decided the write.
        with suppress(LockNotOwned):
            lock.release()
