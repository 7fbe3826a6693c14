"""Leases: exclusive, expiring ownership of one Redis key, with a heartbeat.

Import: ``from redisparts_app.services.lease import Lease``.

A lease is a key holding a random owner token (32 hex digits) with a TTL; only the owner
extends or releases it, each checked and done in one Lua script (compare-and-PEXPIRE,
compare-and-DEL). Locks stand on it; so can any component that needs one process at a
time on a job. ``extend()`` and ``release()`` return False (and set ``lost``) once the
lease is no longer owned; the heartbeat (``start_heartbeat``) calls ``on_lost`` once
when it finds it gone.

Keys: ``key`` (the caller's), and in its hash tag ``fence_key`` (a counter INCRed with
each acquisition: a strictly increasing fencing token, never expiring) and
``signal_key`` (a short-lived list a release pushes to, waking one BLPOP waiter).

Guarantee: at most one owner token is stored at a time, and a holder never extends or
deletes a lease it no longer owns. The TTL is Redis's promise, not the holder's: a
holder paused past it may act late, which the fencing token lets a resource refuse
(``services.locks.fenced_update``). Seconds in the API, milliseconds in Redis.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from .. import faces
from ..connection import Client, get_redis, is_async_client, is_pipeline
from ..exceptions import InvalidArgument
from ..validation import check_int, check_seconds, to_ms

__all__ = [
    "Lease",
]

logger = logging.getLogger(__name__)

# Errors meaning "Redis could not be asked", which the heartbeat rides out for up to one TTL.
UNREACHABLE = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ClusterError,
    redis.exceptions.RedisClusterException,
)
# A wake-up signal only has to outlive the gap between a waiter's failed attempt
# and its BLPOP; an older one would only cost a waiter one extra attempt.
SIGNAL_TTL_MS = 2000
# A waiter woken by a release that finds the lease taken again at once (its holder took
# it straight back) sleeps 1, 2, 4, ... up to 32 ms before it waits again. Waking at
# every release moves the lease from process to process at most releases, each move
# costing the refused one a failed attempt and a new BLPOP, and on a busy machine the
# waiters' work slows the holder; backing off lets a holder's run go on, while a
# waiter still tries every 32 ms and the first release after its sleep wakes it.
BACKOFF_FIRST = 0.001
BACKOFF_LONGEST = 0.032
# Guards the making of a lease's ``lost`` event and the report of its loss. One for
# all leases: both are rare, and a lock per lease would cost every lease (one per
# ``with Lock(...)``) its making.
_REPORT_LOCK = threading.Lock()


def validate_heartbeat(interval: float | None, ttl: float, max_renewals: int | None) -> float:
    """Return the heartbeat interval in seconds (default ttl/3), or raise a ValueError.

    The interval must be shorter than ``ttl``; ``max_renewals`` None or a whole number >= 0.
    """
    if max_renewals is not None:
        check_int(max_renewals, "max_renewals", minimum=0)
    if interval is None:
        return ttl / 3
    interval = check_seconds(interval, "heartbeat interval")
    if interval >= ttl:
        raise InvalidArgument(
            "heartbeat interval", interval, f"must be shorter than the ttl {ttl:g} seconds"
        )
    return interval


def immediate_clients(client: Client) -> tuple[Any, Any]:
    """Return the (sync, async) clients of a lease or lock given ``client=`` (see
    ``faces.clients``); refuse a pipeline with a TypeError.

    Leases and locks act on each reply at once (did the SET win?), which a
    pipeline only gives at execute().
    """
    if client is None:
        return get_redis(), None
    if is_async_client(client):
        return get_redis(), client
    if is_pipeline(client):
        raise TypeError("leases and locks need each reply at once: pass a client, not a pipeline")
    return client, None


class LeaseHolder:
    """One holder's exclusive, expiring ownership of ``key`` for ``ttl`` seconds: what a
    ``Lease`` and a ``Lock`` (``services.locks``) share. Each builds on it its own
    acquire, extend and release; both are their own holder, so a ``with Lock(...)``
    makes one object, not two.

    ``fence_key`` and ``signal_key`` (same hash tag as ``key``) turn on fencing tokens
    and wake-up signals, described in the module docstring. ``on_lost`` is called with
    the holder, once, when ownership is found lost.
    """

    # State before the first acquisition, as class attributes: a Lock is built per use,
    # and these are only written once something happens.
    key: str
    ttl: float
    _ttl_ms: int
    client: Any
    aclient: Any = None
    token: str | None = None
    fence_key: str | None = None
    signal_key: str | None = None
    on_lost: Callable[[Any], Any] | None = None
    clock: Callable[[], float] = staticmethod(time.monotonic)
    fence: int | None = None
    renewals = 0
    _lost: threading.Event | None = None  # made on first use (see ``lost``)
    _held = False
    _confirmed_until = 0.0
    _sent = 0.0  # when the last attempt was sent (on ``clock``)
    _lost_reported = False
    # Made by start_heartbeat: most leases never have a heartbeat.
    _stop: threading.Event | None = None
    _thread: threading.Thread | None = None

    @property
    def held(self) -> bool:
        """Whether this holder acquired the lease and has not released or lost it."""
        return self._held and not (self._lost is not None and self._lost.is_set())

    @property
    def lost(self) -> threading.Event:
        """A threading.Event set once this holder is found to have lost the lease."""
        # Made on first use: most leases are taken and released without anyone waiting
        # on it, and an Event costs more than the rest of the object.
        if self._lost is None:
            with _REPORT_LOCK:
                if self._lost is None:
                    self._lost = threading.Event()
        return self._lost

    def _wait(self, deadline: float, holder_pttl: int | None) -> faces.Steps[bool]:
        """The rest of an acquire after a failed attempt, which found ``holder_pttl``
        (None: not read), until ``deadline`` (on ``clock``)."""
        backoff = 0.0  # seconds to sleep before the next wait, after lost wake-ups
        while True:
            if holder_pttl is None and deadline > self.clock():  # a bare SET lost
                holder_pttl = int((yield faces.command("pttl", self.key)))
            left = deadline - self.clock()
            if left <= 0 or holder_pttl is None:  # None: the deadline had passed already
                return False
            woken = False
            if backoff:
                yield faces.sleep(min(left, backoff))
                left = max(0.0, deadline - self.clock())
            if holder_pttl != -2:  # -2: released between SET and PTTL, try again at once
                pause = left if holder_pttl < 0 else min(left, holder_pttl / 1000)
                woken = yield from self._pause(pause, left)
            acquired, holder_pttl = yield self._attempt()
            if acquired:
                return True
            backoff = min(2 * backoff or BACKOFF_FIRST, BACKOFF_LONGEST) if woken else 0.0

    def _attempt(self) -> faces.Op:
        """One attempt, whose reply is (acquired, the holder's PTTL in ms or None: not read)."""
        if self._held:
            raise RuntimeError(f"lease {self.key!r} is already held by this holder")
        self._sent = self.clock()
        if self.fence_key is None:
            return faces.command(
                "set", self.key, self.token, nx=True, px=self._ttl_ms, then=self._won
            )
        keys = (self.key, self.fence_key)
        return faces.script("lease_acquire", keys, (self.token, self._ttl_ms), then=self._drawn)

    def _won(self, reply: Any) -> tuple[bool, None]:
        if reply:
            self._mark_acquired(None, self._sent)
        return bool(reply), None

    def _drawn(self, reply: int) -> tuple[bool, int]:
        if reply < 0:
            return False, -3 - reply  # the holder's PTTL (lease_acquire.lua)
        self._mark_acquired(reply, self._sent)
        return True, 0

    def _mark_acquired(self, fence: int | None, sent: float) -> None:
        # Ownership is certain until the send time of the last confirmed SET/PEXPIRE + ttl.
        self._confirmed_until = sent + self.ttl
        self.fence = fence
        self.renewals = 0
        if self._lost is not None:
            self._lost.clear()
        self._lost_reported = False
        self._held = True

    def _pause(self, seconds: float, patience: float | None = None) -> faces.Steps[bool]:
        """Wait for a release; return whether one woke this waiter.

        A BLPOP ending ``seconds`` from now; while another waiter of the process holds the
        list's BLPOP (``wakeups``), up to ``patience`` seconds (default ``seconds``) for
        this waiter's turn, its BLPOP then lasting what is left of ``seconds``."""
        if self.signal_key is None:
            yield faces.sleep(seconds)
            return False
        patience = seconds if patience is None else patience
        return bool((yield faces.pop_signal(self.signal_key, seconds, patience)))

    # -- ownership ------------------------------------------------------------------

    def _extend(self, ttl: float | None) -> faces.Op:
        ttl = self.ttl if ttl is None else check_seconds(ttl, "lease ttl")
        sent = self.clock()

        def extended(reply: int) -> bool:
            if reply:
                self._confirmed_until = sent + ttl
                return True
            self._report_lost()
            return False

        return faces.script("lease_extend", [self.key], [self.token, to_ms(ttl)], then=extended)

    def _release(self) -> faces.Op:
        if self._thread is not None:
            self.stop_heartbeat()
        keys = (self.key,) if self.signal_key is None else (self.key, self.signal_key)
        return faces.script("lease_release", keys, [self.token, SIGNAL_TTL_MS], then=self._released)

    def _released(self, reply: int) -> bool:
        if reply:
            self._held = False
            return True
        self._report_lost()
        return False

    def owned(self) -> bool:
        """Ask Redis whether the key still holds this holder's token (False before the
        first acquisition)."""
        return self.token is not None and faces.run(self._owned(), self.client)

    async def aowned(self) -> bool:
        """The async twin of ``owned``."""
        return self.token is not None and await faces.arun(self._owned(), self.aclient)

    def _owned(self) -> faces.Op:
        token = str(self.token).encode()
        return faces.command("get", self.key, then=lambda value: value == token)

    def remaining(self) -> float | None:
        """Return the seconds left if this holder owns the key, else None."""
        return None if self.token is None else faces.run(self._remaining(), self.client)

    async def aremaining(self) -> float | None:
        """The async twin of ``remaining``."""
        return None if self.token is None else await faces.arun(self._remaining(), self.aclient)

    def _remaining(self) -> faces.Op:
        token = str(self.token).encode()

        def seconds(replies: list[Any]) -> float | None:
            value, pttl = replies
            if value != token or pttl < 0:
                return None
            return pttl / 1000

        ops = [faces.command("get", self.key), faces.command("pttl", self.key)]
        return faces.transaction(self.key, ops, then=seconds)

    def _report_lost(self) -> None:
        with _REPORT_LOCK:
            if self._lost_reported:
                return
            self._lost_reported = True
            self._held = False
        logger.warning("lease %s lost (token %s)", self.key, self.token)
        try:
            if self.on_lost is not None:
                self.on_lost(self)
        finally:
            # After the callback, so whoever wakes on `lost` sees what it did.
            self.lost.set()

    # -- heartbeat ------------------------------------------------------------------

    def start_heartbeat(
        self, interval: float | None = None, *, max_renewals: int | None = None
    ) -> None:
        """Extend the lease every ``interval`` seconds (default ttl/3) in a daemon thread.

        After ``max_renewals`` extensions the thread stops renewing and reports
        the loss once the lease has expired. The thread stops on ``release()``,
        ``stop_heartbeat()``, or when the lease is lost.
        """
        interval = validate_heartbeat(interval, self.ttl, max_renewals)
        if not self._held:
            raise RuntimeError(f"lease {self.key!r} is not held; acquire it first")
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError(f"lease {self.key!r} already has a heartbeat")
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._beat,
            args=(interval, max_renewals, self._stop),
            name=f"lease-heartbeat {self.key}",
            daemon=True,
        )
        self._thread.start()

    def stop_heartbeat(self) -> None:
        """Stop the heartbeat thread, if any, and wait for it to finish."""
        thread, self._thread = self._thread, None
        if thread is None or self._stop is None:
            return
        self._stop.set()
        if thread is not threading.current_thread():
            thread.join()

    def _beat(self, interval: float, max_renewals: int | None, stop: threading.Event) -> None:
        while not stop.wait(interval):
            if max_renewals is not None and self.renewals >= max_renewals:
                self._expire_quietly(stop)
                return
            try:
                extended: bool = faces.run(self._extend(None), self.client)
            except UNREACHABLE as exc:
                if self.clock() >= self._confirmed_until:
                    logger.warning("lease %s unconfirmed for a whole ttl: %s", self.key, exc)
                    self._report_lost()
                    return
                continue
            if not extended:
                return
            self.renewals += 1

    def _expire_quietly(self, stop: threading.Event) -> None:
        # The renewal cap is reached: wait for the last extension to run out, then tell.
        while not stop.wait(max(0.001, self._confirmed_until - self.clock())):
            try:
                left = self.remaining()
            except UNREACHABLE:
                left = None
            if left is None:
                self._report_lost()
                return
            self._confirmed_until = self.clock() + left


