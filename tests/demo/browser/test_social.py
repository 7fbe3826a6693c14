"""Guild member autocomplete, guild mail and group chat in Chromium, with two users in two
browser contexts where the flow is between people."""

import re

import pytest
from playwright.sync_api import expect

from marketplace.demo_data import CHAT_ID
from redisparts_app.services.chat import fetch_pending_messages, join_chat, send_message

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


def unread_chat_badge(page):
    return page.get_by_role("navigation", name="Main").get_by_title("unread chat messages")


def test_chat_history_stays_after_a_reload_and_the_navigation_counts_unread(new_page):
    text = "Meet at the north gate at dawn."
    bob = new_page()
    log_in(bob, "bob", "bob-demo")
    expect(unread_chat_badge(bob)).to_have_text("3")  # the demo chat's three messages

    alice = new_page()
    log_in(alice, "alice", "alice-demo")
    alice.goto(f"/chat/{CHAT_ID}/")
    alice.get_by_role("textbox", name="Message").fill(text)
    alice.get_by_role("button", name="Send").click()
    expect(alice.locator("#chat-messages")).to_contain_text(text)
    bob.reload()
    expect(unread_chat_badge(bob)).to_have_text("4")

    # bob reads the chat: his badge goes; every member has now fetched every message.
    bob.goto("/chat/")
    preview = bob.get_by_role("link", name=re.compile("alice, carol"))
    expect(preview).to_contain_text(f"alice: {text}")
    save_screenshot(bob, "chat-list")
    preview.click()
    expect(bob.locator("#chat-messages")).to_contain_text(text)
    expect(unread_chat_badge(bob)).to_have_count(0)
    fetch_pending_messages("carol")

    for page in (alice, bob):
        page.reload()
        messages = page.locator("#chat-messages li.msg")
        expect(messages).to_have_count(4)
        expect(messages.first).to_contain_text("Anyone selling arrows?")
        expect(messages.last).to_contain_text(text)  # the newest at the bottom
        expect(page.get_by_text("No messages yet")).to_have_count(0)
    bob.goto("/market/")
    expect(unread_chat_badge(bob)).to_have_count(0)
    save_screenshot(bob, "chat-history-after-reload")


def test_show_older_messages_pages_back_in_place(new_page):
    for n in range(4, 121):
        send_message(CHAT_ID, "carol", f"Round {n} of the tale")
    alice = new_page()
    log_in(alice, "alice", "alice-demo")
    alice.goto(f"/chat/{CHAT_ID}/")  # takes the pending messages: all of them are shown
    expect(alice.locator("#chat-messages li.msg")).to_have_count(120)
    alice.reload()
    messages = alice.locator("#chat-messages li.msg")
    expect(messages).to_have_count(50)
    expect(messages.first).to_have_attribute("data-id", "71")
    alice.evaluate("window.loadedOnce = true")  # gone if the page reloads

    older = alice.get_by_role("link", name="Show older messages")
    older.scroll_into_view_if_needed()
    save_screenshot(alice, "chat-older-link")
    older.click()
    expect(messages).to_have_count(100)
    expect(messages.first).to_have_attribute("data-id", "21")
    # What was at the top stays in view; older messages are above it.
    expect(alice.locator("#msg-71")).to_be_in_viewport()
    older.click()
    expect(messages).to_have_count(120)
    expect(messages.first).to_contain_text("Anyone selling arrows?")
    expect(older).to_have_count(0)
    ids = [int(i) for i in messages.evaluate_all("items => items.map(i => i.dataset.id)")]
    assert ids == list(range(1, 121))
    assert alice.evaluate("window.loadedOnce") is True
    save_screenshot(alice, "chat-show-older")


def test_a_bad_older_messages_request_shows_its_error_in_place(new_page):
    for n in range(4, 60):
        send_message(CHAT_ID, "carol", f"Round {n} of the tale")
    fetch_pending_messages("alice")
    alice = new_page()
    log_in(alice, "alice", "alice-demo")
    alice.goto(f"/chat/{CHAT_ID}/")
    older = alice.get_by_role("link", name="Show older messages")
    older.evaluate(
        """link => {
            link.setAttribute("hx-get", link.getAttribute("hx-get").replace(/=\\d+$/, "=abc"));
            htmx.process(link);
        }"""
    )
    older.click()
    expect(alice.locator("#chat-older").get_by_role("alert")).to_contain_text(
        "asked for older messages in a way the site does not know"
    )
    expect(alice.locator("#chat-messages li.msg")).to_have_count(50)
    expect(alice.get_by_role("textbox", name="Message")).to_be_visible()
    expect(alice.locator("header.topbar")).to_be_visible()


def test_an_empty_chat_says_so_until_a_message_comes(new_page):
    join_chat(CHAT_ID, "dave")  # joins after the demo's messages: none are his to read
    dave = new_page()
    log_in(dave, "dave", "dave-demo")
    dave.goto(f"/chat/{CHAT_ID}/")
    empty = dave.get_by_text("No messages yet")
    expect(empty).to_be_visible()
    expect(dave.locator("#chat-messages li.msg")).to_have_count(0)
    save_screenshot(dave, "chat-empty")

    send_message(CHAT_ID, "alice", "Welcome, dave!")
    expect(dave.locator("#chat-messages li.msg")).to_have_count(1)
    expect(dave.locator("#chat-messages")).to_contain_text("Welcome, dave!")
    expect(empty).to_be_hidden()
    save_screenshot(dave, "chat-late-joiner")
