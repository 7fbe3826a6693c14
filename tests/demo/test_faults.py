"""Redis crashes (SIGKILL) and restarts from its AOF (``appendfsync always``) in the middle of
queue, chat and market workloads run by separate processes. Whatever a client was told
succeeded is still there afterwards, exactly once; the invariants hold; while Redis is down
the site answers its 503 page, and the worker and the scheduler back off, log it, and resume
by themselves."""

import json
import random
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from redisparts_app.exceptions import ListingNotFound, MarketError
from redisparts_app.services import chat, market
from redisparts_app.services.tasks import TaskQueue
from redisparts_app.testing import RedisServer, wait_until
from tests.demo.faults import (
    OUTAGE,
    backoff_delays,
    retry_through_outage,
    start_command,
    stop_command,
    until_stopped,
)
from tests.fault_tasks import record_run, runs
from tests.processes import CONTEXT, run_in_processes

AOF_ALWAYS = ["--appendonly", "yes", "--appendfsync", "always"]


@pytest.fixture
def aof_server(tmp_path):
    server = RedisServer(tmp_path / "redis", args=AOF_ALWAYS).start()
    connection = {
        "URL": server.url,
        "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 5},
    }
    try:
        with override_settings(REDISPARTS={"CONNECTIONS": {"default": connection}}):
            yield server
    finally:
        server.stop()


@pytest.fixture
def site(client, db):
    """The demo site (Django test client) signed in, on the crashing server."""
    client.force_login(User.objects.create_user("visitor"))
    return client


def crash_and_restart(server: RedisServer, site, page: str, *, while_down=None) -> None:
    """SIGKILL ``server``, check the site's 503 page meanwhile, then restart it from its AOF."""
    server.kill()
    response = site.get(page)
    assert response.status_code == 503
    assert response["Retry-After"]
    assert "right back" in response.content.decode()
    if while_down is not None:
        while_down()
    server.start()  # same port and folder: it loads the AOF
    wait_until(lambda: site.get(page).status_code == 200, 60, f"{page} answering 200 again")


def run_workload(target, args_list):
    """Start ``run_in_processes`` in a thread; return its future."""
    pool = ThreadPoolExecutor(1)
    future = pool.submit(run_in_processes, target, args_list, 600)
    pool.shutdown(wait=False)
    return future


# --- queue ---------------------------------------------------------------------------------


def enqueue_workload(stop, runs_path: str, name: str) -> list[str]:
    def attempt(n: int) -> str:
        args = [runs_path, f"{name}-{n}"]
        if n % 5 == 0:  # some go through the delayed set, so the scheduler has work
            return record_run.enqueue_in(0.5, *args)
        return record_run.enqueue(*args)

    done = until_stopped(stop, attempt)
    return [f"{name}-{n}" for n, _task_id in done["acknowledged"]]


def queue_is_idle() -> bool:
    counts = TaskQueue().counts()
    return not any(counts["queues"].values()) and counts["inflight"] == counts["delayed"] == 0


@pytest.mark.slow
def test_queue_workload_survives_a_redis_crash(aof_server, site, tmp_path, record_property):
    runs_path = str(tmp_path / "runs.txt")
    env = {"REDIS_URL": aof_server.url}
    worker_log, scheduler_log = tmp_path / "worker.log", tmp_path / "scheduler.log"
    worker = start_command(
        ["rp_worker", "default", "--lease", "5", "--import", "tests.fault_tasks"],
        env,
        worker_log,
    )
    scheduler = start_command(["rp_scheduler"], env, scheduler_log)
    stop = CONTEXT.Event()
    try:
        enqueuers = run_workload(enqueue_workload, [(stop, runs_path, f"e{i}") for i in range(2)])
        wait_until(lambda: len(runs(runs_path)) >= 200, 120, "200 tasks run")

        def backing_off() -> None:
            # Both keep waiting longer between attempts (0.5 s, 1 s, 2 s, ...) and stay up.
            wait_until(lambda: max(backoff_delays(worker_log), default=0) >= 2, 60, "backoff")
            wait_until(lambda: max(backoff_delays(scheduler_log), default=0) >= 2, 60, "backoff")
            assert worker.poll() is None
            assert scheduler.poll() is None

        crash_and_restart(aof_server, site, "/market/", while_down=backing_off)
        restarted_at = len(runs(runs_path))
        wait_until(lambda: len(runs(runs_path)) >= restarted_at + 200, 180, "200 more tasks run")
        stop.set()
        acknowledged = {token for tokens in enqueuers.result(120) for token in tokens}
        wait_until(queue_is_idle, 180, "the queue drained")
        assert worker.poll() is None
        assert scheduler.poll() is None
    finally:
        stop.set()
        statuses = stop_command(worker), stop_command(scheduler)
    assert statuses == (0, 0), worker_log.read_text() + scheduler_log.read_text()

    ran = runs(runs_path)
    for log in (worker_log, scheduler_log):
        delays = backoff_delays(log)
        assert delays[:3] == [0.5, 1.0, 2.0], log.read_text()
        assert max(delays) <= 30
    lost = acknowledged - set(ran)
    report = {"acknowledged": len(acknowledged), "ran": len(set(ran)),
              "ran_twice_or_more": len(ran) - len(set(ran)), "lost": len(lost)}  # fmt: skip
    record_property("queue_crash", report)
    print("queue crash:", json.dumps(report))
    assert lost == set(), f"{len(lost)} acknowledged task(s) never ran: {sorted(lost)[:10]}"