class Lease(LeaseHolder):
    """Exclusive, expiring ownership of ``key`` for ``ttl`` seconds.

    ``fence_key`` and ``signal_key`` (same hash tag as ``key``) turn on fencing
    tokens and wake-up signals, described in the module docstring. ``on_lost``
    is called with the lease, once, when ownership is found lost. A Lease
    object belongs to one holder; its token is fixed for the object's life.
    """

    token: str

    def __init__(
        self,
        key: str,
        ttl: float,
        *,
        client: Client | None = None,
        token: str | None = None,
        fence_key: str | None = None,
        signal_key: str | None = None,
        on_lost: Callable[[Lease], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.key = key
        self.ttl = check_seconds(ttl, "lease ttl")
        self._ttl_ms = to_ms(self.ttl)
        self.client, self.aclient = immediate_clients(client)
        self.token = token or os.urandom(16).hex()  # 128 random bits, as hex
        self.fence_key = fence_key
        self.signal_key = signal_key
        self.on_lost = on_lost
        self.clock = clock

    # -- acquisition ----------------------------------------------------------------

    def try_acquire(self) -> bool:
        """Make one attempt; return True when this holder now owns the lease."""
        return faces.run(self._try_acquire(), self.client)

    async def atry_acquire(self) -> bool:
        """The async twin of ``try_acquire``."""
        return await faces.arun(self._try_acquire(), self.aclient)

    def _try_acquire(self) -> faces.Steps[bool]:
        acquired, _ = yield self._attempt()
        return acquired

    def acquire(self, timeout: float = 0.0) -> bool:
        """Take the lease, waiting up to ``timeout`` seconds; return whether it was taken.

        ``timeout=0`` makes one attempt. Between attempts the caller blocks on
        ``signal_key`` (BLPOP) when there is one, else sleeps; either way for no
        longer than the holder's remaining TTL and the remaining wait, so an
        abandoned lease is taken as soon as it expires, without busy polling.
        """
        return faces.run(
            self._acquire(check_seconds(timeout, "lease timeout", allow_zero=True)), self.client
        )

    async def aacquire(self, timeout: float = 0.0) -> bool:
        """The async twin of ``acquire`` (its waits block only this coroutine)."""
        checked = check_seconds(timeout, "lease timeout", allow_zero=True)
        return await faces.arun(self._acquire(checked), self.aclient)

    def _acquire(self, timeout: float) -> faces.Steps[bool]:
        """The core of ``acquire``, for a ``timeout`` the caller has checked (float seconds ≥ 0)."""
        deadline = self.clock() + timeout
        acquired, holder_pttl = yield self._attempt()
        if acquired:
            return True
        return (yield from self._wait(deadline, holder_pttl))

    # -- ownership ------------------------------------------------------------------

    def extend(self, ttl: float | None = None) -> bool:
        """Reset the TTL to ``ttl`` (default: the lease's) seconds from now, if still owned.

        Return False, and report the loss, when the lease is gone or another's.
        """
        return faces.run(self._extend(ttl), self.client)

    async def aextend(self, ttl: float | None = None) -> bool:
        """The async twin of ``extend``."""
        return await faces.arun(self._extend(ttl), self.aclient)

    def release(self) -> bool:
        """Stop the heartbeat and delete the lease if still owned; return whether it was.

        With a ``signal_key``, a successful release wakes one waiter.
        """
        return faces.run(self._release(), self.client)

    async def arelease(self) -> bool:
        """The async twin of ``release`` (a heartbeat thread is joined, briefly)."""
        return await faces.arun(self._release(), self.aclient)
