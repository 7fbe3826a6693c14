"""The site at a phone's width (390 by 844) in Chromium: no page is wider than the screen,
every menu entry is on screen and whole, the stats table shows its numbers, a table
wider than its card shows that it scrolls, and a purchase made low on a long market
page brings its result into view."""

import base64

import pytest
from playwright.sync_api import Page, expect

from redisparts_app.conf import app_settings
from redisparts_app.services import config
from redisparts_app.services import market as market_service

from .helpers import log_in, save_screenshot

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}

# Where an element is, in the viewport's CSS pixels.
BOX = """el => { const r = el.getBoundingClientRect();
  return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; }"""

# One pixel of the screen as [r, g, b, a]: a one-pixel screenshot read back through a canvas.
READ_PIXEL = """async data => {
  const image = new Image();
  image.src = "data:image/png;base64," + data;
  await image.decode();
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 1;
  const context = canvas.getContext("2d");
  context.drawImage(image, 0, 0);
  return Array.from(context.getImageData(0, 0, 1, 1).data);
}"""


def phone_page(new_page, user: str | None = None, viewport: dict = PHONE) -> Page:
    page = new_page()
    page.set_viewport_size(viewport)
    if user:
        log_in(page, user, f"{user}-demo")
    return page


def page_width(page: Page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def on_screen(page: Page, box: dict) -> bool:
    width = page.viewport_size["width"]
    return box["left"] >= 0 and box["right"] <= width


def pixel(page: Page, x: float, y: float) -> list[int]:
    png = page.screenshot(clip={"x": x, "y": y, "width": 1, "height": 1})
    return page.evaluate(READ_PIXEL, base64.b64encode(png).decode())


def test_every_menu_entry_is_on_screen_and_whole(new_page):
    page = phone_page(new_page, "admin")
    page.goto("/market/")
    nav = page.get_by_role("navigation", name="Main")
    links = nav.get_by_role("link")
    expect(links.last).to_have_text("Admin")
    names = links.all_inner_texts()
    assert len(names) == 8, names
    for link in links.all():
        box = link.evaluate(BOX)
        assert on_screen(page, box), (link.inner_text(), box)
    # Nothing of the menu hides behind a sideways scroll.
    assert nav.evaluate("el => el.scrollWidth <= el.clientWidth")
    assert page_width(page) <= PHONE["width"]
    save_screenshot(page, "phone-menu")


def test_the_chat_list_keeps_the_page_width(new_page):
    page = phone_page(new_page, "alice")
    page.goto("/chat/")
    row = page.locator(".chat-list a", has_text="#tavern")
    expect(row.locator(".chat-unread")).to_be_visible()
    assert page_width(page) <= PHONE["width"]
    for part in (".chat-when", ".chat-unread"):
        assert on_screen(page, row.locator(part).evaluate(BOX)), part
    save_screenshot(page, "phone-chats")


def test_the_highest_price_keeps_the_market_width(new_page):
    market_service.give_item("carol", "Golden crown")
    market_service.list_item("carol", "Golden crown", app_settings.MARKET_MAX_PRICE)
    page = phone_page(new_page, "alice")
    page.goto("/market/")
    row = page.get_by_role("row", name="Golden crown")
    expect(row).to_contain_text("1,000,000,000.00")
    assert page_width(page) <= PHONE["width"]
    region = page.get_by_role("region", name="Listings").evaluate(BOX)
    for cell in (row.locator("td.price"), row.get_by_role("button", name="Buy")):
        box = cell.evaluate(BOX)
        assert on_screen(page, box), box
        assert box["right"] <= region["right"], box  # not scrolled out of the table
    save_screenshot(page, "phone-market-highest-price")


def test_the_stats_table_shows_its_numbers(new_page):
    page = phone_page(new_page, "alice")
    # A view without a URL name is timed under its long dotted path.
    for path in ("/admin/login/", "/market/", "/guild/"):
        page.goto(path)
    page.goto("/stats/")
    region = page.get_by_role("region", name="Response times")
    expect(region).to_contain_text("django.contrib.admin")
    assert page_width(page) <= PHONE["width"]
    area = region.evaluate(BOX)
    numbers = region.locator("td.price:visible")
    assert numbers.count() >= 6
    for cell in numbers.all():
        box = cell.evaluate(BOX)
        assert area["left"] <= box["left"], (cell.inner_text(), box, area)
        assert box["right"] <= area["right"], (cell.inner_text(), box, area)
    save_screenshot(page, "phone-stats")


def test_a_table_wider_than_its_card_shows_where_it_scrolls(new_page):
    page = phone_page(new_page, "alice")
    page.goto("/market/")
    region = page.get_by_role("region", name="Listings")
    region.locator("table").evaluate("table => { table.style.minWidth = '700px'; }")
    region.scroll_into_view_if_needed()
    area = region.evaluate(BOX)
    # Above the header's text, at the very edges of the scrolling area.
    y = area["top"] + 3
    left, right = area["left"] + 2, min(area["right"], PHONE["width"]) - 3

    def shade(x: float) -> int:
        return sum(pixel(page, x, y)[:3])

    white = 3 * 255
    assert shade(left) >= white - 6, "no shadow before the first column"
    assert shade(right) < white - 30, "no hint that more columns are to the right"
    region.evaluate("el => { el.scrollLeft = el.scrollWidth; }")
    assert shade(left) < white - 30, "no hint that columns are to the left"
    assert shade(right) >= white - 6, "a shadow after the last column"


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_buying_low_on_a_long_market_page_brings_the_result_into_view(new_page, viewport):
    for number in range(15):  # cheaper than the demo's listings, so those come last
        item = f"Pebble {number:02}"
        market_service.give_item("dave", item)
        market_service.list_item("dave", item, 100 + number)
    page = phone_page(new_page, "alice", viewport)
    page.goto("/market/")
    page.get_by_role("button", name="Buy Bow from carol").click()
    result = page.get_by_role("status").filter(has_text="You bought Bow from carol")
    expect(result).to_be_in_viewport()
    # Whole, and not under a top bar that stays on screen.
    box = result.evaluate(BOX)
    bar = page.locator(".topbar").evaluate(
        "el => getComputedStyle(el).position === 'sticky' ? el.getBoundingClientRect().bottom : 0"
    )
    assert bar <= box["top"], (bar, box)
    assert box["bottom"] <= viewport["height"], box
    save_screenshot(page, f"market-bought-low-{viewport['width']}")


def test_buying_with_the_result_in_view_does_not_scroll(new_page):
    page = phone_page(new_page, "alice")
    page.goto("/market/")
    page.get_by_role("button", name="Buy Healing potion from bob").click()
    expect(page.get_by_role("status")).to_contain_text("You bought Healing potion")
    assert page.evaluate("window.scrollY") == 0


def test_the_maintenance_page_keeps_a_margin(new_page):
    config.set_maintenance(message="Upgrading")
    config.clear_local_cache()
    try:
        page = phone_page(new_page)
        page.goto("/market/")
        card = page.get_by_role("main")
        expect(card).to_contain_text("Upgrading")
        box = card.evaluate(BOX)
        assert box["left"] >= 8, box
        assert box["right"] <= PHONE["width"] - 8, box
        assert page_width(page) <= PHONE["width"]
        save_screenshot(page, "phone-maintenance")
    finally:
        config.clear_maintenance()
        config.clear_local_cache()
