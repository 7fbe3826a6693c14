"""Market pages through the Django test client: buy end to end with the worker, listing,
cancelling, refusals as messages, bad input as 400 with nothing written, escaping."""

import re

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.core.management import call_command
from django.test import override_settings

from marketplace.demo_data import load
from redisparts_app.keys import scan_keys
from redisparts_app.services import market
from redisparts_app.services.semaphores import FairSemaphore

pytestmark = pytest.mark.cluster

LIMIT = 2
SITE = {
    "MAX_CONCURRENT_OPERATIONS": LIMIT,
    "OPERATION_TIMEOUT": 10,
    "PAGE_SIZE": 3,
    "WORKER_QUEUES": ["email", "default"],
}


@pytest.fixture(autouse=True)
def _site_settings():
    with override_settings(MARKETPLACE=SITE):
        yield


@pytest.fixture
def demo(db):
    return load()


@pytest.fixture
def bob(client, demo):
    client.force_login(User.objects.get(username="bob"))
    return client


def market_state(redis_client) -> dict[bytes, bytes]:
    """Every market key and its serialized value: an independent view of what was written."""
    return {key: redis_client.dump(key) for key in scan_keys(redis_client, "rp:market:*")}


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


@pytest.mark.parametrize(
    "path", ["/market/", "/friends/", "/stats/", "/outbox/", "/market/buy/", "/friends/add/"]
)
def test_pages_need_login(client, db, path):
    response = client.get(path) if not path.endswith(("buy/", "add/")) else client.post(path)
    assert response.status_code == 302
    assert response["Location"].startswith(f"/login/?next={path}")


def test_market_lists_cheapest_first_with_seller_and_pages(bob):
    first = bob.get("/market/").content.decode()
    # PAGE_SIZE 3 of the five demo listings: the three cheapest, in price order.
    assert first.index("Healing potion") < first.index("Lantern") < first.index("Spyglass")
    assert "Bow" not in first
    assert "Page 1 of 2" in first
    second = bob.get("/market/?page=2").content.decode()
    assert "Map of Vell" in second
    assert "Bow" in second
    assert "Healing potion" not in second


