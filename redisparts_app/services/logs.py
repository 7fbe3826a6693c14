"""Recent and common logs in Redis, and a logging.Handler that feeds them.

Import: ``from redisparts_app.services.logs import log_recent, log_common, RedisLogHandler``.

Per log name and severity: the recent log keeps the newest ``LOG_RECENT_LIMIT`` entries
(time in epoch seconds) and expires ``LOG_RECENT_TTL`` seconds after its last entry; the
common log counts each distinct message during the current UTC hour, and the first entry
of a new hour moves the counts to ``:last`` in the same Lua script. Keys (one hash tag per
log name, so each script stays in one Cluster slot)::

    rp:log:{<name>}:recent:<severity>          list of JSON entries, newest first
    rp:log:{<name>}:common:<severity>          zset message -> count, current hour
    rp:log:{<name>}:common:<severity>:last     zset, previous hour
    rp:log:{<name>}:common:<severity>:start    hour start (epoch seconds) of the zset
    rp:log:{<name>}:common:<severity>:pstart   hour start of :last

Guarantee: the rotation is atomic; every write is one round trip; messages longer than
``LOG_MAX_MESSAGE_LENGTH`` are cut, not refused. ``RedisLogHandler`` never raises into the
code that logs (``Handler.handleError``). Every function has an async twin named with an
``a`` on the same core (``faces``).
"""

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .. import faces
from ..conf import positive_int_setting
from ..connection import Client, resolve_client
from ..exceptions import InvalidArgument, InvalidArgumentType
from ..keys import make_key
from ..validation import check_key_part, check_optional_count
from . import registry

__all__ = [
    "SEVERITIES",
    "LogEntry",
    "RedisLogHandler",
    "acommon",
    "alog_common",
    "alog_recent",
    "arecent",
    "common",
    "log_common",
    "log_recent",
    "normalize_severity",
    "recent",
]

SEVERITIES = ("debug", "info", "warning", "error", "critical")
_LEVELS = (
    (logging.CRITICAL, "critical"),
    (logging.ERROR, "error"),
    (logging.WARNING, "warning"),
    (logging.INFO, "info"),
)
_ALIASES = {"warn": "warning", "fatal": "critical"}
HOUR = 3600
# The :last zset must outlive the whole next hour: two hours after the last write.
COMMON_TTL = 2 * HOUR


@dataclass(frozen=True)
class LogEntry:
    """One recent-log entry: ``time`` in epoch seconds and the message."""

    time: float
    message: str


def normalize_severity(severity: int | str) -> str:
    """Return the severity name for a logging level or a name, or raise InvalidArgument.

    Levels between the standard ones round down (25 -> "info", 5 -> "debug").
    """
    if isinstance(severity, bool) or not isinstance(severity, int | str):
        raise InvalidArgumentType(
            "severity", severity, f"must be a logging level or one of {', '.join(SEVERITIES)}"
        )
    if isinstance(severity, int):
        return next((name for level, name in _LEVELS if severity >= level), "debug")
    if isinstance(severity, str):
        name = severity.strip().lower()
        name = _ALIASES.get(name, name)
        if name in SEVERITIES:
            return name
    raise InvalidArgument(
        "severity", severity, f"must be a logging level or one of {', '.join(SEVERITIES)}"
    )


