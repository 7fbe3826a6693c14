"""Chat messages pushed as Server-Sent Events, with the site served through ASGI (uvicorn),
two users in two browser contexts; and the page's fallback to polling."""

import re
import time

import pytest
from playwright.sync_api import Page, expect

from marketplace.demo_data import CHAT_ID
from redisparts_app.connection import get_redis
from redisparts_app.services.chat import send_message

from .helpers import log_in, save_screenshot

pytestmark = pytest.mark.browser


def open_chat(page: Page, user: str, others: str) -> list[str]:
    """Log in, open the demo chat and return the list the page's poll requests go to."""
    polls: list[str] = []
    page.on(
        "request", lambda request: polls.append(request.url) if "/poll/" in request.url else None
    )
    log_in(page, user, f"{user}-demo")
    page.goto("/chat/")
    page.get_by_role("link", name=re.compile(others)).click()
    expect(page.locator("#chat-messages")).to_contain_text("Anyone selling arrows?")
    return polls


def test_message_is_pushed_to_the_other_members_page_without_a_poll(new_asgi_page):
    text = "Pushed, not polled"
    bob = new_asgi_page()
    bob_polls = open_chat(bob, "bob", "alice, carol")
    bob.wait_for_function("window.chatPushOpen === true")
    bob_polls.clear()  # from here on the stream is open (a loaded machine may poll before)
    bob.evaluate("window.loadedOnce = true")  # gone if the page reloads

    alice = new_asgi_page()
    alice_polls = open_chat(alice, "alice", "bob, carol")
    alice.wait_for_function("window.chatPushOpen === true")
    alice_polls.clear()
    alice.get_by_role("textbox", name="Message").fill(text)
    alice.get_by_role("button", name="Send").click()

    message = bob.locator("#chat-messages li", has_text=text)
    expect(message).to_have_count(1)
    expect(message).to_contain_text("alice")
    expect(alice.locator("#chat-messages li", has_text=text)).to_have_count(1)
    # Polling waits while the stream is open: the message came through the stream. (The
    # pages poll every 1.5 s otherwise; bench/realtime.py measures the push latency.)
    assert bob_polls == []
    assert alice_polls == []
    assert bob.evaluate("window.loadedOnce") is True
    # The next message too, sent by the service: one event each, nothing repeated.
    send_message(CHAT_ID, "carol", "and the next one")
    expect(bob.locator("#chat-messages li", has_text="and the next one")).to_have_count(1)
    expect(bob.locator("#chat-messages li", has_text=text)).to_have_count(1)
    assert bob_polls == []
    save_screenshot(bob, "chat-pushed")


def test_page_polls_when_the_event_stream_fails(new_asgi_page):
    bob = new_asgi_page()
    bob.route("**/events/**", lambda route: route.fulfill(status=503, body="down"))
    bob_polls = open_chat(bob, "bob", "alice, carol")
    send_message(CHAT_ID, "alice", "came by polling")
    expect(bob.locator("#chat-messages li", has_text="came by polling")).to_have_count(1)
    assert bob_polls  # the poll brought it
    assert bob.evaluate("window.chatPushOpen") is not True


def test_push_comes_back_without_a_reload_once_the_stream_is_answered_again(new_asgi_page):
    bob = new_asgi_page()
    refused: list[str] = []

    def outage(route):
        refused.append(route.request.url)
        route.fulfill(status=503, body="down")

    bob.route("**/events/**", outage)  # what a stream gets while Redis is down
    open_chat(bob, "bob", "alice, carol")
    bob.evaluate("window.loadedOnce = true")  # gone if the page reloads
    deadline = time.monotonic() + 15
    while len(refused) < 2:  # the page asked again after the first refusal
        assert time.monotonic() < deadline, "the page never asked for the stream again"
        bob.wait_for_timeout(100)
    bob.unroute("**/events/**")  # Redis is back
    bob.wait_for_function("window.chatPushOpen === true", timeout=20_000)
    bob_polls: list[str] = []
    bob.on("request", lambda r: bob_polls.append(r.url) if "/poll/" in r.url else None)
    send_message(CHAT_ID, "alice", "pushed after the outage")
    expect(bob.locator("#chat-messages li", has_text="pushed after the outage")).to_have_count(1)
    assert bob_polls == []  # the stream brought it
    assert bob.evaluate("window.loadedOnce") is True


def test_the_stream_resumes_after_a_reconnect_without_loss_or_repeat(new_asgi_page):
    bob = new_asgi_page()
    streams: list[dict] = []
    bob.on("request", lambda r: streams.append(r.all_headers()) if "/events/" in r.url else None)
    open_chat(bob, "bob", "alice, carol")
    bob.wait_for_function("window.chatPushOpen === true")
    send_message(CHAT_ID, "alice", "before the break")
    expect(bob.locator("#chat-messages li", has_text="before the break")).to_have_count(1)
    # Redis drops the stream's blocked read: the stream ends, and the browser reconnects
    # by itself with Last-Event-ID.
    redis = get_redis()
    deadline = time.monotonic() + 15
    while not (blocked := [c for c in redis.client_list() if c["cmd"] == "xread"]):
        assert time.monotonic() < deadline, "the stream never waited on Redis again"
        time.sleep(0.05)
    for client in blocked:
        redis.client_kill_filter(_id=client["id"])
    for n in range(3):
        send_message(CHAT_ID, "alice", f"while away {n}")
    for n in range(3):
        expect(bob.locator("#chat-messages li", has_text=f"while away {n}")).to_have_count(1)
    expect(bob.locator("#chat-messages li", has_text="before the break")).to_have_count(1)
    ids = bob.locator("#chat-messages li.msg").evaluate_all("items => items.map(i => i.id)")
    assert len(ids) == len(set(ids))
    # The stream came back, resuming from the last message it had delivered.
    bob.wait_for_function("window.chatPushOpen === true")
    last_before = int(
        bob.locator("#chat-messages li", has_text="before the break").get_attribute("data-id")
    )
    resumed = [h.get("last-event-id") for h in streams[1:]]
    assert str(last_before) in resumed
