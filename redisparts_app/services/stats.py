"""Running statistics per hour (count, sum, sum of squares, min, max) and response times.

Import: ``from redisparts_app.services.stats import update_stats, record_access_time``.

``update_stats("checkout", "amount", 12.5)`` adds a value to the statistics of the current
clock hour (UTC hours from the epoch); ``get_stats("checkout", "amount")`` returns a
``Stats`` with ``mean``, ``stddev`` (sample, n - 1) and ``pstddev`` (population). Values
are finite floats of magnitude at most 1e100. Keys::

    rp:stats:{<context>}:<kind>         hash hour, count, sum, sumsq, min, max (this hour)
    rp:stats:{<context>}:<kind>:last    the same for the previous hour
    rp:stats_rank:{access_time}:slowest zset view -> average response time this hour

Guarantee: an update is one Lua script (``stats_update``), which moves the previous hour to
``:last`` when the hour changed and updates every field atomically, in one round trip;
both hashes expire two hours after their last update. ``access_time(view)`` and
``ResponseTimeMiddleware`` record response times (seconds) under the kind ``access_time``
and never raise a Redis error (it is logged and dropped). Every function has an async twin
named with an ``a`` on the same core (``faces``).
"""

import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass

import redis

from .. import faces
from ..conf import positive_int_setting
from ..connection import Client, resolve_client
from ..keys import make_key
from ..validation import check_count, check_key_part, check_number
from . import registry

__all__ = [
    "Stats",
    "aaccess_time",
    "access_time",
    "aget_stats",
    "arecord_access_time",
    "aslowest_views",
    "aupdate_stats",
    "get_stats",
    "record_access_time",
    "slowest_views",
    "stats_context",
    "stats_key",
    "update_stats",
]

logger = logging.getLogger("redisparts.stats")

HOUR = 3600
# :last must outlive the whole next hour: two hours after the last write.
STATS_TTL = 2 * HOUR
MAX_VALUE = 1e100
ACCESS_TIME = "access_time"


@dataclass(frozen=True)
class Stats:
    """Statistics of one hour; ``hour`` is its start in epoch seconds."""

    hour: int
    count: int
    sum: float
    sumsq: float
    min: float
    max: float

    @property
    def mean(self) -> float:
        return self.sum / self.count

    @property
    def stddev(self) -> float:
        """Sample standard deviation (n - 1); 0 for a single value."""
        if self.count < 2:
            return 0.0
        return math.sqrt(self._squares() / (self.count - 1))

    @property
    def pstddev(self) -> float:
        """Population standard deviation (n)."""
        return math.sqrt(self._squares() / self.count)

    def _squares(self) -> float:
        # Rounding can push the difference slightly below zero.
        return max(0.0, self.sumsq - self.sum * self.sum / self.count)


