"""Counting semaphores: at most ``limit`` holders of a named resource at once.

Import: ``from redisparts_app.services.semaphores import Semaphore, FairSemaphore``.

``Semaphore`` stamps permits with the caller's clock (cheap, but a host whose clock runs
ahead can take another's slot); ``FairSemaphore`` with the server's (TIME inside its
scripts) and a ticket counter, so no client clock is trusted. Acquire, refresh and
release are one Lua script each: count and insert are atomic, the race the book closes
with a lock does not exist.

Keys, all with the hash tag ``{name}``: ``<prefix>:semaphore:{name}:holders`` (holder id
→ deadline, ms), ``:info`` (holder id → its record; ``limit``), ``:counter`` (fair
tickets, no TTL) and ``:wake`` (one token per freed slot). All but the counter expire
once every permit has.

Guarantee: at most ``limit`` live permits per name (for ``Semaphore``, as the callers'
clocks judge). A permit lives ``timeout`` seconds after its acquire or last refresh, so
a crashed holder frees its slot; a holder paused longer loses it, which ``refresh``
(False) and ``hold`` (``SemaphoreLost``) tell it. Waiters block in BLPOP, not polling.
"""

import json
import logging
import os
import time
import unicodedata
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

from .. import faces, keys, lua
from ..connection import Client, resolve_client
from ..exceptions import (
    InvalidArgument,
    InvalidArgumentType,
    SemaphoreFull,
    SemaphoreLost,
    SemaphoreTimeout,
)
from ..validation import check_count, check_seconds, check_token, to_ms
from . import registry

__all__ = [
    "FairSemaphore",
    "Holder",
    "Semaphore",
    "aholders",
    "force_release",
    "holders",
    "holders_key",
    "semaphore_names",
]

COMPONENT = "semaphore"
MAX_LIMIT = 1_000_000
MAX_TIMEOUT = 86_400.0  # seconds; longer work should refresh its permit
MAX_REASON_LENGTH = 200
# Back-off between tries while waiting, in seconds. The ceiling stays below common
# socket timeouts, since the wait is a blocking BLPOP on the client's connection.
MIN_BACKOFF = 0.01
MAX_BACKOFF = 0.2

_ROLES = ("holders", "info", "counter", "wake")
# How long the wake token of a force-released permit waits for a waiter, in ms.
_FORCE_RELEASE_WAKE_MS = 10_000

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Holder:
    """One live permit, as shown to the admin.

    ``age`` is seconds since acquire, ``expires_in`` seconds until the permit expires
    unless refreshed; ``ticket`` is the fair semaphore's acquisition number (None for the
    basic kind).
    """

    id: str
    age: float
    expires_in: float
    reason: str
    ticket: int | None


