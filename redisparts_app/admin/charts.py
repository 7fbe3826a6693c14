"""Charts as inline SVG rendered on the server: no JavaScript, no CDN, escaped labels."""

from collections.abc import Sequence

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

__all__ = [
    "bar_chart",
]


def _number(value: float) -> str:
    if abs(value) >= 1000 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.3g}"


def bar_chart(
    points: Sequence[tuple[str, float]],
    *,
    title: str,
    unit: str = "",
) -> SafeString:
    """Return a bar chart of ``(label, value)`` points, first to last, left to right.

    The bars are an SVG stretched to the chart's box; each carries a ``<title>`` (label
    and value) shown on hover. The axis labels (0, the largest value, the first and last
    labels) are HTML beside it, so they keep the admin's text size at any width, where
    text drawn in a scaled SVG shrinks with it. Negative values are drawn as 0.
    """
    if not points:
        return format_html('<p class="rp-empty">No data for {}.</p>', title)
    peak = max(max(value for _, value in points), 0) or 1
    # 10 units a bar, 100 high: the SVG is stretched to any box (preserveAspectRatio).
    width, height = 10 * len(points), 100
    bars = []
    for index, (label, value) in enumerate(points):
        bar_h = max(0.0, value) / peak * height
        bars.append(
            f'<rect x="{index * 10 + 1}" y="{height - bar_h:.2f}" width="8" '
            f'height="{bar_h:.2f}"><title>{escape(label)}: {_number(value)}{escape(unit)}'
            "</title></rect>"
        )
    last = escape(points[-1][0]) if len(points) > 1 else ""
    return mark_safe(  # noqa: S308  (every label is escaped)
        f'<figure class="rp-chart" role="img" aria-label="{escape(title)}">'
        f'<div class="rp-chart-y"><span>{_number(peak)}{escape(unit)}</span><span>0</span></div>'
        f'<svg viewBox="0 0 {width} {height}" preserveAspectRatio="none" focusable="false">'
        f"<title>{escape(title)}</title>{''.join(bars)}</svg>"
        f'<div class="rp-chart-x"><span>{escape(points[0][0])}</span><span>{last}</span></div>'
        "</figure>"
    )
