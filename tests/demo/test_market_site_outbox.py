"""The demo's buy page once the purchase committed: a Redis failure after it (relay, the
permit's release) is logged and the buyer sees the success; ``market_relay`` later sends the
seller's e-mail from the outbox. Also the relay command's input and the demo's wiring."""

import importlib

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.core import mail
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from marketplace import tasks as site_tasks
from marketplace.demo_data import load
from marketplace.management.commands.demo import Command as DemoCommand
from redisparts_app.services import market
from redisparts_app.services.tasks import TaskQueue

# The module, not the view of the same name that marketplace.views exports.
market_views = importlib.import_module("marketplace.views.market")

SITE = {
    "MAX_CONCURRENT_OPERATIONS": 2,
    "OPERATION_TIMEOUT": 10,
    "PAGE_SIZE": 3,
    "WORKER_QUEUES": ["email", "default"],
}


@pytest.fixture
def site_redis(redis_server_factory, settings):
    """The site on a server of its own, with an append-only file so it can restart."""
    server = redis_server_factory(args=["--appendonly", "yes", "--appendfsync", "always"])
    settings.REDISPARTS = {**settings.REDISPARTS, "CONNECTIONS": {"default": server.url}}
    with override_settings(MARKETPLACE=SITE):
        yield server


def _messages(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_redis_dying_right_after_the_purchase_still_answers_the_buyer_with_success(
    client, db, site_redis, monkeypatch, caplog
):
    load()
    client.force_login(User.objects.get(username="bob"))
    real_purchase = market.purchase

    def purchase_then_redis_dies(*args, **kwargs):
        done = real_purchase(*args, **kwargs)
        site_redis.stop()  # the relay and the permit's release now fail
        return done

    monkeypatch.setattr(market, "purchase", purchase_then_redis_dies)
    response = client.post("/market/buy/", {"seller": "alice", "item": "Lantern", "price": "1250"})
    assert response.status_code == 302
    assert response["Location"] == "/market/"
    assert _messages(response) == [
        "You bought Lantern from alice for 12.50. alice gets an e-mail about the sale."
    ]
    assert "relaying its e-mail failed" in caplog.text

    # Back up: the sale and its e-mail record were written together and survived.
    site_redis.start()
    monkeypatch.undo()
    assert market.get_funds("bob") == 30_000 - 1_250
    assert "Lantern" in market.get_inventory("bob")
    [sale] = market.pending_sales()
    assert (sale.seller, sale.buyer, sale.item, sale.price) == ("alice", "bob", "Lantern", 1250)
    call_command("market_relay", "--once", verbosity=0)
    assert market.count_pending_sales() == 0
    call_command("rp_worker", "email", "--burst", verbosity=0)
    assert len(mail.outbox) == 1
    assert mail.outbox[0].extra_headers["Message-ID"] == f"<{sale.sale_id}@marketplace>"


def test_a_relay_failure_alone_is_logged_and_the_buyer_sees_success(
    client, db, site_redis, redis_server_factory, monkeypatch, caplog
):
    load()
    client.force_login(User.objects.get(username="bob"))
    dead = redis_server_factory()
    dead.stop()
    # The relay's queue is on a stopped server; the market's server is up.
    monkeypatch.setattr(
        market_views,
        "enqueue_sold_email",
        lambda sale: site_tasks.enqueue_sold_email(sale, client=dead.client()),
    )
    response = client.post("/market/buy/", {"seller": "alice", "item": "Lantern", "price": "1250"})
    assert response.status_code == 302
    assert _messages(response)[0].startswith("You bought Lantern from alice")
    assert "relaying its e-mail failed" in caplog.text
    assert market.count_pending_sales() == 1
    call_command("market_relay", "--once", verbosity=0)
    assert market.count_pending_sales() == 0
    assert TaskQueue().length("email") == 1


def test_a_purchase_relays_its_email_at_once(client, db, site_redis):
    load()
    client.force_login(User.objects.get(username="bob"))
    client.post("/market/buy/", {"seller": "alice", "item": "Lantern", "price": "1250"})
    assert market.count_pending_sales() == 0
    [info] = TaskQueue().peek("email")
    assert info.id.startswith("sale-")
    assert info.kwargs["item"] == "Lantern"


@pytest.mark.parametrize(
    "argv", [["--interval", "0"], ["--interval", "-1"], ["--batch", "0"], ["--batch", "5000"]]
)
def test_market_relay_refuses_bad_arguments(argv, redis_client):
    with pytest.raises(CommandError) as caught:
        call_command("market_relay", "--once", *argv, verbosity=0)
    assert caught.value.returncode == 2


def test_market_relay_once_with_redis_down_exits_3(redis_server_factory, settings):
    server = redis_server_factory()
    server.stop()
    settings.REDISPARTS = {**settings.REDISPARTS, "CONNECTIONS": {"default": server.url}}
    with pytest.raises(CommandError, match="cannot reach Redis") as caught:
        call_command("market_relay", "--once", verbosity=0)
    assert caught.value.returncode == 3


def test_the_demo_runner_relays_recorded_sales_and_logs_a_failure(
    redis_client, redis_server_factory, settings, caplog
):
    market.create_user("alice", 0)
    market.create_user("bob", 10**6)
    for n in range(250):  # more than one batch
        market.give_item("alice", f"thing {n}")
        market.list_item("alice", f"thing {n}", 10)
        market.purchase("bob", f"thing {n}", "alice", 10)
    assert DemoCommand()._relay_pass() == 250
    assert market.count_pending_sales() == 0
    assert TaskQueue().length("email") == 250

    dead = redis_server_factory()
    dead.stop()
    settings.REDISPARTS = {**settings.REDISPARTS, "CONNECTIONS": {"default": dead.url}}
    assert DemoCommand()._relay_pass() == 0
    assert "relaying sold e-mails failed" in caplog.text


def test_buying_a_name_you_already_hold_is_a_message_and_changes_nothing(client, db, site_redis):
    load()
    client.force_login(User.objects.get(username="bob"))
    market.give_item("bob", "Lantern")
    funds = market.get_funds("bob")
    response = client.post("/market/buy/", {"seller": "alice", "item": "Lantern", "price": "1250"})
    assert response.status_code == 302
    assert _messages(response) == [
        "You already have an item named Lantern; sell it before buying another."
    ]
    assert market.get_funds("bob") == funds
    assert market.get_price("Lantern", "alice") == 1250
    assert market.count_pending_sales() == 0