class Semaphore:
    """A timeout-based counting semaphore on the callers' clocks; see the module docstring.

    ``limit`` permits at most; a permit expires ``timeout`` seconds after its acquire or
    last refresh. ``client`` must be a client or cluster client, not a pipeline: every
    call needs its answer at once; or a redis.asyncio client for the async twins
    (``aacquire``, ``arefresh``, ``arelease``, ``async with ahold()``; ``faces.clients``).
    """

    _fair = False
    # The holder id this object handed out last: the common acquire-then-release gives it
    # back as the same object, which needs no check (it is ours by construction).
    _issued: str | None = None

    def __init__(
        self,
        name: str,
        limit: int,
        *,
        timeout: float = 10.0,
        client: Client | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = keys.validate_key_part(name, "semaphore name")
        self.limit = check_count(limit, "limit", maximum=MAX_LIMIT)
        self.timeout = check_seconds(timeout, "timeout", maximum=MAX_TIMEOUT, whole_ms=False)
        self._timeout_ms = to_ms(self.timeout)
        self._clock = clock
        self._keys = {role: keys.make_key(COMPONENT, self.name, role) for role in _ROLES}
        # The KEYS of each script, built once: acquire and release run on hot paths.
        permits = [self._keys["holders"], self._keys["info"]]
        self._acquire_keys = [*permits, self._keys["counter"]] if self._fair else permits
        self._refresh_keys = permits
        self._release_keys = [*permits, self._keys["wake"]]
        self._client, self._aclient = faces.clients(client)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, limit={self.limit}, timeout={self.timeout})"

    def acquire(self, *, wait: float = 0.0, reason: str = "") -> str | None:
        """Take a permit and return its holder id, or None if none freed up within ``wait``.

        ``wait`` is seconds (0: one try); ``reason`` is a short text shown by ``holders``.
        """
        return faces.run(self._acquire(wait, reason, self._client), self._client)

    async def aacquire(self, *, wait: float = 0.0, reason: str = "") -> str | None:
        """The async twin of ``acquire`` (its waits block only this coroutine)."""
        return await faces.arun(self._acquire(wait, reason, self._aclient), self._aclient)

    def _acquire(self, wait: float, reason: str, client: Any) -> faces.Core[str | None]:
        # The common call (no wait, no reason) skips the checks' calls.
        if wait != 0 or type(wait) is not float:
            wait = check_seconds(wait, "wait", allow_zero=True, maximum=MAX_TIMEOUT, whole_ms=False)
        if reason != "":
            reason = _check_reason(reason)
        holder_id = self._issued = os.urandom(16).hex()  # 128 random bits, as hex
        if wait or client is None or not registry.recently_noted(client, COMPONENT, self.name):
            return self._acquiring(holder_id, wait, reason)
        # One try, and the name noted lately on this client: the script alone.
        return faces.script(
            "semaphore_acquire",
            self._acquire_keys,
            self._acquire_args(holder_id, reason),
            then=lambda ticket: holder_id if ticket else None,
        )

    def _acquiring(self, holder_id: str, wait: float, reason: str) -> faces.Steps[str | None]:
        deadline = self._clock() + wait
        backoff = MIN_BACKOFF
        while True:
            args = self._acquire_args(holder_id, reason)
            if (yield faces.script("semaphore_acquire", self._acquire_keys, args)):
                yield from registry.noting(COMPONENT, self.name)  # once it exists
                return holder_id
            remaining = deadline - self._clock()
            if remaining <= 0:
                return None
            # A release wakes one waiter early; the others of this process wait their turn
            # at the BLPOP rather than polling on their own.
            pause = max(MIN_BACKOFF, min(backoff, remaining))
            yield faces.pop_signal(self._keys["wake"], pause, remaining)
            backoff = min(backoff * 2, MAX_BACKOFF)

    def refresh(self, holder_id: str) -> bool:
        """Push the permit's expiry back to ``timeout`` seconds from now.

        Return False, and drop the permit, if it had already expired (or was never held):
        its slot may count another holder by now, so the caller must stop.
        """
        return faces.run(self._refresh(holder_id), self._client)

    async def arefresh(self, holder_id: str) -> bool:
        """The async twin of ``refresh``."""
        return await faces.arun(self._refresh(holder_id), self._aclient)

    def _refresh(self, holder_id: str) -> faces.Op:
        args = [_check_holder_id(holder_id), self._timeout_ms]
        if not self._fair:
            args.append(self._now_ms())
        return faces.script("semaphore_refresh", self._refresh_keys, args, then=bool)

    def release(self, holder_id: str) -> bool:
        """Give the permit back; return False if it had already expired or was never held."""
        return faces.run(self._release(holder_id), self._client)

    async def arelease(self, holder_id: str) -> bool:
        """The async twin of ``release``."""
        return await faces.arun(self._release(holder_id), self._aclient)

    def _release(self, holder_id: str) -> faces.Op:
        if holder_id is not self._issued:  # the id acquire handed out is ours as it is
            holder_id = _check_holder_id(holder_id)
        args = self._release_args(holder_id)
        return faces.script("semaphore_release", self._release_keys, args, then=bool)

    @contextmanager
    def hold(self, *, wait: float = 5.0, reason: str = "") -> Iterator[str]:
        """Hold a permit for the ``with`` block and yield its holder id.

        Raise SemaphoreFull when ``wait`` is 0 and no permit is free, SemaphoreTimeout
        when none freed up within ``wait`` seconds, and SemaphoreLost on leaving the block
        normally if the permit had expired meanwhile (the block outlived ``timeout``).
        """
        started = self._clock()
        holder_id = self.acquire(wait=wait, reason=reason)
        if holder_id is None:
            raise self._not_acquired(wait, started)
        try:
            yield holder_id
        except BaseException:
            self.release(holder_id)
            raise
        if not self.release(holder_id):
            raise SemaphoreLost(self.name, holder_id, self.timeout)

    @asynccontextmanager
    async def ahold(self, *, wait: float = 5.0, reason: str = "") -> AsyncIterator[str]:
        """The async twin of ``hold``: ``async with semaphore.ahold() as holder_id:``."""
        started = self._clock()
        holder_id = await self.aacquire(wait=wait, reason=reason)
        if holder_id is None:
            raise self._not_acquired(wait, started)
        try:
            yield holder_id
        except BaseException:
            await self.arelease(holder_id)
            raise
        if not await self.arelease(holder_id):
            raise SemaphoreLost(self.name, holder_id, self.timeout)

    def _not_acquired(self, wait: float, started: float) -> Exception:
        if wait > 0:
            return SemaphoreTimeout(self.name, self.limit, self._clock() - started)
        return SemaphoreFull(self.name, self.limit)

    def holders(self) -> list[Holder]:
        """Return the live permits, oldest first (see the module function ``holders``)."""
        return faces.run(self._holders(), self._client)

    async def aholders(self) -> list[Holder]:
        """The async twin of ``holders``."""
        return await faces.arun(self._holders(), self._aclient)

    def _holders(self) -> faces.Op:
        return _holders(self.name, None if self._fair else self._clock)

    def _acquire_args(self, holder_id: str, reason: str) -> list[Any]:
        return [holder_id, self.limit, self._timeout_ms, reason, self._now_ms()]

    def _release_args(self, holder_id: str) -> list[Any]:
        # The release script's arguments for a checked holder id; the basic kind adds
        # its clock.
        args = [holder_id, self.limit, self._timeout_ms]
        if not self._fair:
            args.append(self._now_ms())
        return args

    def _now_ms(self) -> int:
        # The scripts' last argument for the basic kind: now, ms on the caller's clock.
        return round(self._clock() * 1000)


