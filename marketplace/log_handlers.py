"""The site's log handler: the recent and common logs in Redis, one quiet line on failure."""

import logging
import sys
import time

from redisparts_app.services.logs import RedisLogHandler


class SiteLogHandler(RedisLogHandler):
    """``RedisLogHandler`` that reports a failed write as one line on stderr, at most once
    every ``quiet_seconds``, instead of a traceback per record: with Redis down every 503
    is logged, and the page already says what happened."""

    quiet_seconds = 30.0

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._last_report = float("-inf")

    def handleError(self, record: logging.LogRecord) -> None:
        now = time.monotonic()
        if now - self._last_report < self.quiet_seconds:
            return
        self._last_report = now
        error = sys.exc_info()[1]
        sys.stderr.write(f"log {self.log_name!r} not written to Redis: {error}\n")
