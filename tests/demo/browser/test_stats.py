"""The charts of the Stats page and of the admin in Chromium: labels are one legible size,
at desktop and phone widths, no label runs out of its chart and no two labels of a chart
overlap."""

import pytest
from django.urls import reverse

from redisparts_app.services import counters, stats

from .helpers import log_in, save_screenshot

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
# Rendered label heights, CSS pixels: the site's small text is 12-13 px.
SMALLEST, LARGEST = 10.5, 14.5

# The labels of each chart: <text> in the site's SVG charts, drawn at the SVG's scale;
# HTML beside the bars in the admin's.
MEASURE = """() => Array.from(document.querySelectorAll("svg.chart, .rp-chart")).map(chart => {
  const box = chart.getBoundingClientRect();
  const svg = chart.matches("svg");
  const scale = svg ? box.width / chart.viewBox.baseVal.width : 1;
  const labels = chart.querySelectorAll(svg ? "text" : ".rp-chart-y span, .rp-chart-x span");
  return Array.from(labels).filter(text => text.textContent).map(text => {
    const r = text.getBoundingClientRect();
    const size = parseFloat(getComputedStyle(text).fontSize) * scale;
    return {label: text.textContent, size: size,
            box: [r.left, r.top, r.right, r.bottom],
            inside: r.left >= box.left - 1 && r.right <= box.right + 1 &&
                    r.top >= box.top - 1 && r.bottom <= box.bottom + 1};
  });
})"""


def assert_legible(charts: list[list[dict]]) -> None:
    labels = [label for chart in charts for label in chart]
    sizes = sorted(round(label["size"], 1) for label in labels)
    assert sizes[0] >= SMALLEST, labels
    assert sizes[-1] <= LARGEST, labels
    assert [label for label in labels if not label["inside"]] == []
    assert [pair for chart in charts for pair in overlapping(chart)] == []


@pytest.mark.parametrize("width", list(WIDTHS))
def test_chart_labels_are_one_legible_size_and_stay_inside(new_page, width):
    page = new_page()
    page.set_viewport_size(dict(zip(("width", "height"), WIDTHS[width], strict=True)))
    log_in(page, "alice", "alice-demo")
    # Some requests, timings and statuses; a view without a URL name is timed under its
    # long dotted path, the longest label of the slowest views.
    for path in ("/market/", "/guild/", "/mail/", "/admin/login/"):
        page.goto(path)
    page.goto("/stats/")
    charts = page.evaluate(MEASURE)
    save_screenshot(page, f"stats-{width}")
    assert len(charts) == 3
    assert_legible(charts)


@pytest.mark.parametrize("width", list(WIDTHS))
def test_admin_chart_labels_are_legible_and_stay_inside(new_page, width):
    for second in range(12):
        counters.update_counter("hits", clock=lambda second=second: 1_700_000_000.0 + second)
    for view, seconds in (("market.listings", 0.25), ("marketplace.social.views.chat_room", 2)):
        stats.record_access_time(view, seconds)
    page = new_page()
    page.set_viewport_size(dict(zip(("width", "height"), WIDTHS[width], strict=True)))
    log_in(page, "admin", "admin-demo")
    for name in ("counters", "stats"):
        query = "?name=hits&precision=1" if name == "counters" else ""
        page.goto(reverse(f"admin:redisparts_{name}") + query)
        charts = page.evaluate(MEASURE)
        save_screenshot(page, f"admin-{name}-{width}")
        assert len(charts) == 1, name
        assert len(charts[0]) == 4, charts  # the largest value, 0, the first and last labels
        assert_legible(charts)


def overlapping(labels: list[dict]) -> list[tuple[str, str]]:
    """The pairs of labels whose boxes share more than a pixel each way."""
    pairs = []
    for number, first in enumerate(labels):
        for second in labels[number + 1 :]:
            a, b = first["box"], second["box"]
            across = min(a[2], b[2]) - max(a[0], b[0])
            down = min(a[3], b[3]) - max(a[1], b[1])
            if across > 1 and down > 1:
                pairs.append((first["label"], second["label"]))
    return pairs
