"""Buying on the market in Chromium: funds and inventory change, and the worker delivers
the seller's "your item sold" e-mail."""

import pytest
from playwright.sync_api import expect

from redisparts_app.services import market as market_service
from tests.tasks_helpers import wait_until

from .helpers import log_in, save_screenshot, sent_messages

pytestmark = pytest.mark.browser


def test_buy_moves_funds_and_item_and_the_worker_mails_the_seller(new_page, start_worker, mail_dir):
    start_worker("email", "default")
    alice = new_page()
    log_in(alice, "alice", "alice-demo")
    alice.goto("/market/")
    funds = alice.locator("#funds")
    expect(funds).to_have_text("500.00")
    inventory = alice.locator("#inventory")
    expect(inventory).not_to_contain_text("Healing potion")

    alice.get_by_role("button", name="Buy Healing potion from bob").click()

    expect(funds).to_have_text("495.50")
    expect(inventory).to_contain_text("Healing potion")
    expect(alice.get_by_role("button", name="Buy Healing potion from bob")).to_have_count(0)
    expect(alice.get_by_role("status")).to_contain_text("You bought Healing potion from bob")
    save_screenshot(alice, "market-bought")
    # The page shows what Redis holds.
    assert market_service.get_funds("alice") == 49_550
    assert market_service.get_funds("bob") == 30_000 + 450
    assert "Healing potion" in market_service.get_inventory("alice")

    def sold_mail():
        return [m for m in sent_messages(mail_dir) if "Healing potion" in m["Subject"]]

    assert wait_until(sold_mail, timeout=30), "the worker did not send the sold e-mail"
    [mail] = sold_mail()
    assert mail["To"].startswith("bob@")
    assert "alice bought your Healing potion" in mail.get_payload()

    bob = new_page()
    log_in(bob, "bob", "bob-demo")
    bob.goto("/outbox/")
    expect(bob.locator("main")).to_contain_text("Your Healing potion sold for 4.50")
    save_screenshot(bob, "market-sold-email")
