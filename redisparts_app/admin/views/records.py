"""Counters and the slowest views as charts, hourly statistics, recent and common logs."""

import time
from typing import TYPE_CHECKING

from django.contrib import messages
from django.http import HttpRequest, HttpResponse

from ...conf import app_settings
from ...exceptions import RedisPartsError
from ...services import counters, listings, logs, stats
from ...templatetags.redisparts_admin import duration
from ..charts import bar_chart
from .paging import COUNTERS_PER_PAGE, LOG_NAMES_PER_PAGE, cursor_page, int_param

__all__ = [
    "COMMON_LOGS_SHOWN",
    "RECENT_LOGS_SHOWN",
    "SLOWEST_VIEWS_SHOWN",
    "counter_charts",
    "hourly_stats",
    "log_entries",
]

if TYPE_CHECKING:
    from .. import RedisPartsAdmin

RECENT_LOGS_SHOWN = 50  # at most; LOG_RECENT_LIMIT may keep fewer
COMMON_LOGS_SHOWN = 20
SLOWEST_VIEWS_SHOWN = 20


def counter_charts(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    start = int_param(request, "start")
    known, total = listings.counter_page(start, COUNTERS_PER_PAGE)
    chosen = request.GET.get("name") or (next(iter(known), None))
    precisions = counters.precisions()
    precision = int_param(request, "precision", precisions[0])
    if precision not in precisions:
        precision = precisions[0]
    chart = None
    if chosen:
        try:
            samples = counters.get_counter(chosen, precision)
        except (RedisPartsError, ValueError) as exc:
            messages.error(request, str(exc))
            samples, chosen = [], None
        points = [(time.strftime("%H:%M:%S", time.gmtime(s)), v) for s, v in samples]
        chart = bar_chart(points, title=f"{chosen} per {duration(precision)}")
    following = start + COUNTERS_PER_PAGE
    return model_admin.render(
        request,
        "counters.html",
        {
            "title": "Counters",
            "known": known,
            "chosen": chosen,
            "precision": precision,
            "precisions": precisions,
            "chart": chart,
            "start": start,
            "next_start": following if following < total else None,
            "previous_start": max(0, start - COUNTERS_PER_PAGE) if start else None,
            "total": total,
        },
    )


def hourly_stats(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    rows = []
    for context, kind in listings.stats_entries():
        current = stats.get_stats(context, kind)
        previous = stats.get_stats(context, kind, previous=True)
        rows.append({"context": context, "kind": kind, "now": current, "last": previous})
    slowest = stats.slowest_views(SLOWEST_VIEWS_SHOWN)
    chart = bar_chart(
        [(view, seconds * 1000) for view, seconds in slowest],
        title="Average response time this hour, slowest views",
        unit=" ms",
    )
    return model_admin.render(
        request,
        "stats.html",
        {"title": "Statistics", "rows": rows, "slowest": slowest, "chart": chart},
    )


# The severities the Logs page looks through for a view with entries, most usual first.
_OPENING_SEVERITIES = ("info", "warning", "error", "critical", "debug")


def _opening_view(
    names: list[str], name: str | None, severity: str | None
) -> tuple[str | None, str]:
    """The log and severity to show when the request names only one or neither: the
    first with recent entries (of ``names`` when no log is named), so the page does not
    open on an empty view while something is logged elsewhere."""
    for candidate_severity in [severity] if severity else _OPENING_SEVERITIES:
        for candidate in [name] if name else names:
            try:
                if logs.recent(candidate, candidate_severity, 1):
                    return candidate, candidate_severity
            except (RedisPartsError, ValueError):
                break  # a bad name: shown with its error below
    return name or (names[0] if names else None), severity or "info"


def log_entries(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    names, pager = cursor_page(request, listings.log_page, LOG_NAMES_PER_PAGE)
    name = request.GET.get("name") or None
    severity = request.GET.get("severity")
    if severity not in logs.SEVERITIES:
        severity = None
    if not (name and severity):
        name, severity = _opening_view(names, name, severity)
    recent, common, error = [], [], None
    if name:
        try:
            limit = min(RECENT_LOGS_SHOWN, int(app_settings.LOG_RECENT_LIMIT))
            recent = logs.recent(name, severity, limit)
            common = logs.common(name, severity, COMMON_LOGS_SHOWN)
        except (RedisPartsError, ValueError) as exc:
            error = str(exc)
    return model_admin.render(
        request,
        "logs.html",
        {
            "title": "Logs",
            "names": names,
            "name": name,
            "severity": severity,
            "severities": logs.SEVERITIES,
            "recent": recent,
            "common": common,
            "error": error,
            **pager,
        },
    )
