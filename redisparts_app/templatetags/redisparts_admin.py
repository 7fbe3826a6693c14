"""Template helpers of the Redis parts admin: times in seconds since the epoch, task arguments,
amounts in cents.

Use: ``{% load redisparts_admin %}`` in a template.
"""

import datetime
import json
from typing import Any

from django import template

__all__ = [
    "arguments",
    "cents",
    "duration",
    "seconds_since",
    "seconds_until",
    "timestamp",
]

register = template.Library()


@register.filter
def timestamp(value: float | None) -> str:
    """Format seconds since the epoch as a UTC date and time ("—" for None)."""
    if value is None:
        return "—"
    moment = datetime.datetime.fromtimestamp(float(value), tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


@register.filter
def arguments(task: Any) -> str:
    """A task's arguments as compact JSON: ``[args] {kwargs}``."""
    text = json.dumps(task.args, ensure_ascii=False)
    if task.kwargs:
        text += " " + json.dumps(task.kwargs, ensure_ascii=False)
    return text


@register.filter
def cents(value: int) -> str:
    """An amount in cents as units with two decimals and thousands separators: 1,234.50."""
    units, rest = divmod(int(value), 100)
    return f"{units:,}.{rest:02d}"


_UNITS = [("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)]


@register.filter
def duration(seconds: int) -> str:
    """Whole seconds as a person says them: 18000 -> "5 hours", 90 -> "90 seconds".

    The largest unit that divides ``seconds`` exactly, so nothing is rounded away.
    """
    seconds = int(seconds)
    for unit, size in _UNITS:
        if seconds and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{seconds} seconds"


def _span(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


@register.simple_tag
def seconds_until(moment: float | None, now: float) -> str:
    """Time from ``now`` to ``moment``: "in 3.0 s", or "overdue by 3.0 s" once past."""
    if moment is None:
        return "—"
    left = moment - now
    return f"in {_span(left)}" if left >= 0 else f"overdue by {_span(left)}"


@register.simple_tag
def seconds_since(moment: float | None, now: float) -> str:
    """Time from ``moment`` to ``now``."""
    return "—" if moment is None else _span(now - moment)