class FairSemaphore(Semaphore):
    """A counting semaphore on the server's clock, immune to clock differences between hosts.

    Same interface as Semaphore; ``clock`` only measures how long ``acquire`` waits.
    """

    _fair = True

    def _acquire_args(self, holder_id: str, reason: str) -> list[Any]:
        # No clock argument: the script reads the server's (TIME); no reason, no argument.
        args = [holder_id, self.limit, self._timeout_ms]
        if reason:
            args.append(reason)
        return args

    def ticket(self, holder_id: str) -> int | None:
        """Return the permit's ticket (its acquisition number), None once released or swept."""
        return faces.run(self._ticket(holder_id), self._client)

    async def aticket(self, holder_id: str) -> int | None:
        """The async twin of ``ticket``."""
        return await faces.arun(self._ticket(holder_id), self._aclient)

    def _ticket(self, holder_id: str) -> faces.Op:
        holder_id = _check_holder_id(holder_id)
        return faces.command(
            "hget",
            self._keys["info"],
            holder_id,
            then=lambda record: None if record is None else json.loads(record).get("ticket"),
        )


def holders(
    name: str, *, client: Client | None = None, clock: Callable[[], float] | None = None
) -> list[Holder]:
    """Return the live permits of semaphore ``name``, oldest first.

    Ages are measured on ``clock`` (seconds) when given, else on the server's clock; for
    a basic Semaphore used across hosts they include the clock difference between the
    acquiring host and the one asking. Reads one consistent snapshot (a Lua script).
    """
    return faces.run(_holders(name, clock), resolve_client(client))


