"""Stats page: request counters and view response times as server-drawn SVG charts, the
slowest views, the recent and common logs the site writes to Redis, and the market's
figures copied into the database (marketplace.summary)."""

import time
from datetime import UTC, datetime

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from redisparts_app.services.counters import get_counter
from redisparts_app.services.logs import common, recent
from redisparts_app.services.stats import ACCESS_TIME, get_stats, slowest_views

from ..charts import bar_chart, column_chart
from ..models import MarketSummary
from ..summary import SUMMARY
from .errors import bad_request

# (counter precision in seconds, buckets shown, label every n-th bucket)
RANGES = {
    "hour": (60, 60, 10, "the last hour, per minute"),
    "day": (3600, 24, 4, "the last day, per hour"),
    "minutes": (5, 60, 12, "the last 5 minutes, per 5 seconds"),
}
LOGS = ("marketplace", "django")
SEVERITIES = ("info", "warning", "error")
SLOWEST = 10


def _series(name: str, precision: int, buckets: int, now: float) -> list[tuple[int, int]]:
    """The counter's last ``buckets`` buckets, empty ones as zero."""
    counts = dict(get_counter(name, precision))
    last = int(now // precision) * precision
    first = last - precision * (buckets - 1)
    return [(start, counts.get(start, 0)) for start in range(first, last + 1, precision)]


@login_required
@require_GET
def stats(request: HttpRequest) -> HttpResponse:
    span = request.GET.get("range", "hour")
    log = request.GET.get("log", "marketplace")
    severity = request.GET.get("severity", "info")
    if span not in RANGES or log not in LOGS or severity not in SEVERITIES:
        return bad_request(
            request,
            f"Choose a range of {', '.join(RANGES)}, a log of {', '.join(LOGS)} "
            f"and a severity of {', '.join(SEVERITIES)}.",
            back="/stats/",
        )
    precision, buckets, label_every, span_text = RANGES[span]
    now = time.time()
    requests = _series("requests", precision, buckets, now)
    errors = [
        (status, sum(count for _, count in _series(f"responses-{status}", precision, buckets, now)))
        for status in ("2xx", "3xx", "4xx", "5xx")
    ]
    # The site's own views: the admin's pages are timed too, but are not the public's business.
    slowest = [row for row in slowest_views(4 * SLOWEST) if not row[0].startswith("admin")]
    slowest = slowest[:SLOWEST]
    timings = []
    for view, _mean in slowest:
        s = get_stats(view, ACCESS_TIME)
        if s is not None:
            timings.append(
                {
                    "view": view,
                    "count": s.count,
                    "mean_ms": s.mean * 1000,
                    "max_ms": s.max * 1000,
                    "stddev_ms": s.stddev * 1000,
                }
            )
    context = {
        "span": span,
        "span_text": span_text,
        "ranges": list(RANGES),
        "requests_chart": column_chart(requests, label_every=label_every),
        "requests_total": sum(count for _, count in requests),
        "statuses": errors,
        "status_chart": bar_chart([(f"{status} responses", n) for status, n in errors]),
        "slowest_chart": bar_chart([(view, mean * 1000) for view, mean in slowest], unit=" ms")
        if slowest
        else None,
        "timings": timings,
        "log": log,
        "severity": severity,
        "logs": LOGS,
        "severities": SEVERITIES,
        "recent": [
            {"time": datetime.fromtimestamp(entry.time, UTC), "message": entry.message}
            for entry in recent(log, severity, limit=20)
        ],
        "common": common(log, severity, limit=10),
        "market_summary": MarketSummary.objects.filter(name=SUMMARY).first(),
    }
    return render(request, "marketplace/stats.html", context)
