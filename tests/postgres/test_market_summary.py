"""The demo's fenced write on PostgreSQL: two processes refresh the market summary, the
first stalls past its lock's TTL while the second copies newer figures; the first's
late copy is refused."""

import pytest
from django.db import connections

from marketplace import summary
from marketplace.models import MarketSummary
from redisparts_app.services import market
from redisparts_app.services.locks import held_locks
from tests.processes import run_in_processes
from tests.tasks_helpers import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

STALE_LISTINGS = 999


def stalled_refresh() -> bool:
    """Refresh with a short TTL, reading the figures only after a newer copy is written."""

    def slow_count(**kwargs) -> int:
        written = MarketSummary.objects.filter(name=summary.SUMMARY, fence__gt=0)
        assert wait_until(written.exists, timeout=20)
        return STALE_LISTINGS

    market.count_listings = slow_count  # this forked process only
    return summary.refresh_market_summary(ttl=0.3, wait=5)


def later_refresh() -> bool:
    """Refresh once the stalled process holds the lock (taken after its TTL ran out)."""
    assert wait_until(
        lambda: any(held.name == summary.LOCK_NAME for held in held_locks()), timeout=20
    )
    return summary.refresh_market_summary(wait=10)


def call(function):
    return function()


def test_a_stalled_refresh_cannot_overwrite_a_newer_copy(redis_client):
    market.create_user("ann", 0)
    for item in ("sword", "bow"):
        market.give_item("ann", item)
        market.list_item("ann", item, 100)
    connections.close_all()  # the forked refreshers open connections of their own
    stalled, later = run_in_processes(call, [(stalled_refresh,), (later_refresh,)])
    assert (stalled, later) == (False, True)
    row = MarketSummary.objects.get(name=summary.SUMMARY)
    assert (row.listings, row.pending_sales, row.fence) == (2, 0, 2)
    # The next refresh gets a later token and is written.
    assert summary.refresh_market_summary() is True
    row.refresh_from_db()
    assert row.fence == 3