def log_recent(
    name: str,
    message: str,
    severity: int | str = logging.INFO,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> None:
    """Push ``message`` onto the recent log of ``name`` and ``severity``.

    Keeps the newest LOG_RECENT_LIMIT entries. One round trip (the log_recent Lua script).
    Keys: rp:log:{name}:recent:<severity>.
    """
    faces.run(_log_recent(name, message, severity, clock), resolve_client(client))


async def alog_recent(
    name: str,
    message: str,
    severity: int | str = logging.INFO,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> None:
    """The async twin of ``log_recent`` (``client``: a redis.asyncio client or None)."""
    await faces.arun(_log_recent(name, message, severity, clock), client)


def _log_recent(
    name: str, message: str, severity: int | str, clock: Callable[[], float]
) -> faces.Steps[None]:
    name, severity, message = _validate(name, severity, message)
    args = [_entry_json(clock(), message), _recent_limit(), _recent_ttl()]
    yield faces.script("log_recent", [_recent_key(name, severity)], args)
    yield from registry.noting("log", name)  # after: a message Redis refused wrote nothing


def log_common(
    name: str,
    message: str,
    severity: int | str = logging.INFO,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> int:
    """Count ``message`` in the common log of this hour and push it onto the recent log.

    The hour comes from ``clock`` (epoch seconds). Return the message's count in the
    current hour. One round trip (the log_common Lua script).
    Keys: rp:log:{name}:common:<severity>[:last|:start|:pstart], rp:log:{name}:recent:<severity>.
    """
    return faces.run(_log_common(name, message, severity, clock), resolve_client(client))


async def alog_common(
    name: str,
    message: str,
    severity: int | str = logging.INFO,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> int:
    """The async twin of ``log_common``."""
    return await faces.arun(_log_common(name, message, severity, clock), client)


def _log_common(
    name: str, message: str, severity: int | str, clock: Callable[[], float]
) -> faces.Steps[int]:
    name, severity, message = _validate(name, severity, message)
    now = clock()
    hour = int(now // HOUR) * HOUR
    common = _common_key(name, severity)
    keys = [common, f"{common}:last", f"{common}:start", f"{common}:pstart"]
    keys.append(_recent_key(name, severity))
    args = [message, hour, _entry_json(now, message), _recent_limit(), COMMON_TTL, _recent_ttl()]
    count = int((yield faces.script("log_common", keys, args)))
    yield from registry.noting("log", name)
    return count


def recent(
    name: str,
    severity: int | str = logging.INFO,
    limit: int | None = None,
    *,
    client: Client | None = None,
) -> list[LogEntry]:
    """Return up to ``limit`` (default all kept) recent entries, newest first."""
    return faces.run(_recent(name, severity, limit), resolve_client(client))


async def arecent(
    name: str,
    severity: int | str = logging.INFO,
    limit: int | None = None,
    *,
    client: Client | None = None,
) -> list[LogEntry]:
    """The async twin of ``recent``."""
    return await faces.arun(_recent(name, severity, limit), client)


def _recent(name: str, severity: int | str, limit: int | None) -> faces.Op:
    name = _validate_name(name)
    severity = normalize_severity(severity)
    limit = check_optional_count(limit, "limit")

    def entries(raw: list[bytes]) -> list[LogEntry]:
        return [LogEntry(time=float(d["t"]), message=d["m"]) for d in map(json.loads, raw)]

    stop = -1 if limit is None else limit - 1
    return faces.command("lrange", _recent_key(name, severity), 0, stop, then=entries)


def common(
    name: str,
    severity: int | str = logging.INFO,
    limit: int | None = None,
    previous: bool = False,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> list[tuple[str, int]]:
    """Return ``(message, count)`` pairs of this hour (or the previous one), most common first.

    The hour comes from ``clock``; a log not written since the hour changed is read as it
    would be after its rotation, so a quiet hour reads as empty. One round trip (a Lua
    script, so a rotation cannot happen between reading the hour and the counts).
    """
    return faces.run(_common(name, severity, limit, previous, clock), resolve_client(client))


async def acommon(
    name: str,
    severity: int | str = logging.INFO,
    limit: int | None = None,
    previous: bool = False,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> list[tuple[str, int]]:
    """The async twin of ``common``."""
    return await faces.arun(_common(name, severity, limit, previous, clock), client)


def _common(
    name: str,
    severity: int | str,
    limit: int | None,
    previous: bool,
    clock: Callable[[], float],
) -> faces.Op:
    name = _validate_name(name)
    severity = normalize_severity(severity)
    limit = check_optional_count(limit, "limit")
    hour = int(clock() // HOUR) * HOUR
    wanted = hour - HOUR if previous else hour
    key = _common_key(name, severity)
    keys = [key, f"{key}:last", f"{key}:start", f"{key}:pstart"]
    stop = -1 if limit is None else limit - 1

    def rows(raw: list[bytes]) -> list[tuple[str, int]]:
        pairs = zip(raw[::2], raw[1::2], strict=True)
        return [(member.decode(), int(score)) for member, score in pairs]

    return faces.script("log_common_read", keys, [wanted, stop], then=rows)


class RedisLogHandler(logging.Handler):
    """Send log records to the recent log (and, with ``common=True``, the common log).

    ``name`` is the log name (a key part, e.g. "django"); the record's level picks the
    severity; the message is the handler's formatted record. Usable from Django's
    ``LOGGING``::

        "handlers": {"redis": {"class": "redisparts_app.services.logs.RedisLogHandler",
                               "name": "django", "level": "WARNING"}}

    ``client`` defaults to ``get_redis()`` at each record, so settings changes apply.
    Each record costs one round trip in the thread that logs; with Redis unreachable a
    log call waits at most the client's connect timeout, then goes to handleError.

    It stays sync: ``logging`` calls ``emit`` inside the code that logs, which cannot
    await it. In an event loop a record therefore holds the loop for its round trip;
    asyncio code that logs much puts the handler behind a ``logging.handlers.QueueHandler``
    so a ``QueueListener``'s thread does the writing.
    """

    # Per thread: set while emit() talks to Redis, so records logged meanwhile
    # (by redis-py, django-redis or another handler) are dropped, not re-entered.
    _busy = threading.local()

    def __init__(
        self,
        name: str = "django",
        level: int | str = logging.NOTSET,
        *,
        common: bool = True,
        client: Client | None = None,
    ) -> None:
        super().__init__(level)
        self.log_name = check_key_part(name, "log name")
        self.common = common
        self.client = client

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(self._busy, "active", False):
            return
        self._busy.active = True
        try:
            write = log_common if self.common else log_recent
            write(
                self.log_name,
                self.format(record),
                record.levelno,
                client=self.client,
                clock=lambda: record.created,
            )
        except Exception:
            self.handleError(record)
        finally:
            self._busy.active = False


def _validate(name: str, severity: int | str, message: str) -> tuple[str, str, str]:
    name = _validate_name(name)
    severity = normalize_severity(severity)
    if not isinstance(message, str):
        raise InvalidArgumentType(
            "message", message, f"must be a string, got {type(message).__name__}", show_value=False
        )
    limit = positive_int_setting("LOG_MAX_MESSAGE_LENGTH")
    if len(message) > limit:
        message = message[: limit - 1] + "…"
    return name, severity, message


def _validate_name(name: str) -> str:
    return check_key_part(name, "log name")


def _recent_limit() -> int:
    return positive_int_setting("LOG_RECENT_LIMIT")


def _recent_ttl() -> int:
    return positive_int_setting("LOG_RECENT_TTL")


def _entry_json(now: float, message: str) -> str:
    return json.dumps({"t": now, "m": message}, ensure_ascii=False)


def _recent_key(name: str, severity: str) -> str:
    return make_key("log", name, "recent", severity)


def _common_key(name: str, severity: str) -> str:
    return make_key("log", name, "common", severity)