def update_stats(
    context: str,
    kind: str,
    value: float,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> Stats:
    """Add ``value`` to the statistics of ``context``/``kind`` for this hour; return them.

    The hour comes from ``clock`` (epoch seconds). One round trip (a Lua script).
    """
    return faces.run(_update_stats(context, kind, value, clock), resolve_client(client))


async def aupdate_stats(
    context: str,
    kind: str,
    value: float,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> Stats:
    """The async twin of ``update_stats`` (``client``: a redis.asyncio client or None)."""
    return await faces.arun(_update_stats(context, kind, value, clock), client)


def _update_stats(
    context: str, kind: str, value: float, clock: Callable[[], float]
) -> faces.Steps[Stats]:
    context, kind = _validate_names(context, kind)
    value = check_number(value, "value", minimum=-MAX_VALUE, maximum=MAX_VALUE)
    hour = int(clock() // HOUR) * HOUR
    key = stats_key(context, kind)
    args = [repr(value), repr(value * value), hour, STATS_TTL]
    stats = yield faces.script("stats_update", [key, f"{key}:last"], args, then=_parse)
    yield from registry.noting("stats", f"{context}:{kind}")
    return stats


def get_stats(
    context: str,
    kind: str,
    *,
    previous: bool = False,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> Stats | None:
    """Return the statistics of this hour (or the previous one), or None when there are none.

    The hour comes from ``clock``; statistics not updated since the hour changed are read
    as they would be after their rollover. One round trip (a Lua script).
    """
    return faces.run(_get_stats(context, kind, previous, clock), resolve_client(client))


async def aget_stats(
    context: str,
    kind: str,
    *,
    previous: bool = False,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> Stats | None:
    """The async twin of ``get_stats``."""
    return await faces.arun(_get_stats(context, kind, previous, clock), client)


def _get_stats(context: str, kind: str, previous: bool, clock: Callable[[], float]) -> faces.Op:
    context, kind = _validate_names(context, kind)
    hour = int(clock() // HOUR) * HOUR
    wanted = hour - HOUR if previous else hour
    key = stats_key(context, kind)
    return faces.script(
        "stats_read", [key, f"{key}:last"], [wanted], then=lambda raw: _parse(raw) if raw else None
    )


def record_access_time(
    view: str,
    seconds: float,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> Stats:
    """Record one response time of ``view`` and rank the view by its average this hour.

    Two round trips: the statistics script, then the ranking (another Cluster slot).
    """
    return faces.run(_record_access_time(view, seconds, clock), resolve_client(client))


async def arecord_access_time(
    view: str,
    seconds: float,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> Stats:
    """The async twin of ``record_access_time``."""
    return await faces.arun(_record_access_time(view, seconds, clock), client)


def _record_access_time(
    view: str, seconds: float, clock: Callable[[], float]
) -> faces.Steps[Stats]:
    check_number(seconds, "seconds", minimum=0)
    stats = yield from _update_stats(view, ACCESS_TIME, seconds, clock)
    ranking = _slowest_key()
    # Not MULTI: Cluster clients refuse it; a trim that runs late only trims later.
    yield faces.pipeline(
        [
            faces.command("zadd", ranking, {stats_context(view): stats.mean}),
            faces.command(
                "zremrangebyrank", ranking, 0, -positive_int_setting("SLOWEST_VIEWS_LIMIT") - 1
            ),
        ]
    )
    return stats


def _recording(view: str, seconds: float, clock: Callable[[], float]) -> faces.Steps[None]:
    """The core of ``access_time``: record, and log a Redis error rather than raise it."""
    try:
        yield from _record_access_time(view, seconds, clock)
    except redis.RedisError as exc:
        logger.warning("response time of %s not recorded: %s", view, exc)


def slowest_views(limit: int = 10, *, client: Client | None = None) -> list[tuple[str, float]]:
    """Return ``(view, average seconds)`` pairs, slowest first."""
    return faces.run(_slowest_views(limit), resolve_client(client))


async def aslowest_views(
    limit: int = 10, *, client: Client | None = None
) -> list[tuple[str, float]]:
    """The async twin of ``slowest_views``."""
    return await faces.arun(_slowest_views(limit), client)


def _slowest_views(limit: int) -> faces.Op:
    check_count(limit, "limit")
    return faces.command(
        "zrevrange",
        _slowest_key(),
        0,
        limit - 1,
        withscores=True,
        then=lambda rows: [(member.decode(), float(score)) for member, score in rows],
    )


@contextmanager
def access_time(
    view: str,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
    timer: Callable[[], float] = time.perf_counter,
) -> Iterator[None]:
    """Time the block (or, as a decorator, each call) and record it for ``view``.

    ``timer`` measures the duration (seconds); ``clock`` picks the hour. The time is
    recorded even when the block raises. A Redis error while recording is logged at
    WARNING and dropped, so a Redis outage never breaks the timed code.
    """
    view = stats_context(view)
    start = timer()
    try:
        yield
    finally:
        elapsed = max(0.0, timer() - start)
        faces.run(_recording(view, elapsed, clock), resolve_client(client))


@asynccontextmanager
async def aaccess_time(
    view: str,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
    timer: Callable[[], float] = time.perf_counter,
) -> AsyncIterator[None]:
    """The async twin of ``access_time``: ``async with aaccess_time(view):``, or as a
    decorator of an ``async def``."""
    view = stats_context(view)
    start = timer()
    try:
        yield
    finally:
        elapsed = max(0.0, timer() - start)
        await faces.arun(_recording(view, elapsed, clock), client)


def stats_context(name: str) -> str:
    """Return ``name`` validated as a statistics context, or raise InvalidArgument."""
    return check_key_part(name, "statistics context")


def stats_key(context: str, kind: str) -> str:
    """Return the hash key of ``context``/``kind`` (both already validated)."""
    return make_key("stats", context, kind)


def _slowest_key() -> str:
    """Return the key of the slowest-views ranking."""
    return make_key("stats_rank", ACCESS_TIME, "slowest")


def _validate_names(context: str, kind: str) -> tuple[str, str]:
    context = stats_context(context)
    return context, check_key_part(kind, "statistics kind")


def _parse(raw: list[bytes]) -> Stats:
    """The Stats of a script's reply: field, value, field, value, ..."""
    fields = dict(zip(raw[::2], raw[1::2], strict=True))
    return Stats(
        hour=int(fields[b"hour"]),
        count=int(fields[b"count"]),
        sum=float(fields[b"sum"]),
        sumsq=float(fields[b"sumsq"]),
        min=float(fields[b"min"]),
        max=float(fields[b"max"]),
    )
