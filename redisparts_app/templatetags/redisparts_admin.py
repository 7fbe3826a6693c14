"""Template helpers of the Redis parts admin: times in seconds since the epoch, task arguments.

Use: ``{% load redisparts_admin %}`` in a template.
"""

import datetime
import json
from typing import Any

from django import template

__all__ = [
    "arguments",
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
