"""Guild member autocomplete, guild mail and group chat in Chromium, with two users in two
browser contexts where the flow is between people."""

import re

import pytest
from playwright.sync_api import expect

from .helpers import log_in, save_screenshot

pytestmark = pytest.mark.browser


def test_member_names_complete_while_typing(new_page):
    page = new_page()
    log_in(page, "alice", "alice-demo")

    # The guild page's member search, in alice's guild with bob and carol.
    page.goto("/guild/")
    results = page.locator("#member-results")
    search = page.get_by_role("searchbox", name=re.compile("Search the members of"))
    search.press_sequentially("ca", delay=50)
    expect(results).to_contain_text("carol")
    expect(results).not_to_contain_text("bob")
    save_screenshot(page, "autocomplete-guild-members")

    # The recipient field of a new mail suggests guild mates as the name is typed.
    page.goto("/mail/compose/")
    to = page.get_by_role("textbox", name="To")
    to.press_sequentially("bo", delay=50)
    suggestions = page.get_by_role("listbox")
    expect(suggestions.get_by_role("button", name=re.compile(r"\bbob\b"))).to_be_visible()
    expect(suggestions).not_to_contain_text("carol")
    save_screenshot(page, "autocomplete-recipient")
    suggestions.get_by_role("button", name=re.compile(r"\bbob\b")).click()
    expect(to).to_have_value("bob")


def test_guild_mail_reaches_the_other_users_inbox(new_page):
    subject = "Meeting moved to Saturday"
    bob = new_page()
    log_in(bob, "bob", "bob-demo")
    bob.goto("/mail/")
    expect(bob.locator("main")).not_to_contain_text(subject)

    alice = new_page()
    log_in(alice, "alice", "alice-demo")
    alice.goto("/mail/compose/")
    alice.get_by_role("textbox", name="To").press_sequentially("bo", delay=50)
    alice.get_by_role("listbox").get_by_role("button", name=re.compile(r"\bbob\b")).click()
    alice.get_by_role("textbox", name="Subject").fill(subject)
    alice.get_by_role("textbox", name="Message").fill("The hall is booked on Friday.")
    alice.get_by_role("button", name="Send").click()
    expect(alice.get_by_role("status")).to_contain_text("Mail sent to bob")
    save_screenshot(alice, "mail-sent")

    bob.reload()
    mail = bob.get_by_role("link", name=re.compile(subject))
    expect(mail).to_contain_text("alice")
    expect(mail).to_contain_text("(unread)")
    save_screenshot(bob, "mail-inbox")
    mail.click()
    expect(bob.get_by_role("heading", name=subject)).to_be_visible()
    expect(bob.locator("main")).to_contain_text("The hall is booked on Friday.")
    bob.go_back()
    bob.reload()
    expect(bob.get_by_role("link", name=re.compile(subject))).not_to_contain_text("(unread)")


def test_chat_message_appears_on_the_other_members_page_without_reload(new_page):
    text = "Anyone heading to the mines tonight?"
    bob = new_page()
    log_in(bob, "bob", "bob-demo")
    bob.goto("/chat/")
    bob.get_by_role("link", name=re.compile("alice, carol")).click()
    expect(bob.locator("#chat-messages")).to_contain_text("Anyone selling arrows?")
    bob.evaluate("window.loadedOnce = true")  # gone if the page reloads

    alice = new_page()
    log_in(alice, "alice", "alice-demo")
    alice.goto("/chat/")
    alice.get_by_role("link", name=re.compile("bob, carol")).click()
    alice.get_by_role("textbox", name="Message").fill(text)
    alice.get_by_role("button", name="Send").click()
    expect(alice.locator("#chat-messages")).to_contain_text(text)
    expect(alice.get_by_role("textbox", name="Message")).to_have_value("")

    message = bob.locator("#chat-messages li", has_text=text)
    expect(message).to_have_count(1)
    expect(message).to_contain_text("alice")
    assert bob.evaluate("window.loadedOnce") is True
    save_screenshot(bob, "chat-received")
    save_screenshot(alice, "chat-sent")
