"""The demo's sold e-mails while purchases flow and the e-mail worker is SIGKILLed over and
over: every sale gets its e-mail (0 lost) and a repeat only inside the documented bound (a
kill after the mail left and before its "sent" marker: one more copy, same Message-ID).

The e-mails are counted in the files Django's file backend writes, outside Redis."""

import contextlib
import os
import random
import re
import signal
import time
from collections import Counter

import pytest

from marketplace import tasks as site_tasks
from marketplace.mailers import FILE_BACKEND, mail_settings
from marketplace.views.market import complete_purchase
from redisparts_app.exceptions import MarketError
from redisparts_app.services import market
from redisparts_app.services.tasks import TaskQueue, Worker
from tests.processes import CONTEXT
from tests.tasks_helpers import stop, wait_beating, wait_until

pytestmark = pytest.mark.slow

KILLS = 30
ITEMS = 1000
PRICE = 7


def _buy_and_relay(seed: int) -> None:  # pragma: no cover - a child stopped by SIGTERM
    """Buy a random listing every few milliseconds, as the site's buy button does."""
    rng = random.Random(seed)
    while listings := market.get_listings(0, 20):
        pick = rng.choice(listings)
        with contextlib.suppress(MarketError):  # sold meanwhile
            complete_purchase("bob", pick.item, pick.seller, pick.price)
        time.sleep(rng.uniform(0.005, 0.03))


def _work() -> None:  # pragma: no cover - a child killed at random
    Worker(["email"], block=0.2, maintenance_interval=0.2).run()


def _emails(folder) -> Counter:
    """Message-IDs of the e-mails the file backend wrote, counted."""
    found: Counter = Counter()
    for path in folder.iterdir():
        found.update(re.findall(r"^Message-ID: (<[^>]+>)$", path.read_text(), re.MULTILINE))
    return found


def test_sold_emails_survive_an_email_worker_killed_30_times_while_purchases_flow(
    db, redis_client, settings, tmp_path, monkeypatch
):
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    for name, value in mail_settings(FILE_BACKEND, file_path=outbox).items():
        setattr(settings, name, value)
    settings.REDISPARTS = {
        **settings.REDISPARTS,
        "QUEUE_RETRY_DELAY": 0.1,
        "QUEUE_RETRY_MAX_DELAY": 0.5,
        "QUEUE_WORKER_TIMEOUT": 1,
        "QUEUE_MAX_DELIVERIES": 1000,  # random kills may hit one task several times
    }
    # A run killed while sending holds its claim this long before a redelivery sends.
    monkeypatch.setattr(site_tasks, "NOTICE_CLAIM_TTL", 1.0)
    market.create_user("alice", 0)
    market.create_user("bob", 10**9)
    for n in range(ITEMS):
        market.give_item("alice", f"thing {n}")
        market.list_item("alice", f"thing {n}", PRICE)

    buyer = CONTEXT.Process(target=_buy_and_relay, args=(1,), daemon=True)
    buyer.start()
    rng = random.Random(2)
    try:
        for _ in range(KILLS):
            worker = CONTEXT.Process(target=_work, daemon=True)
            worker.start()
            time.sleep(rng.uniform(0.05, 0.3))
            os.kill(worker.pid, signal.SIGKILL)
            worker.join()
            assert worker.exitcode == -signal.SIGKILL
    finally:
        stop(buyer)
    sold = set(market.get_inventory("bob"))
    assert 0 < len(sold) < ITEMS  # purchases flowed through the kills

    site_tasks.relay_all_sold_emails()  # what a purchase stopped mid-relay left
    queue = TaskQueue()
    healthy = CONTEXT.Process(target=_work, daemon=True)
    healthy.start()
    try:
        wait_beating(healthy)  # the queue may be settled already: stop only a started worker

        def settled() -> bool:
            counts = queue.counts()
            return counts["queues"].get("email", 0) == counts["inflight"] == counts["delayed"] == 0

        assert wait_until(settled, timeout=60)
    finally:
        assert stop(healthy) == 0
    counts = queue.counts()
    assert counts["failed"] == counts["quarantine"] == 0

    emails = _emails(outbox)
    subjects = Counter()
    for path in outbox.iterdir():
        subjects.update(re.findall(r"^Subject: Your (.+) sold for ", path.read_text(), re.M))
    # Independently of Redis: one e-mail (at least) for exactly the items bob holds.
    assert set(subjects) == sold
    assert len(emails) == len(sold)  # one Message-ID per sale
    repeats = sum(emails.values()) - len(emails)
    assert repeats <= KILLS  # at most one more copy per kill, with the same Message-ID
    print(f"{len(sold)} sales, {KILLS} kills, {repeats} repeated e-mails")
