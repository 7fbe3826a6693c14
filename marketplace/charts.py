"""Small charts drawn as inline SVG on the server: no JavaScript, no chart library.

Every label passes through Django's ``escape``; the result is marked safe for templates.
"""

import math
from datetime import UTC, datetime

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe


def _nice_max(value: float) -> float:
    """A round axis maximum at or above ``value`` (1, 2, 5 times a power of ten)."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** len(str(int(value))) / 10 if value >= 1 else 1.0
    for step in (1, 2, 5, 10):
        if step * magnitude >= value:
            return float(step * magnitude)
    return float(value)


# The text size site.css gives each chart on a phone, in the SVG's units: the largest
# drawn, so the room left for labels is measured at it. A glyph is taken as this much
# of the size, a little over the average of the sans-serif fonts the site names.
PHONE_TEXT = {"columns": 21, "bars": 15}
GLYPH = 0.62


def _number(value: float) -> str:
    if value >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.3g}"


def column_chart(
    points: list[tuple[int, int]], *, width: int = 640, height: int = 200, label_every: int = 5
) -> SafeString:
    """Columns of ``(unix time, count)`` points, oldest left; times labelled HH:MM UTC."""
    top_value = _nice_max(max((count for _, count in points), default=0))
    widest = max(len(_number(top_value * f)) for f in (0, 0.5, 1))
    # The axis's numbers end 6 units before it.
    left = max(44, math.ceil(widest * PHONE_TEXT["columns"] * GLYPH) + 8)
    bottom, top, right = 24, 16, 8
    plot_w, plot_h = width - left - right, height - top - bottom
    parts = [
        f'<svg class="chart columns" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="requests over time" xmlns="http://www.w3.org/2000/svg">'
    ]
    for fraction in (0, 0.5, 1):
        y = top + plot_h * (1 - fraction)
        parts.append(
            f'<line class="grid-line" x1="{left}" x2="{width - right}" y1="{y}" y2="{y}"/>'
        )
        parts.append(
            f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">'
            f"{_number(top_value * fraction)}</text>"
        )
    slot = plot_w / max(1, len(points))
    for index, (start, count) in enumerate(points):
        bar_h = plot_h * count / top_value
        x = left + index * slot + slot * 0.15
        y = top + plot_h - bar_h
        when = datetime.fromtimestamp(start, UTC).strftime("%H:%M")
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{slot * 0.7:.1f}" '
            f'height="{bar_h:.1f}"><title>{when} UTC: {count}</title></rect>'
        )
        if index % label_every == 0:
            # The first time starts at its column: centred, it ran under the axis's 0.
            at, anchor = (x, "start") if index == 0 else (x + slot * 0.35, "middle")
            parts.append(
                f'<text x="{at:.1f}" y="{height - 6}" text-anchor="{anchor}">{when}</text>'
            )
    parts.append(
        f'<line class="axis" x1="{left}" x2="{width - right}" y1="{top + plot_h}" '
        f'y2="{top + plot_h}"/></svg>'
    )
    return mark_safe("".join(parts))  # noqa: S308 (numbers and escaped text only)


def bar_chart(
    rows: list[tuple[str, float]], *, unit: str = "", width: int = 460, row_height: int = 26
) -> SafeString:
    """Horizontal bars of ``(label, value)`` rows, largest first as given.

    Labels are cut (with an ellipsis) to what fits in 45 % of the width; the label and
    value columns widen from their usual 150 and 70 units for longer text.
    """
    glyph = PHONE_TEXT["bars"] * GLYPH
    fits = int((width * 0.45 - 8) / glyph)  # characters of a label
    shown = [label if len(label) <= fits else label[: fits - 1] + "…" for label, _ in rows]
    values = [f"{_number(value)}{unit}" for _, value in rows]
    label_w = max(150, math.ceil(max(map(len, shown), default=0) * glyph) + 8)
    right = max(70, math.ceil(max(map(len, values), default=0) * glyph) + 8)
    height = max(1, len(rows)) * row_height + 8
    top_value = max((value for _, value in rows), default=0) or 1.0
    plot_w = width - label_w - right
    parts = [
        f'<svg class="chart bars" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="bar chart" xmlns="http://www.w3.org/2000/svg">'
    ]
    for index, (label, value) in enumerate(rows):
        y = 4 + index * row_height
        bar_w = max(1.0, plot_w * value / top_value)
        parts.append(
            f'<text x="{label_w - 8}" y="{y + row_height * 0.62:.1f}" text-anchor="end">'
            f"{escape(shown[index])}<title>{escape(label)}</title></text>"
        )
        parts.append(
            f'<rect class="bar alt" x="{label_w}" y="{y + 4}" width="{bar_w:.1f}" '
            f'height="{row_height - 8}" rx="3"/>'
        )
        parts.append(
            f'<text x="{label_w + bar_w + 6:.1f}" y="{y + row_height * 0.62:.1f}">'
            f"{escape(values[index])}</text>"
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 (numbers and escaped text only)