def test_buy_end_to_end_moves_money_and_item_and_the_worker_mails_the_seller(
    bob, redis_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = bob.post("/market/buy/", {"seller": "alice", "item": "Lantern", "price": "1250"})
    assert response.status_code == 302
    assert market.get_funds("bob") == 30_000 - 1_250
    assert market.get_funds("alice") == 50_000 + 1_250
    assert "Lantern" in market.get_inventory("bob")
    assert market.get_price("Lantern", "alice") is None
    assert mail.outbox == []  # the worker sends it, not the view
    call_command("rp_worker", "email", "--burst", verbosity=0)
    assert len(mail.outbox) == 1
    sold = mail.outbox[0]
    assert sold.to == ["alice@redisparts.test"]
    assert sold.subject == "Your Lantern sold for 12.50"
    assert "bob bought your Lantern" in sold.body
    page = bob.get("/market/").content.decode()
    assert "You bought Lantern from alice for 12.50" in page
    assert 'id="funds">287.50<' in page


def test_buy_by_htmx_answers_the_updated_page(bob):
    response = bob.post(
        "/market/buy/",
        {"seller": "dave", "item": "Spyglass", "price": "2200"},
        headers={"HX-Request": "true"},
        follow=True,
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "You bought Spyglass from dave" in body
    assert 'id="funds">278.00<' in body


@pytest.mark.parametrize(
    ("post", "expected"),
    [
        ({"seller": "alice", "item": "Lantern", "price": "999"}, "changed to 12.50"),
        ({"seller": "carol", "item": "Sword", "price": "100"}, "no longer on the market"),
        ({"seller": "bob", "item": "Healing potion", "price": "450"}, "your own listing"),
        ({"seller": "nobody", "item": "Lantern", "price": "1250"}, "no longer on the market"),
    ],
)
def test_market_refusals_are_messages_and_change_nothing(bob, redis_client, post, expected):
    before = market_state(redis_client)
    response = bob.post("/market/buy/", post, follow=True)
    assert response.status_code == 200
    assert any(expected in m for m in messages_of(response)), messages_of(response)
    assert market_state(redis_client) == before


def test_insufficient_funds_is_a_message(client, demo, redis_client):
    client.force_login(User.objects.get(username="dave"))
    market.give_item("alice", "Castle")
    market.list_item("alice", "Castle", 9_000_000)
    before = market_state(redis_client)
    response = client.post(
        "/market/buy/", {"seller": "alice", "item": "Castle", "price": "9000000"}, follow=True
    )
    assert any("Not enough funds" in m for m in messages_of(response))
    assert market_state(redis_client) == before


def test_buy_is_disabled_with_a_reason_on_what_you_cannot_afford(client, demo):
    client.force_login(User.objects.get(username="dave"))  # 200.00 in funds
    for item, price in (("Castle", 20_001), ("Cottage", 20_000)):
        market.give_item("alice", item)
        market.list_item("alice", item, price)
    pages = [client.get("/market/", {"page": page}) for page in (2, 3)]
    rows = {row["item"]: row["affordable"] for p in pages for row in p.context["listings"]}
    assert rows == {"Map of Vell": True, "Bow": True, "Cottage": True, "Castle": False}
    html = "".join(page.content.decode() for page in pages)
    buttons = re.findall(r"<button [^>]*>Buy</button>(?:\s*<span[^>]*>[^<]*</span>)?", html)
    disabled = [b for b in buttons if " disabled" in b]
    assert len(buttons) == 4
    assert len(disabled) == 1
    assert "Buy Castle from alice" in disabled[0]
    assert "Not enough funds</span>" in disabled[0]


def test_a_full_market_semaphore_is_a_friendly_message(bob, redis_client):
    semaphore = FairSemaphore("market-bob", LIMIT, timeout=10)
    held = [semaphore.acquire() for _ in range(LIMIT)]
    assert all(held)
    before = market_state(redis_client)
    response = bob.post(
        "/market/buy/", {"seller": "alice", "item": "Lantern", "price": "1250"}, follow=True
    )
    assert response.status_code == 200
    assert any(f"already have {LIMIT} market operations" in m for m in messages_of(response))
    assert market_state(redis_client) == before
    for holder in held:
        semaphore.release(holder)
    response = bob.post("/market/buy/", {"seller": "alice", "item": "Lantern", "price": "1250"})
    assert market.get_price("Lantern", "alice") is None
    # The view released its permit: none is left behind.
    assert semaphore.holders() == []


def test_list_and_cancel_own_item(bob):
    response = bob.post("/market/sell/", {"item": "Leather boots", "price": "12.5"}, follow=True)
    assert any("Leather boots is on the market for 12.50" in m for m in messages_of(response))
    assert market.get_price("Leather boots", "bob") == 1_250
    bob.post("/market/cancel/", {"item": "Leather boots"})
    assert market.get_price("Leather boots", "bob") is None
    assert "Leather boots" in market.get_inventory("bob")


def test_cancel_reaches_only_your_own_listings(bob, redis_client):
    before = market_state(redis_client)
    # Bow is carol's; the cancel addresses bob's listing of that name, which does not exist.
    response = bob.post("/market/cancel/", {"item": "Bow"}, follow=True)
    assert any("no longer on the market" in m for m in messages_of(response))
    assert market.get_price("Bow", "carol") == 7_500
    assert market_state(redis_client) == before


BAD_PRICES = ["", "   ", "abc", "12,50", "1e3", "-5", "0", "0.00", "12.345", "99999999999999999",
              "1" * 10_000, "12\x00", "١٢"]  # fmt: skip


@pytest.mark.parametrize("price", BAD_PRICES)
def test_bad_listing_price_is_a_400_form_error_and_writes_nothing(bob, redis_client, price):
    before = market_state(redis_client)
    response = bob.post("/market/sell/", {"item": "Leather boots", "price": price})
    assert response.status_code == 400
    assert 'id="id_price_error"' in response.content.decode()
    assert market_state(redis_client) == before


@pytest.mark.parametrize(
    ("price", "sentence"),
    [
        ("", "Enter a price."),
        ("   ", "Enter a price."),
        ("9" * 20, "The price can be at most 1,000,000,000.00."),
        ("1" * 10_000, "The price can be at most 1,000,000,000.00."),
        ("1000000000.01", "The price can be at most 1,000,000,000.00."),
        ("12,50", "Enter a price as a number, like 12 or 12.50."),
    ],
)
def test_a_listing_price_refusal_says_what_to_type(bob, price, sentence):
    response = bob.post("/market/sell/", {"item": "Leather boots", "price": price})
    assert response.status_code == 400
    assert [str(e) for e in response.context["form"].errors["price"]] == [sentence]


def test_a_price_field_missing_says_enter_a_price(bob):
    response = bob.post("/market/sell/", {"item": "Leather boots"})
    assert response.context["form"].errors["price"] == ["Enter a price."]


BAD_ITEMS = ["", "Sword", "a:b", "{x}", "*", "x" * 10_000, "Leather\x07boots", "Healing potion"]


@pytest.mark.parametrize("item", BAD_ITEMS)
def test_bad_listing_item_is_a_400_form_error_and_writes_nothing(bob, redis_client, item):
    before = market_state(redis_client)
    response = bob.post("/market/sell/", {"item": item, "price": "10"})
    assert response.status_code == 400
    assert 'id="id_item_error"' in response.content.decode()
    assert market_state(redis_client) == before


@pytest.mark.parametrize(
    "post",
    [
        {},
        {"seller": "alice", "item": "Lantern"},
        {"seller": "alice", "item": "Lantern", "price": "-1"},
        {"seller": "alice", "item": "Lantern", "price": "12.50"},
        {"seller": "alice", "item": "Lantern", "price": "10" * 5_000},
        {"seller": "al:ice", "item": "Lantern", "price": "1250"},
        {"seller": "alice", "item": "Lan{tern}", "price": "1250"},
        {"seller": "alice\n", "item": "Lantern", "price": "1250"},
        {"seller": "a" * 10_000, "item": "Lantern", "price": "1250"},
    ],
)
def test_bad_buy_input_is_a_400_with_a_message_and_writes_nothing(bob, redis_client, post):
    before = market_state(redis_client)
    response = bob.post("/market/buy/", post)
    assert response.status_code == 400
    assert "Cannot buy:" in response.content.decode()
    assert market_state(redis_client) == before


@pytest.mark.parametrize("item", ["", "x:y", "x" * 10_000])
def test_bad_cancel_input_is_a_400(bob, redis_client, item):
    before = market_state(redis_client)
    assert bob.post("/market/cancel/", {"item": item}).status_code == 400
    assert market_state(redis_client) == before


@pytest.mark.parametrize("page", ["x", "0", "-1", "9" * 50])
def test_bad_page_number_is_a_400(bob, page):
    assert bob.get(f"/market/?page={page}").status_code == 400


def test_market_pages_answer_get_and_post_only_as_meant(bob):
    assert bob.get("/market/buy/").status_code == 405
    assert bob.post("/market/").status_code == 405


def test_user_text_with_script_is_rendered_escaped(bob):
    market.give_item("alice", "<script>alert(1)</script>")
    market.list_item("alice", "<script>alert(1)</script>", 100)
    body = bob.get("/market/").content.decode()
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_a_site_user_without_market_account_can_open_one(client, db):
    client.force_login(User.objects.create_user("erin", password="pw-erin-1"))
    page = client.get("/market/").content.decode()
    assert "no market account yet" in page
    client.post("/market/open/")
    assert market.get_funds("erin") == 10_000
    response = client.post("/market/open/", follow=True)
    assert any("already have a market account" in m for m in messages_of(response))
    assert market.get_funds("erin") == 10_000
