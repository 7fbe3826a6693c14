"""fenced_update on PostgreSQL under real concurrency: processes take a real lock on the
session's redis-server, some pause past its TTL and lose it, and all write one row.

Checked apart from fenced_update's own answers: every accepted write also inserts a
FencedWrite row in its transaction, whose ids give the commit order of the accepted writes.
"""

import time

import pytest
from django.db import connections, transaction

from redisparts_app.exceptions import LockNotOwned
from redisparts_app.services.locks import Lock, fenced_update
from tests.fencing.models import FencedRecord, FencedWrite
from tests.processes import run_in_processes

pytestmark = pytest.mark.django_db(transaction=True)

HOLDERS = 4
ROUNDS = 6
TTL = 0.3  # seconds


def hold_and_write(writer: int, pk: int) -> list[dict]:
    """Take the lock ROUNDS times and write the row with the fence each time; every other
    round pause twice the TTL first, so another holder takes the lock meanwhile."""
    outcomes = []
    for round_ in range(ROUNDS):
        lock = Lock("pg-stock", ttl=TTL, timeout=30)
        fence = lock.acquire()
        if (writer + round_) % 2:
            time.sleep(2 * TTL)  # a stalled holder: GC, swap, a slow network
        with transaction.atomic():
            accepted = fenced_update(FencedRecord, pk, fence, value=fence)
            if accepted:
                FencedWrite.objects.create(fence=fence, writer=writer)
        try:
            lock.release()
            kept = True
        except LockNotOwned:
            kept = False
        outcomes.append({"fence": fence, "accepted": accepted, "kept": kept})
    return outcomes


def test_a_stale_holders_write_is_rejected_and_no_lower_token_overwrites_a_higher_one(
    redis_client,
):
    record = FencedRecord.objects.create(name="pg-stock", value=0)
    connections.close_all()  # the forked holders open connections of their own
    results = run_in_processes(hold_and_write, [(writer, record.pk) for writer in range(HOLDERS)])
    outcomes = [outcome for per_writer in results for outcome in per_writer]
    fences = [outcome["fence"] for outcome in outcomes]
    assert len(set(fences)) == len(fences) == HOLDERS * ROUNDS  # one token per holding

    # The row holds the write of the highest token ever handed out.
    record.refresh_from_db()
    assert record.fence == record.value == max(fences)

    # Accepted writes committed in increasing token order: none went below an earlier one.
    committed = list(FencedWrite.objects.order_by("id").values_list("fence", flat=True))
    assert committed == sorted(committed)
    assert len(set(committed)) == len(committed)
    assert set(committed) == {o["fence"] for o in outcomes if o["accepted"]}

    # Stale holders existed and were refused; a holder that kept its lock never was.
    rejected = [o for o in outcomes if not o["accepted"]]
    assert rejected
    assert all(not o["kept"] for o in rejected)
    assert all(o["fence"] < record.fence for o in rejected)


def test_the_database_is_the_suites_own_postgresql(postgres_server):
    connection = connections["default"]
    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        (data_directory,) = cursor.fetchone()
    assert data_directory.startswith(str(postgres_server.socket_dir))
