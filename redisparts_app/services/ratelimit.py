"""Rate limits: at most ``limit`` events per ``window`` seconds for each subject.

Import: ``from redisparts_app.services.ratelimit import RateLimit``.

``RateLimit("login", 10, 60).hit(subject)`` (``await ....ahit(subject)`` on asyncio, given
a redis.asyncio client or none) admits or refuses one event with one script
call (``lua/rate_limit.lua``): a sliding log of the admitted events' times, on the
server's clock, so the limit holds in every window of ``window`` seconds (a fixed-window
counter lets twice the limit through around a window boundary) and web servers with
skewed clocks count alike. Refused events are not recorded, so a client hammering a
limit does not push its own Retry-After further.

The subject (an account name and address, a user name...) may be any string: it is
hashed into the key, so no input reaches key syntax. One key per scope and subject, so
the check stays in one Redis Cluster slot::

    rp:ratelimit:{<scope>/<sha256 of subject, 32 hex digits>}   zset event id -> time, µs

The key expires ``window`` after the last admitted event. Memory is at most ``limit``
entries per active subject.
"""

import hashlib
import os
import re
from dataclasses import dataclass

from .. import faces
from ..connection import Client
from ..exceptions import InvalidArgument, InvalidArgumentType
from ..keys import make_key
from ..validation import check_count, check_seconds

__all__ = [
    "Decision",
    "RateLimit",
]

COMPONENT = "ratelimit"
_SCOPE_RE = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
# A day: longer windows would keep a log of every event of the day per subject.
MAX_WINDOW = 86_400.0


@dataclass(frozen=True)
class Decision:
    """The outcome of one ``hit``."""

    allowed: bool
    # Events still admitted in the current window (0 when refused).
    remaining: int
    # Seconds until an event would be admitted again (0.0 when allowed).
    retry_after: float


class RateLimit:
    """At most ``limit`` events per ``window`` seconds per subject, within ``scope``."""

    def __init__(
        self, scope: str, limit: int, window: float, *, client: Client | None = None
    ) -> None:
        if not isinstance(scope, str) or not _SCOPE_RE.match(scope):
            raise InvalidArgument(
                "rate limit scope", scope, "must be a lower-case identifier (a-z, 0-9, _ -)"
            )
        check_count(limit, "rate limit")
        window = check_seconds(window, "rate limit window", maximum=MAX_WINDOW)
        self.scope, self.limit, self.window = scope, limit, float(window)
        self.client, self.aclient = faces.clients(client)

    def key(self, subject: str) -> str:
        """The Redis key of ``subject``'s log; TypeError for a non-string subject."""
        if not isinstance(subject, str):
            raise InvalidArgumentType(
                "rate limit subject", subject, f"must be a string, got {type(subject).__name__}"
            )
        digest = hashlib.sha256(subject.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return make_key(COMPONENT, f"{self.scope}/{digest}")

    def hit(self, subject: str) -> Decision:
        """Record one event of ``subject`` if the limit allows it; say whether it did."""
        return faces.run(self._hit(subject), self.client)

    async def ahit(self, subject: str) -> Decision:
        """The async twin of ``hit``."""
        return await faces.arun(self._hit(subject), self.aclient)

    def _hit(self, subject: str) -> faces.Op:
        key = self.key(subject)
        args = [self.limit, round(self.window * 1_000_000), os.urandom(8).hex()]
        return faces.script("rate_limit", [key], args, then=_decision)


def _decision(reply: list[int]) -> Decision:
    admitted, value = reply
    if admitted:
        return Decision(True, int(value), 0.0)
    return Decision(False, 0, int(value) / 1_000_000)