# --- chat ----------------------------------------------------------------------------------

CHAT_SENDERS = ("ann", "bob")
CHAT_READERS = ("cat", "dan")


def send_workload(stop, chat_id: str, sender: str) -> list[tuple[int, str]]:
    def attempt(n: int) -> int:
        return chat.send_message(chat_id, sender, f"{sender}-{n}")

    done = until_stopped(stop, attempt)
    return [(message_id, f"{sender}-{n}") for n, message_id in done["acknowledged"]]


def read_workload(stop, chat_id: str, reader: str) -> dict:
    """Fetch pending messages until ``stop``, then once more; account for lost replies.

    A fetch that meets the crash may have run (moving the reader's position) with its
    reply lost: those messages are not delivered again. Each such gap is measured from
    the position the server kept, so the test can tell it from a real loss.
    """
    received: list[tuple[int, str]] = []
    gaps: list[tuple[int, int]] = []

    def fetch() -> None:
        for _chat, messages in chat.fetch_pending_messages(reader):
            received.extend((message.id, message.text) for message in messages)

    while True:
        last_round = stop.is_set()
        try:
            fetch()
        except OUTAGE:
            before = received[-1][0] if received else 0  # members start at position 0
            after = retry_through_outage(lambda: chat.chat_members(chat_id)[reader])
            if after > before:
                gaps.append((before, after))
            continue
        if last_round:
            return {"received": received, "gaps": gaps}


@pytest.mark.slow
def test_chat_workload_survives_a_redis_crash(aof_server, site, record_property):
    chat_id = chat.create_chat(CHAT_SENDERS[0], [*CHAT_SENDERS[1:], *CHAT_READERS], "hello")
    stop_sending, stop_reading = CONTEXT.Event(), CONTEXT.Event()
    senders = run_workload(send_workload, [(stop_sending, chat_id, s) for s in CHAT_SENDERS])
    readers = run_workload(read_workload, [(stop_reading, chat_id, r) for r in CHAT_READERS])
    try:
        ids = aof_server.client()
        counter = chat.chat_keys(chat_id)["ids"]
        wait_until(lambda: int(ids.get(counter) or 0) >= 300, 120, "300 messages sent")
        crash_and_restart(aof_server, site, "/chat/")
        ids = aof_server.client()
        resumed = int(ids.get(counter))
        wait_until(lambda: int(ids.get(counter)) >= resumed + 300, 120, "300 more messages")
    finally:
        stop_sending.set()
        sent = [message for messages in senders.result(120) for message in messages]
        stop_reading.set()
        fetched = readers.result(120)

    acknowledged = dict(sent)  # id -> text
    assert len(acknowledged) == len(sent)  # every acknowledged send got its own id
    report = {"acknowledged": len(sent)}
    for reader, result in zip(CHAT_READERS, fetched, strict=True):
        got = result["received"]
        got_ids = [message_id for message_id, _ in got]
        # Once and in order: ids strictly increase, texts never repeat.
        assert got_ids == sorted(set(got_ids)), f"{reader} got messages twice or out of order"
        assert len({text for _, text in got}) == len(got)
        assert all(acknowledged.get(i, text) == text for i, text in got)
        in_gaps = {i for before, after in result["gaps"] for i in range(before + 1, after + 1)}
        missing = set(acknowledged) - set(got_ids)
        assert missing <= in_gaps, f"{reader} never got {sorted(missing - in_gaps)[:10]}"
        report[reader] = {"received": len(got), "lost_with_a_lost_reply": len(missing)}
    record_property("chat_crash", report)
    print("chat crash:", json.dumps(report))


# --- market --------------------------------------------------------------------------------

