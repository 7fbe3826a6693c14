"""The Stats page in Chromium: chart labels are one legible size, at desktop and phone
widths, no label runs out of its chart and no two labels of a chart overlap."""

import pytest

from .helpers import log_in, save_screenshot

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
# Rendered label heights, CSS pixels: the site's small text is 12-13 px.
SMALLEST, LARGEST = 10.5, 14.5

MEASURE = """() => Array.from(document.querySelectorAll("svg.chart")).map(svg => {
  const box = svg.getBoundingClientRect();
  return Array.from(svg.querySelectorAll("text")).map(text => {
    const r = text.getBoundingClientRect();
    const scale = box.width / svg.viewBox.baseVal.width;
    const size = parseFloat(getComputedStyle(text).fontSize) * scale;
    return {label: text.textContent, size: size,
            box: [r.left, r.top, r.right, r.bottom],
            inside: r.left >= box.left - 1 && r.right <= box.right + 1 &&
                    r.top >= box.top - 1 && r.bottom <= box.bottom + 1};
  });
})"""


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
    labels = [label for chart in charts for label in chart]
    assert len(charts) == 3
    sizes = sorted(round(label["size"], 1) for label in labels)
    assert sizes[0] >= SMALLEST, labels
    assert sizes[-1] <= LARGEST, labels
    assert [label for label in labels if not label["inside"]] == []
    assert [pair for chart in charts for pair in overlapping(chart)] == []


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
