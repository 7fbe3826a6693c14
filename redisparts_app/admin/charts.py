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
    width: int = 720,
    height: int = 180,
    unit: str = "",
) -> SafeString:
    """Return an SVG bar chart of ``(label, value)`` points, first to last, left to right.

    Each bar carries a ``<title>`` (label and value) shown on hover; the axis shows 0, the
    largest value and the first and last labels. Negative values are drawn as 0.
    """
    if not points:
        return format_html('<p class="rp-empty">No data for {}.</p>', title)
    left, right, top, bottom = 56, 8, 10, 22
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max(max(value for _, value in points), 0) or 1
    step = plot_w / len(points)
    bar_w = max(1.0, step * 0.8)
    parts = [
        f'<svg class="rp-chart" role="img" viewBox="0 0 {width} {height}" '
        f'width="100%" preserveAspectRatio="xMinYMin meet" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - right}" y2="{top + plot_h}" '
        'class="rp-axis"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" class="rp-axis"/>',
        f'<text x="{left - 4}" y="{top + 8}" text-anchor="end">'
        f"{_number(peak)}{escape(unit)}</text>",
        f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end">0</text>',
    ]
    for index, (label, value) in enumerate(points):
        bar_h = max(0.0, value) / peak * plot_h
        x = left + index * step + (step - bar_w) / 2
        parts.append(
            f'<rect x="{x:.1f}" y="{top + plot_h - bar_h:.1f}" width="{bar_w:.1f}" '
            f'height="{bar_h:.1f}"><title>{escape(label)}: {_number(value)}{escape(unit)}'
            "</title></rect>"
        )
    baseline = height - 6
    parts.append(f'<text x="{left}" y="{baseline}">{escape(points[0][0])}</text>')
    if len(points) > 1:
        parts.append(
            f'<text x="{width - right}" y="{baseline}" text-anchor="end">'
            f"{escape(points[-1][0])}</text>"
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308  (every label above is escaped)