SELLERS = [f"seller{n}" for n in range(4)]
BUYERS = [f"buyer{n}" for n in range(3)]
ITEMS_PER_SELLER = 300
FUNDS = 10**6
STRATEGIES = ("lua", "watch", "item_lock", "market_lock")


def price_of(item: str) -> int:
    return 100 + int(item.rsplit("-", 1)[1]) % 900


def buy_workload(stop, buyer: str) -> list[tuple[str, str]]:
    rng = random.Random(buyer)

    def attempt(n: int) -> tuple[str, str]:
        listings = market.get_listings(rng.randrange(50), 1)
        if not listings:
            raise ListingNotFound(buyer, "any")
        listing = listings[0]
        strategy = STRATEGIES[n % len(STRATEGIES)]
        market.purchase(buyer, listing.item, listing.seller, listing.price, strategy=strategy)
        return listing.item, listing.seller

    done = until_stopped(stop, attempt, refusals=(MarketError,), pause=0.01)
    return [bought for _n, bought in done["acknowledged"]]


def list_workload(stop, seller: str) -> list[str]:
    unlisted = [f"{seller}-{n}" for n in range(ITEMS_PER_SELLER // 2, ITEMS_PER_SELLER)]

    def attempt(n: int) -> str:
        item = unlisted[n % len(unlisted)]
        market.list_item(seller, item, price_of(item))
        return item

    # Listing an item twice is refused (ItemNotHeld): no item is ever listed twice.
    done = until_stopped(stop, attempt, refusals=(MarketError,), pause=0.02)
    return [item for _n, item in done["acknowledged"]]


def setup_market() -> None:
    for buyer in BUYERS:
        market.create_user(buyer, FUNDS)
    for seller in SELLERS:
        market.create_user(seller, FUNDS)
        for n in range(ITEMS_PER_SELLER):
            item = f"{seller}-{n}"
            market.give_item(seller, item)
            if n < ITEMS_PER_SELLER // 2:
                market.list_item(seller, item, price_of(item))


@pytest.mark.slow
def test_market_workload_survives_a_redis_crash(aof_server, site, record_property):
    setup_market()
    stop = CONTEXT.Event()
    buyers = run_workload(buy_workload, [(stop, buyer) for buyer in BUYERS])
    listers = run_workload(list_workload, [(stop, seller) for seller in SELLERS[:2]])
    client = aof_server.client()

    def sold() -> int:
        return sum(client.scard(market.inventory_key(buyer)) for buyer in BUYERS)

    try:
        wait_until(lambda: sold() >= 100, 120, "100 purchases")
        crash_and_restart(aof_server, site, "/market/")
        client = aof_server.client()
        resumed = sold()
        wait_until(lambda: sold() >= resumed + 100, 120, "100 more purchases")
    finally:
        stop.set()
        bought = dict(zip(BUYERS, buyers.result(120), strict=True))
        listed = {item for items in listers.result(120) for item in items}

    inventories = {
        user: set(market.get_inventory(user, client=client)) for user in [*SELLERS, *BUYERS]
    }
    on_market = {(listing.item, listing.seller)
                 for listing in market.get_listings(0, 1000, client=client)}  # fmt: skip
    every_item = {f"{seller}-{n}" for seller in SELLERS for n in range(ITEMS_PER_SELLER)}
    places = [item for items in inventories.values() for item in items]
    places += [item for item, _ in on_market]
    # No item lost, duplicated or sold twice: each is in exactly one place.
    assert sorted(places) == sorted(every_item)
    # Every acknowledged purchase and listing took effect (a buyer never sells).
    for buyer, pairs in bought.items():
        assert {item for item, _seller in pairs} <= inventories[buyer]
    assert not listed & (inventories[SELLERS[0]] | inventories[SELLERS[1]])
    # Money is conserved, and each account is exactly its starting funds plus what it sold
    # minus what it bought: no half-done purchase.
    funds = {user: market.get_funds(user, client=client) for user in [*SELLERS, *BUYERS]}
    assert sum(funds.values()) == FUNDS * (len(SELLERS) + len(BUYERS))
    for buyer in BUYERS:
        assert funds[buyer] == FUNDS - sum(price_of(item) for item in inventories[buyer])
    bought_items = {item for buyer in BUYERS for item in inventories[buyer]}
    for seller in SELLERS:
        income = sum(price_of(item) for item in bought_items if item.startswith(f"{seller}-"))
        assert funds[seller] == FUNDS + income
    report = {"acknowledged_purchases": sum(map(len, bought.values())), "sold": len(bought_items),
              "acknowledged_listings": len(listed)}  # fmt: skip
    record_property("market_crash", report)
    print("market crash:", json.dumps(report))
