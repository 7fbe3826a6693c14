"""Words as the reader sees them in Chromium: no word of the home page's Redis card broken
in the middle, at a phone's width and a desktop's."""

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}

# The words of ``selector`` (outside <code>: a path may break anywhere) drawn on more than
# one line, i.e. broken in the middle.
BROKEN_WORDS = """selector => {
  const broken = [];
  for (const box of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.parentElement.closest("code")) continue;
      for (const word of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(word[0]);
      }
    }
  }
  return broken;
}"""


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_the_redis_card_breaks_no_word(new_page, viewport):
    page = new_page()
    page.set_viewport_size(viewport)
    page.goto("/")
    facts = page.locator(".facts")
    expect(facts).to_contain_text("Version")
    assert page.evaluate(BROKEN_WORDS, ".facts dd") == []
    assert "server-sent events" in page.locator(".parts").inner_text()
