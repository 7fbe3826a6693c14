"""Error answers in Chromium: a refused htmx request shows its message in place (next to
the field or in the chat's message area) and keeps the page, its layout and what was
typed, with DEBUG on (django-htmx's debug script would replace the page) and off; a long
word in a mail subject does not widen the page."""

import re

import pytest
from django.conf import settings as django_settings
from django.test import override_settings
from playwright.sync_api import Page, expect

from marketplace.demo_data import CHAT_ID
from redisparts_app.services.mail import Mailbox

from .helpers import log_in, save_screenshot

pytestmark = pytest.mark.browser

PHONE = {"width": 375, "height": 740}
DESKTOP = {"width": 1280, "height": 900}


@pytest.fixture(params=[True, False], ids=["debug", "production"])
def debug(request, settings):
    """DEBUG as the live server sees it (the same settings object, read per request)."""
    settings.DEBUG = request.param
    return request.param


def assert_page_kept(page: Page, title: str) -> None:
    """The page is still the site's: its title, navigation and stylesheet's layout."""
    expect(page).to_have_title(re.compile(re.escape(title)))
    expect(page.locator("header.topbar")).to_be_visible()
    expect(page.locator("footer.footer")).to_be_visible()
    # Styled: the site's stylesheet gives the top bar its flex layout.
    display = page.locator(".topbar-inner").evaluate("e => getComputedStyle(e).display")
    assert display == "flex"


def chat_page(new_page) -> Page:
    """alice's page of the demo's chat with bob and carol."""
    page = new_page()
    log_in(page, "alice", "alice-demo")
    page.goto(f"/chat/{CHAT_ID}/")
    expect(page.locator("#chat-messages")).to_contain_text("Anyone selling arrows?")
    return page


@pytest.mark.parametrize("typed", ["{", ":", "*", "ca*"])
def test_member_search_refusal_shows_under_the_field(new_page, debug, typed):
    page = new_page()
    log_in(page, "alice", "alice-demo")
    page.goto("/guild/")
    search = page.get_by_role("searchbox", name=re.compile("Search the members of"))
    search.press_sequentially(typed, delay=50)
    results = page.locator("#member-results")
    bad = typed[-1]
    expect(results.get_by_role("alert")).to_have_text(f"A name cannot contain '{bad}'.")
    assert_page_kept(page, "Contacts and guild")
    expect(search).to_have_value(typed)
    save_screenshot(page, f"error-member-search-{'debug' if debug else 'prod'}")

    # Fixing the input brings the results back.
    search.fill("ca")
    search.press("End")
    search.press_sequentially("r", delay=50)
    expect(results).to_contain_text("carol")
    expect(results.get_by_role("alert")).to_have_count(0)


def test_recipient_refusal_shows_under_the_to_field(new_page, debug):
    page = new_page()
    log_in(page, "alice", "alice-demo")
    page.goto("/mail/compose/")
    page.get_by_role("textbox", name="Subject").fill("Kept subject")
    to = page.get_by_role("textbox", name="To")
    to.press_sequentially("a:", delay=50)
    expect(page.locator("#to-suggestions").get_by_role("alert")).to_have_text(
        "A name cannot contain ':'."
    )
    assert_page_kept(page, "Write a mail")
    expect(to).to_have_value("a:")
    expect(page.get_by_role("textbox", name="Subject")).to_have_value("Kept subject")
    save_screenshot(page, "error-recipient")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("     ", "A message cannot be empty."),
        ("x" * 4001, "at most 4000 characters"),
    ],
    ids=["blank", "too-long"],
)
def test_refused_chat_message_stays_in_the_box_with_the_reason(new_page, debug, text, message):
    page = chat_page(new_page)
    box = page.get_by_role("textbox", name="Message")
    # The box's maxlength stops typing at 4,000; a pasted text or a script gets past it.
    box.evaluate("(e, v) => { e.removeAttribute('maxlength'); e.value = v; }", text)
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#send-errors").get_by_role("alert")).to_contain_text(message)
    assert_page_kept(page, "Chat with")
    expect(box).to_have_value(text)
    save_screenshot(page, f"error-chat-{'blank' if not text.strip() else 'long'}")


def test_a_chat_left_in_another_tab_says_so_in_the_first(new_page, debug):
    first = chat_page(new_page)
    second = first.context.new_page()
    second.goto(f"/chat/{CHAT_ID}/")
    second.get_by_role("button", name="Leave this chat").click()
    expect(second.get_by_role("status")).to_contain_text("You left the chat.")

    # The first tab's poll is refused: the reason shows and polling stops.
    expect(first.locator("#chat-status").get_by_role("alert")).to_have_text(
        "Only the members of this chat may see it."
    )
    expect(first.locator("#chat-poller")).to_have_count(0)
    assert_page_kept(first, "Chat with")

    box = first.get_by_role("textbox", name="Message")
    box.fill("Still here?")
    first.get_by_role("button", name="Send").click()
    expect(first.locator("#send-errors").get_by_role("alert")).to_have_text(
        "Only the members of this chat may see it."
    )
    expect(box).to_have_value("Still here?")
    assert_page_kept(first, "Chat with")
    save_screenshot(first, "error-chat-left")


def test_a_rate_limited_chat_message_stays_with_when_to_retry(new_page):
    limits = {**django_settings.MARKETPLACE["RATE_LIMITS"], "chat": (2, 60)}
    with override_settings(MARKETPLACE={**django_settings.MARKETPLACE, "RATE_LIMITS": limits}):
        page = chat_page(new_page)
        box = page.get_by_role("textbox", name="Message")
        for number in (1, 2):
            box.fill(f"Message {number}")
            box.press("Enter")
            expect(page.locator("#chat-messages")).to_contain_text(f"Message {number}")
            expect(box).to_have_value("")
        box.fill("One too many")
        box.press("Enter")
        alert = page.locator("#send-errors").get_by_role("alert")
        expect(alert).to_contain_text("You are sending chat messages too fast.")
        expect(alert).to_contain_text(re.compile(r"Try again in \d+ seconds?\."))
        # The wait counts down as the seconds pass.
        wait = alert.locator("[role=timer]")
        first = int(re.findall(r"\d+", wait.inner_text())[0])
        expect(wait).to_have_text(f"in {first - 2} seconds")
        expect(box).to_have_value("One too many")
        assert_page_kept(page, "Chat with")
        expect(page.locator("#chat-messages")).not_to_contain_text("One too many")
        save_screenshot(page, "error-chat-rate-limited")


def page_width(page: Page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_a_long_word_in_a_mail_subject_keeps_the_page_width(new_page, viewport):
    word = "Supercalifragilistic" * 9  # 180 characters, no space
    Mailbox("bob").send("alice", f"Re: {word}", f"Body with {word} in it too.")
    page = new_page()
    page.set_viewport_size(viewport)
    log_in(page, "bob", "bob-demo")

    page.goto("/mail/")
    row = page.get_by_role("link", name=re.compile("Supercalifragilistic"))
    expect(row).to_contain_text("(unread)")
    assert page_width(page) <= viewport["width"]
    save_screenshot(page, f"long-subject-inbox-{viewport['width']}")

    row.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Supercalifragilistic")
    assert page_width(page) <= viewport["width"]
    save_screenshot(page, f"long-subject-read-{viewport['width']}")
