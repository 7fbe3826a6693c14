"""A sale and its e-mail in one step: the purchase writes the sale record to the market's
outbox atomically for every strategy, whatever command the purchasing process dies at; the
relay moves records into the e-mail queue idempotently; the e-mail task sends once per sale;
an item is in exactly one place whatever the order of give/list/cancel/purchase calls."""

import contextlib
import os
import random
import signal
import time
import traceback

import pytest
import redis
from django.core import mail
from django.core.management import call_command
from django.test import override_settings

from marketplace import tasks as site_tasks
from marketplace.mailers import mail_settings
from marketplace.views.market import complete_purchase
from redisparts_app.connection import get_redis
from redisparts_app.exceptions import (
    InsufficientFunds,
    ItemAlreadyHeld,
    ItemListed,
    ItemNotHeld,
    ListingNotFound,
    PriceChanged,
)
from redisparts_app.services import market
from redisparts_app.services.tasks import TaskQueue
from tests.processes import run_in_processes

STRATEGIES = list(market.STRATEGIES)


def _state() -> tuple:
    """The facts a purchase of alice's sword by bob changes, read outside the outbox."""
    return (
        market.get_price("sword", "alice"),
        market.get_inventory("bob"),
        market.get_funds("alice"),
        market.get_funds("bob"),
    )


BEFORE = (300, [], 1000, 500)
AFTER = (None, ["sword"], 1300, 200)


def _shop(client) -> None:
    client.flushdb()
    market.create_user("alice", 1000)
    market.create_user("bob", 500)
    market.give_item("alice", "sword")
    market.list_item("alice", "sword", 300)


def _queued_sales() -> list[str]:
    """Sale ids of the sold e-mail tasks waiting in the e-mail queue."""
    return [info.kwargs.get("sale_id") for info in TaskQueue().peek("email", 0, 100)]


