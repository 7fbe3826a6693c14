"""Record every view's response time in the hourly statistics, ranked by slowest view.

Add after the middleware that may answer early, so the time covers the view::

    MIDDLEWARE = [..., "redisparts_app.middleware.RedisUnavailableMiddleware",
                  "redisparts_app.timing.ResponseTimeMiddleware"]

The view name is ``request.resolver_match.view_name`` (``"shop:cart"``, or the dotted path
of an unnamed view) with ``:`` written as ``.``; requests that resolve to no view (404s
from the URL resolver) are not recorded. Times are seconds, measured with
``time.perf_counter`` around the rest of the middleware chain and the view, and stored by
``services.stats.record_access_time`` (keys rp:stats:{<view>}:access_time and
rp:stats_rank:{access_time}:slowest). A Redis failure while recording is logged at
WARNING and the response goes out unchanged; with Redis unreachable each request waits at
most the client's connect timeout.
"""

import logging
import time

import redis

from .exceptions import InvalidStatistic
from .services.stats import record_access_time, stats_context

logger = logging.getLogger("redisparts.stats")


class ResponseTimeMiddleware:
    """Time each resolved request and record it per view; never turns a response into an error."""

    # Seconds from an arbitrary origin; a subclass may swap it (tests step it by hand).
    timer = staticmethod(time.perf_counter)

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        start = self.timer()
        response = self.get_response(request)
        elapsed = self.timer() - start
        match = getattr(request, "resolver_match", None)
        if match is not None:
            self.record(match.view_name.replace(":", "."), elapsed)
        return response

    def record(self, view: str, seconds: float) -> None:
        try:
            record_access_time(stats_context(view), seconds)
        except InvalidStatistic as exc:
            logger.debug("response time not recorded: %s", exc)
        except redis.RedisError as exc:
            logger.warning("response time of %s not recorded: %s", view, exc)