async def aholders(
    name: str, *, client: Client | None = None, clock: Callable[[], float] | None = None
) -> list[Holder]:
    """The async twin of ``holders``."""
    return await faces.arun(_holders(name, clock), client)


def _holders(name: str, clock: Callable[[], float] | None) -> faces.Op:
    name = keys.validate_key_part(name, "semaphore name")
    names = {role: keys.make_key(COMPONENT, name, role) for role in _ROLES}
    holder_keys = [names["holders"], names["info"]]
    return faces.script(
        "semaphore_holders", holder_keys, [], then=lambda reply: _live(reply, clock)
    )


def _live(reply: list[Any], clock: Callable[[], float] | None) -> list[Holder]:
    server_ms, deadlines, info = reply
    now_ms = clock() * 1000 if clock is not None else int(server_ms)
    deadlines = [(deadlines[i], float(deadlines[i + 1])) for i in range(0, len(deadlines), 2)]
    info = dict(zip(info[::2], info[1::2], strict=True))
    found = []
    for member, deadline in deadlines:
        if deadline <= now_ms:
            continue  # expired, not yet swept by an acquire
        details = json.loads(info.get(member, b"{}"))
        acquired_ms = details.get("acquired_ms", deadline)
        found.append(
            Holder(
                id=member.decode(),
                age=max(0.0, (now_ms - acquired_ms) / 1000),
                expires_in=(deadline - now_ms) / 1000,
                reason=details.get("reason", ""),
                ticket=details.get("ticket"),
            )
        )
    found.sort(key=lambda holder: (-holder.age, holder.ticket or 0))
    return found


def force_release(name: str, holder_id: str, *, client: Client | None = None) -> bool:
    """Take permit ``holder_id`` of semaphore ``name`` back for an operator and wake one
    waiter; return whether the permit was still live. For a holder that is stuck (it keeps
    refreshing) or gone: the holder is not told, and the next ``refresh`` or ``release`` it
    makes returns False. Works for both kinds. Logged as a warning."""
    name = keys.validate_key_part(name, "semaphore name")
    holder_id = _check_holder_id(holder_id)
    names = {role: keys.make_key(COMPONENT, name, role) for role in _ROLES}
    client = resolve_client(client)
    # The wake list keeps at most one token per slot of the semaphore's last known limit.
    limit = client.hget(names["info"], "limit")
    limit_arg = int(limit) if limit is not None and limit.isdigit() else 1
    script = lua.script(client, "semaphore_release")
    released = bool(
        script(
            keys=[names["holders"], names["info"], names["wake"]],
            args=[holder_id, limit_arg, _FORCE_RELEASE_WAKE_MS],  # judged on the server's clock
        )
    )
    if released:
        logger.warning("semaphore %r: permit %s force-released", name, holder_id)
    return released


def semaphore_names(*, client: Client | None = None) -> list[str]:
    """Return the names of the semaphores whose holders' keys exist, sorted.

    The candidates are the semaphore registry's names (``services.registry``), never a
    SCAN; names of semaphores gone for good are forgotten on the way.
    """
    return registry.existing(COMPONENT, holders_key, client=client)


def holders_key(name: str) -> str:
    return keys.make_key(COMPONENT, name, "holders")


def _check_reason(reason: object) -> str:
    if not isinstance(reason, str):
        raise InvalidArgumentType(
            "reason", reason, f"must be a string, got {type(reason).__name__}"
        )
    if len(reason) > MAX_REASON_LENGTH:
        raise InvalidArgument(
            "reason", reason, f"longer than {MAX_REASON_LENGTH} characters; shorten it"
        )
    if reason.isascii() and reason.isprintable():
        return reason  # no control or format character (the common case, "" included)
    if any(unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") for char in reason):
        raise InvalidArgument("reason", reason, "must not contain control characters")
    return reason


def _check_holder_id(holder_id: object) -> str:
    return check_token(holder_id, "holder id", "pass the id that acquire() returned")