def _fork(body) -> int:
    """Run ``body()`` in a forked child; return its exit status (-9: SIGKILLed)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            body()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _kill_before_command(kill_at: int) -> None:
    """In this (child) process, SIGKILL itself just before sending its ``kill_at``-th packet.

    Every Redis command, pipeline and MULTI/EXEC block of the default client goes out in
    one packet, so iterating ``kill_at`` stops the process between every two of them.
    """
    pool = get_redis().connection_pool
    sent = 0

    class Killing(pool.connection_class):
        def send_packed_command(self, command, check_health=True):
            nonlocal sent
            sent += 1
            if sent == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            super().send_packed_command(command, check_health)

    pool.connection_class = Killing
    pool.reset()  # not disconnect(): that would shut the parent's sockets down


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_sigkill_between_any_two_commands_never_leaves_a_sale_without_its_one_email(
    db, redis_client, settings, strategy
):
    settings.REDISPARTS = {**settings.REDISPARTS, "MARKET_PURCHASE_STRATEGY": strategy}
    # One run first, so every script is loaded and each run sends the same commands.
    _shop(redis_client)
    complete_purchase("bob", "sword", "alice", 300)
    outcomes = []
    for kill_at in range(1, 200):
        _shop(redis_client)
        mail.outbox.clear()

        def buy(kill_at=kill_at):
            _kill_before_command(kill_at)
            complete_purchase("bob", "sword", "alice", 300)

        status = _fork(buy)
        assert status in (0, -signal.SIGKILL), f"the buyer failed at command {kill_at}"
        state = _state()
        assert state in (BEFORE, AFTER), f"half a purchase after a kill at command {kill_at}"
        records = market.pending_sales()
        queued = _queued_sales()
        if state == BEFORE:
            assert (records, queued) == ([], []), f"a record without a sale at {kill_at}"
        else:
            # The sale's record is in the outbox, the queue, or both (a relay killed
            # between its enqueue and its trim); all of one sale.
            sale_ids = {sale.sale_id for sale in records} | set(queued)
            assert len(sale_ids) == 1, (kill_at, records, queued)
            assert len(queued) <= 1, (kill_at, records, queued)
            assert site_tasks.relay_sold_emails() == len(records)
            assert market.count_pending_sales() == 0
            assert _queued_sales() == list(sale_ids)
            call_command("rp_worker", "email", "--burst", verbosity=0)
            assert len(mail.outbox) == 1
            assert mail.outbox[0].extra_headers["Message-ID"] == f"<{sale_ids.pop()}@marketplace>"
        outcomes.append(("killed" if status else "done", state == AFTER))
        if status == 0:
            break
    else:
        pytest.fail("the purchase never completed in 199 commands")
    # Both sides of the commit were hit: kills before it and kills after it.
    assert ("killed", False) in outcomes
    assert ("killed", True) in outcomes
    assert outcomes[-1] == ("done", True)
    # The sale commits at one command; every later command (the relay's enqueue and
    # trim, logging) is a kill point after it.
    assert outcomes.count(("killed", True)) >= 2


def test_relay_killed_between_enqueue_and_trim_enqueues_nothing_new(db, redis_client):
    _shop(redis_client)
    market.create_user("carol", 1000)
    market.give_item("alice", "shield")
    market.list_item("alice", "shield", 100)
    sales = [
        market.purchase("bob", "sword", "alice", 300).sale,
        market.purchase("carol", "shield", "alice", 100).sale,
    ]

    def deliver_then_die(sale):
        site_tasks.enqueue_sold_email(sale)
        os.kill(os.getpid(), signal.SIGKILL)

    assert _fork(lambda: market.relay_sales(deliver_then_die)) == -signal.SIGKILL
    assert market.count_pending_sales() == 2  # the first was enqueued, not trimmed
    assert _queued_sales() == [sales[0].sale_id]

    assert site_tasks.relay_sold_emails() == 2
    assert market.count_pending_sales() == 0
    assert _queued_sales() == [sale.sale_id for sale in sales]
    call_command("rp_worker", "email", "--burst", verbosity=0)
    assert sorted(m.extra_headers["Message-ID"] for m in mail.outbox) == sorted(
        f"<{sale.sale_id}@marketplace>" for sale in sales
    )
    # Relayed again after the task ran (a relay dying after the enqueue, replayed much
    # later): still one e-mail per sale.
    for sale in sales:
        market.relay_sale(sale, site_tasks.enqueue_sold_email)
    call_command("rp_worker", "email", "--burst", verbosity=0)
    assert len(mail.outbox) == 2


def _relay_all(_: int) -> int:
    relayed = 0
    while count := site_tasks.relay_sold_emails(7):
        relayed += count
    return relayed


def test_concurrent_relays_queue_each_sale_once(db, redis_client):
    market.create_user("seller", 0)
    market.create_user("buyer", 10**6)
    sold = []
    for n in range(60):
        market.give_item("seller", f"thing {n}")
        market.list_item("seller", f"thing {n}", 10)
        sold.append(market.purchase("buyer", f"thing {n}", "seller", 10).sale.sale_id)
    run_in_processes(_relay_all, [(n,) for n in range(3)])
    assert market.count_pending_sales() == 0
    assert sorted(_queued_sales()) == sorted(sold)


# --- sending once per sale --------------------------------------------------------------


class FailingBackend:
    """An e-mail backend whose server refuses every message."""

    def __init__(self, *args, **kwargs):
        pass

    def send_messages(self, messages):
        raise OSError("SMTP server unavailable")


SALE = {"seller": "alice", "item": "sword", "price": 300, "buyer": "bob", "sale_id": "s1"}


def test_sold_email_task_run_twice_sends_one_email_with_a_stable_message_id(db, redis_client):
    site_tasks.send_sold_email(**SALE)
    site_tasks.send_sold_email(**SALE)
    assert len(mail.outbox) == 1
    assert mail.outbox[0].extra_headers["Message-ID"] == "<s1@marketplace>"
    assert "bob bought your sword" in mail.outbox[0].body


def test_redelivered_sold_email_task_sends_one_email(db, redis_client):
    sale = market.Sale("s2", "alice", "bob", "sword", 300, time.time())
    # Two deliveries of the sale's task, as a redelivery after the de-duplication key
    # lapsed (or a worker killed after the send) would make them.
    site_tasks.enqueue_sold_email(sale)
    redis_client.delete(*redis_client.scan_iter(match="rp:queue:*dedup*"))
    site_tasks.send_sold_email.enqueue_with(
        kwargs={"seller": "alice", "item": "sword", "price": 300, "buyer": "bob", "sale_id": "s2"},
        on_commit=False,
    )
    call_command("rp_worker", "email", "--burst", verbosity=0)
    assert len(mail.outbox) == 1
    assert mail.outbox[0].extra_headers["Message-ID"] == "<s2@marketplace>"


def test_failed_send_leaves_the_sale_unsent_so_a_retry_sends_it(db, redis_client):
    failing = override_settings(**mail_settings("tests.demo.test_market_outbox.FailingBackend"))
    with failing, pytest.raises(OSError, match="SMTP server unavailable"):
        site_tasks.send_sold_email(**SALE)
    site_tasks.send_sold_email(**SALE)
    assert len(mail.outbox) == 1


def test_a_send_under_way_elsewhere_makes_the_task_retry_later(db, redis_client):
    token = market.begin_notice("s1", 30)
    with pytest.raises(site_tasks.SendInProgress):
        site_tasks.send_sold_email(**SALE)
    assert mail.outbox == []
    assert market.abandon_notice("s1", token)
    site_tasks.send_sold_email(**SALE)
    assert len(mail.outbox) == 1


def test_notice_markers_refuse_bad_input(redis_client):
    for bad in ("", "a:b", "x{y}"):
        with pytest.raises(ValueError, match="sale id"):
            market.begin_notice(bad, 30)
    for bad in (0, -1, True, "5"):
        with pytest.raises(ValueError, match="claim_ttl must be a positive number"):
            market.begin_notice("s1", bad)
        with pytest.raises(ValueError, match="keep must be a positive number"):
            market.finish_notice("s1", bad)
    assert redis_client.dbsize() == 0


def test_a_malformed_outbox_record_stops_the_relay_and_stays(redis_client):
    redis_client.zadd(market.outbox_key(), {b"not json": 1})
    with pytest.raises(ValueError, match="not a sale record"):
        market.relay_sales(site_tasks.enqueue_sold_email)
    assert market.count_pending_sales() == 1
    for bad in (0, 1001, True, "5"):
        with pytest.raises(ValueError, match="limit must be an integer"):
            market.relay_sales(site_tasks.enqueue_sold_email, bad)


# --- an item in exactly one place -------------------------------------------------------


@pytest.fixture
def shop(redis_client):
    _shop(redis_client)
    return redis_client


def test_giving_a_listed_name_again_is_refused_and_the_listing_keeps_its_price(shop):
    with pytest.raises(ItemListed, match="already listed"):
        market.give_item("alice", "sword")
    with pytest.raises(ItemListed):
        market.list_item("alice", "sword", 999)
    assert market.get_price("sword", "alice") == 300
    assert market.get_inventory("alice") == []
    market.purchase("bob", "sword", "alice", 300)  # the price the buyer saw still holds
    assert market.give_item("alice", "sword") is True  # a new one, now that hers is sold
    assert market.give_item("alice", "sword") is False  # already held: nothing written


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_buying_a_name_the_buyer_holds_or_lists_is_refused_and_changes_nothing(shop, strategy):
    market.give_item("bob", "sword")
    with pytest.raises(ItemAlreadyHeld, match="already holds or lists"):
        market.purchase("bob", "sword", "alice", 300, strategy=strategy)
    market.list_item("bob", "sword", 50)
    with pytest.raises(ItemAlreadyHeld):
        market.purchase("bob", "sword", "alice", 300, strategy=strategy)
    assert market.get_price("sword", "alice") == 300
    assert market.get_price("sword", "bob") == 50
    assert (market.get_funds("alice"), market.get_funds("bob")) == (1000, 500)
    assert market.count_pending_sales() == 0


USERS = ["u0", "u1", "u2", "u3"]
NAMES = ["axe", "bow", "cap", "dart", "egg"]  # few names: every kind of collision happens
START_FUNDS = 5000
LOG = "test:market:log"  # outside the market's keys: an independent record


def _trader(user: str, duration: float, seed: int) -> dict:
    rng = random.Random(seed)
    client = get_redis()
    counts = dict.fromkeys(("give", "list", "cancel", "buy", "refused"), 0)
    end = time.monotonic() + duration
    while time.monotonic() < end:
        action = rng.choice(("give", "list", "list", "cancel", "buy", "buy"))
        name = rng.choice(NAMES)
        try:
            if action == "give":
                if market.give_item(user, name):
                    client.rpush(LOG, f"give|{user}|{name}")
            elif action == "list":
                market.list_item(user, name, rng.randint(1, 300))
            elif action == "cancel":
                market.cancel_listing(user, name)
            else:
                page = [x for x in market.get_listings(0, 50) if x.seller != user]
                if not page:
                    continue
                pick = rng.choice(page)
                strategy = rng.choice(STRATEGIES)
                done = market.purchase(user, pick.item, pick.seller, pick.price, strategy=strategy)
                client.rpush(
                    LOG, f"buy|{user}|{pick.seller}|{pick.item}|{pick.price}|{done.sale.sale_id}"
                )
        except (
            ItemNotHeld,  # and ItemListed
            ListingNotFound,
            PriceChanged,
            InsufficientFunds,
            ItemAlreadyHeld,
        ):
            counts["refused"] += 1
            continue
        counts[action] += 1
    return counts


@pytest.mark.slow
def test_items_stay_in_exactly_one_place_under_concurrent_give_list_cancel_purchase(
    redis_client,
):
    for user in USERS:
        market.create_user(user, START_FUNDS)
    results = run_in_processes(
        _trader, [(user, 4.0, n) for n, user in enumerate(USERS)], timeout=60
    )
    # Purchases grow scarce: a buyer is refused a name it holds or lists, and with five
    # names the traders soon hold most of them. 10 to 34 go through in 4 s (18 when the
    # traders went on for 35 s), against thousands refused.
    assert sum(r["buy"] for r in results) >= 5
    assert sum(r["refused"] for r in results) > 10

    log = [entry.decode().split("|") for entry in redis_client.lrange(LOG, 0, -1)]
    given = [entry for entry in log if entry[0] == "give"]
    bought = [entry for entry in log if entry[0] == "buy"]
    # Each user has a name at most once, in their inventory or on the market, never both.
    places: dict[tuple[str, str], list[str]] = {}
    for user in USERS:
        for item in market.get_inventory(user):
            places.setdefault((user, item), []).append("inventory")
    for listing in market.get_listings(0, market.MAX_PAGE):
        places.setdefault((listing.seller, listing.item), []).append("market")
    assert {key: where for key, where in places.items() if len(where) != 1} == {}
    # No item was made or destroyed: as many as were given.
    assert len(places) == len(given)
    # Money is conserved and every balance is explained by the logged sales.
    expected = dict.fromkeys(USERS, START_FUNDS)
    for _, buyer, seller, _, price, _ in bought:
        expected[buyer] -= int(price)
        expected[seller] += int(price)
    assert {user: market.get_funds(user) for user in USERS} == expected
    # Every sale, and only those, has its record in the outbox.
    assert sorted(sale.sale_id for sale in market.pending_sales(market.MAX_PAGE)) == sorted(
        entry[5] for entry in bought
    )
    with contextlib.suppress(redis.ResponseError):
        redis_client.delete(LOG)


def _buy_everything(seed: int) -> None:  # pragma: no cover - a child killed at random
    rng = random.Random(seed)
    while listings := market.get_listings(0, 20):
        pick = rng.choice(listings)
        with contextlib.suppress(ListingNotFound):
            complete_purchase("bob", pick.item, pick.seller, pick.price)
        # Also relay what earlier killed runs left, as market_relay would.
        for sale in market.pending_sales(5):
            market.relay_sale(sale, site_tasks.enqueue_sold_email)


@pytest.mark.slow
def test_purchases_killed_at_random_moments_leave_every_sale_with_exactly_one_email_task(
    db, redis_client, settings
):
    market.create_user("alice", 0)
    market.create_user("bob", 10**9)
    items = [f"thing {n}" for n in range(1500)]
    for item in items:
        market.give_item("alice", item)
        market.list_item("alice", item, 7)
    rng = random.Random(1)
    kills = 0
    for round_ in range(40):
        strategy = STRATEGIES[round_ % len(STRATEGIES)]
        settings.REDISPARTS = {**settings.REDISPARTS, "MARKET_PURCHASE_STRATEGY": strategy}
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                _buy_everything(round_)
            finally:
                os._exit(0)
        time.sleep(rng.uniform(0.001, 0.02))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        kills += 1
    sold = set(market.get_inventory("bob"))
    assert 0 < len(sold) < len(items)  # the kills landed mid-run
    # Independently of the outbox: money moved for exactly the items that moved.
    assert market.get_funds("alice") == 7 * len(sold)
    listed = {x.item for x in market.get_listings(0, 1000)}
    listed |= {x.item for x in market.get_listings(1000, 1000)}
    assert listed == set(items) - sold
    site_tasks.relay_all_sold_emails()
    assert market.count_pending_sales() == 0
    queued = TaskQueue().peek("email", 0, 1000)
    assert sorted(info.kwargs["item"] for info in queued) == sorted(sold)
    assert len({info.kwargs["sale_id"] for info in queued}) == len(sold)
    assert kills == 40


@pytest.mark.cluster
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_outbox_relay_and_notice_markers_work_on_both_backends(db, redis_client, strategy):
    _shop(redis_client)
    sale = market.purchase("bob", "sword", "alice", 300, strategy=strategy).sale
    assert market.pending_sales() == [sale]
    assert site_tasks.relay_all_sold_emails() == 1
    assert market.relay_sale(sale, site_tasks.enqueue_sold_email) is False  # already relayed
    assert [info.kwargs["sale_id"] for info in TaskQueue().peek("email")] == [sale.sale_id]
    token = market.begin_notice(sale.sale_id, 30)
    assert market.begin_notice(sale.sale_id, 30) == "busy"
    market.finish_notice(sale.sale_id, 60)
    assert market.begin_notice(sale.sale_id, 30) == "sent"
    assert market.abandon_notice(sale.sale_id, token) is False
