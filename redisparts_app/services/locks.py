"""Distributed locks with a TTL, owner tokens, wake-up on release and fencing tokens.

Import: ``from redisparts_app.services.locks import FencedQuerySet, Lock, fenced_update``.

::

    with Lock("market", ttl=5, timeout=10) as lock:     # or: async with
        fenced_update(Item.objects, pk, lock.fence, price=10)

Acquisition is one script: SET NX PX of a fresh owner token plus INCR of the fence
counter. Release and extension check the token and act in one script each. Waiters
block in BLPOP on the wake-up list a release pushes to (one BLPOP per lock and process).

Keys: ``<prefix>:lock:{name}:owner`` (the token, PX ``ttl``), ``:fence`` (the counter, no
TTL) and ``:signal`` (the wake-up list, 2 s TTL).

Guarantee: while Redis keeps its data, at most one owner token per name, and the lock is
free at most ``ttl`` seconds after its holder stops renewing it. A holder paused past
its TTL may write late: the fencing token (``fenced_update``) makes the resource refuse
it. ``LockNotOwned`` from ``release``/``extend`` of a lock no longer held.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from django.db import models

from .. import faces, keys, lua
from ..conf import SettingsCache, app_settings
from ..connection import Client, resolve_client
from ..exceptions import InvalidArgument, LockNotOwned, LockTimeout
from ..validation import check_count, check_seconds, check_token, to_ms
from . import registry
from .lease import SIGNAL_TTL_MS, LeaseHolder, immediate_clients, validate_heartbeat

__all__ = [
    "FencedQuerySet",
    "HeldLock",
    "Lock",
    "fenced_update",
    "force_release",
    "held_locks",
    "lock_keys",
    "read_held",
]

logger = logging.getLogger(__name__)

COMPONENT = "lock"


def lock_keys(name: str) -> tuple[str, str, str]:
    """Return the owner, fence and signal keys of lock ``name`` (validated first)."""
    return _role_keys(keys.validate_key_part(name, "lock name"))


def _role_keys(valid_name: str) -> tuple[str, str, str]:
    base = keys.make_key(COMPONENT, valid_name)
    return f"{base}:owner", f"{base}:fence", f"{base}:signal"


# What a Lock's name, ttl and timeout come to (the valid name, its three keys, the ttl in
# seconds and in ms, the timeout), by the arguments as given, their types included (True
# == 1, but True is no ttl), and the key prefix. A Lock is built on every use (``with
# Lock(name):``), and checking its arguments and building its keys would be a good part
# of the Python a use costs; None reads the settings, so the cache is emptied with them.
_Checked = tuple[str, str, str, str, float, int, float]
_arguments: SettingsCache[tuple[Any, ...], _Checked] = SettingsCache()


def _check_arguments(given: tuple[Any, ...]) -> _Checked:
    """Check the name, ttl and timeout in ``given`` (as the Lock constructor builds it)."""
    _prefix, name, ttl, _, timeout, _ = given
    valid = keys.validate_key_part(name, "lock name")
    ttl = check_seconds(app_settings.LOCK_TTL if ttl is None else ttl, "lock ttl")
    timeout = check_seconds(
        app_settings.LOCK_TIMEOUT if timeout is None else timeout, "lock timeout"
    )
    checked = (valid, *_role_keys(valid), ttl, to_ms(ttl), timeout)
    try:
        return _arguments.remember(given, checked)
    except TypeError:  # arguments that are valid but unhashable (a str subclass)
        return checked


# Classes of the clients a Lock was given that are neither async nor pipelines:
# immediate_clients() runs once per class, not once per use.
_PLAIN_CLIENTS: set[type] = set()


class Lock(LeaseHolder):
    """A named distributed lock held for ``ttl`` seconds, waited for up to ``timeout``.

    ``auto_renew=True`` extends it every ``renew_interval`` seconds (default
    ttl/3, must be below ttl) while held, up to ``max_renewals`` times (default: no cap); when
    the lock is found lost, ``on_lost(lock)`` is called, then ``lock.lost`` set.
    ``clock`` measures the wait (monotonic seconds).

    A Lock is its own lease holder (``lease.LeaseHolder``): ``token`` and ``fence`` are those
    of the current or last acquisition (None before the first); each acquisition draws
    a new token.
    """

    # The defaults of the options, as class attributes: a Lock is built per use, and
    # only what a caller sets differently is stored on it.
    auto_renew = False
    renew_interval: float | None = None  # None: ttl/3 (``LeaseHolder.start_heartbeat``)
    max_renewals: int | None = None
    # A token whose attempts all failed: it never reached Redis as the owner, so the next
    # attempt may use it again instead of drawing a new one (cheaper polling).
    _spare: str | None = None

    def __init__(
        self,
        name: str,
        ttl: float | None = None,
        timeout: float | None = None,
        *,
        client: Client | None = None,
        auto_renew: bool = False,
        renew_interval: float | None = None,
        max_renewals: int | None = None,
        on_lost: Callable[[Lock], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # The common cases inline (arguments seen before, a plain client): each call
        # saved here is saved on every use.
        given = (app_settings.KEY_PREFIX, name, ttl, type(ttl), timeout, type(timeout))
        try:
            checked = _arguments[given]
        except (KeyError, TypeError):  # new, or unhashable: checked, not remembered
            checked = _check_arguments(given)
        (
            self.name,
            self.key,
            self.fence_key,
            self.signal_key,
            self.ttl,
            self._ttl_ms,
            self.timeout,
        ) = checked
        if renew_interval is not None or max_renewals is not None:
            self.renew_interval = validate_heartbeat(renew_interval, self.ttl, max_renewals)
            self.max_renewals = max_renewals
        if client is not None and type(client) in _PLAIN_CLIENTS:
            self.client = client
        else:
            self.client, self.aclient = immediate_clients(client)
            if self.aclient is None and client is not None:
                _PLAIN_CLIENTS.add(type(client))
        if auto_renew:
            self.auto_renew = True
        if on_lost is not None:
            self.on_lost = on_lost
        if clock is not time.monotonic:
            self.clock = clock

    def __repr__(self) -> str:
        state = f"held, fence {self.fence}" if self.held else "not held"
        return f"<Lock {self.name!r} ttl={self.ttl:g}s {state}>"

    @property
    def owner_key(self) -> str:
        """The key holding the owner token (``lock_keys(name)[0]``)."""
        return self.key

    @property
    def lost(self) -> threading.Event:
        """A threading.Event set once this holder is found to have lost the lock."""
        if self.token is None:
            raise RuntimeError(f"lock {self.name!r} was never acquired")
        return super().lost

    # -- acquire / extend / release ---------------------------------------------------

    def acquire(self, timeout: float | None = None) -> int:
        """Take the lock, waiting up to ``timeout`` seconds (default: the lock's); return the fence.

        Raise LockTimeout when others held it for the whole wait.
        """
        return faces.run(self._take(self._wait_for(timeout)), self.client)

    async def aacquire(self, timeout: float | None = None) -> int:
        """The async twin of ``acquire``: its waits (BLPOP on the wake-up list) block only
        this coroutine."""
        return await faces.arun(self._take(self._wait_for(timeout)), self.aclient)

    def _wait_for(self, timeout: float | None) -> float:
        return self.timeout if timeout is None else check_seconds(timeout, "lock timeout")

    def try_acquire(self) -> int | None:
        """Make one attempt without waiting; return the fence, or None when it is held."""
        return faces.run(self._try_acquire(), self.client)

    async def atry_acquire(self) -> int | None:
        """The async twin of ``try_acquire``."""
        return await faces.arun(self._try_acquire(), self.aclient)

    def _try_acquire(self) -> faces.Steps[int | None]:
        last = self._arm()
        acquired, _ = yield self._attempt()
        if acquired:
            yield from registry.noting(COMPONENT, self.name)  # once held, as in _take
            return self._started()
        self._disarm(last)
        return None

    def extend(self, ttl: float | None = None) -> None:
        """Reset the lock's TTL to ``ttl`` seconds (default: its ttl) from now.

        Raise LockNotOwned when this holder no longer owns it.
        """
        faces.run(self._extend_owned(ttl), self.client)

    async def aextend(self, ttl: float | None = None) -> None:
        """The async twin of ``extend``."""
        await faces.arun(self._extend_owned(ttl), self.aclient)

    def _extend_owned(self, ttl: float | None) -> faces.Steps[None]:
        if self.token is None or not (yield self._extend(ttl)):
            raise LockNotOwned(self.name, "extend")

    def release(self) -> None:
        """Release the lock and wake one waiter; raise LockNotOwned when no longer owned."""
        faces.run(self._give_back(None), self.client)

    async def arelease(self) -> None:
        """The async twin of ``release``."""
        await faces.arun(self._give_back(None), self.aclient)

    def _lost_at_release(self, exc_type: type[BaseException] | None) -> None:
        if exc_type is None:
            raise LockNotOwned(self.name, "release")
        logger.warning("lock %r was lost before the failing block ended", self.name)

    def _arm(self) -> str | None:
        """Check that this object does not hold the lock and give it a token for its
        attempts; return the token of its last acquisition, for ``_disarm``."""
        if self._held:
            raise RuntimeError(f"lock {self.name!r} is already held by this object")
        last, spare = self.token, self._spare
        if spare is None:
            self.token = os.urandom(16).hex()  # 128 random bits, as hex
        else:
            self.token, self._spare = spare, None
        return last

    def _disarm(self, last: str | None) -> None:
        """After attempts that all failed: their token is kept for the next attempt, and
        ``token`` is the last acquisition's again."""
        self._spare, self.token = self.token, last

    def _started(self) -> int:
        if self.auto_renew:  # a thread on the sync client, whichever face acquired
            self.start_heartbeat(self.renew_interval, max_renewals=self.max_renewals)
        assert self.fence is not None  # a fenced attempt always draws one
        return self.fence

    def _take(self, wait: float) -> faces.Steps[int]:
        """The core of ``acquire``: take the lock within ``wait`` seconds (checked)."""
        last = self._arm()
        acquired, holder_pttl = yield self._attempt()
        if not acquired and not (yield from self._wait(self._sent + wait, holder_pttl)):
            self._disarm(last)
            raise LockTimeout(self.name, wait)
        # Noted once held: a registry prunes only names whose thing it finds gone, so a
        # name noted before the lock existed could be pruned between the two.
        if not registry.recently_noted((yield faces.CLIENT), COMPONENT, self.name):
            yield from registry.noting(COMPONENT, self.name)
        return self._started()

    def _give_back(self, exc_type: type[BaseException] | None) -> faces.Steps[None]:
        """The core of ``release``: raise LockNotOwned when no longer owned, unless
        ``exc_type`` is the error a ``with`` block is leaving with (that error propagates;
        the loss is logged)."""
        if self.token is None or not (yield self._release()):
            self._lost_at_release(exc_type)

    def __enter__(self) -> Lock:
        faces.run(self._take(self.timeout), self.client)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        faces.run(self._give_back(exc_type), self.client)

    async def __aenter__(self) -> Lock:
        await self.aacquire()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await faces.arun(self._give_back(exc_type), self.aclient)


@dataclass(frozen=True)
class HeldLock:
    """One held lock as seen by ``held_locks``: TTL in seconds, fence of its holder."""

    name: str
    owner: str
    ttl: float | None
    fence: int | None


def held_locks(client: Client | None = None) -> list[HeldLock]:
    """Return the locks held right now, sorted by name.

    The candidates are the lock registry's names (``services.registry``), never a SCAN:
    the cost follows the number of lock names in use, not the keyspace. ``ttl`` is None
    for a key without TTL (set outside this module). A lock released meanwhile is left
    out. For the admin and operators; the values are a snapshot per lock, not across locks.
    """
    client = resolve_client(client)
    return read_held(registry.names(COMPONENT, client=client), client=client)


def read_held(names: list[str], *, client: Client | None = None) -> list[HeldLock]:
    """Return which of the locks ``names`` are held, in one pipeline; forget the names of
    locks gone for good from the registry (``registry.prune``)."""
    client = resolve_client(client)
    if not names:
        return []
    pipe = client.pipeline(transaction=False)
    for name in names:
        owner_key, fence_key, _signal = _role_keys(name)
        pipe.get(owner_key).pttl(owner_key).get(fence_key)
    replies = pipe.execute()
    found: list[HeldLock] = []
    for index, name in enumerate(names):
        owner, pttl, fence = replies[3 * index : 3 * index + 3]
        if owner is not None:
            ttl = pttl / 1000 if pttl >= 0 else None
            fence = int(fence) if fence is not None else None
            found.append(HeldLock(name=name, owner=owner.decode(), ttl=ttl, fence=fence))
    held = {lock.name for lock in found}
    registry.prune(
        COMPONENT, lambda stale: [name in held for name in stale], candidates=names, client=client
    )
    return sorted(found, key=lambda lock: lock.name)


def force_release(name: str, owner: str, *, client: Client | None = None) -> bool:
    """Release lock ``name`` for an operator, only while ``owner`` (the token they saw) holds
    it, and wake one waiter; return whether it was released. For a holder that is stuck or
    gone without its TTL running out (a lock without TTL): the holder is not told, so its
    fencing token is what keeps its late writes out. Logged as a warning."""
    name = keys.validate_key_part(name, "lock name")
    owner = check_token(owner, "owner token", "pass the token held_locks() or rp_locks shows")
    owner_key, _fence, signal_key = _role_keys(name)
    script = lua.script(resolve_client(client), "lease_release")
    released = bool(script(keys=[owner_key, signal_key], args=[owner, SIGNAL_TTL_MS]))
    if released:
        logger.warning("lock %r force-released (owner token %s)", name, owner)
    return released


def fenced_update(
    queryset_or_model: models.QuerySet | models.Manager | type[models.Model],
    pk: Any,
    fence: int,
    *,
    fence_field: str = "fence",
    **fields: Any,
) -> bool:
    """Update row ``pk`` with ``fields`` only if its ``fence_field`` is below ``fence``.

    One ``UPDATE ... SET <fields>, fence = <fence> WHERE pk = ... AND fence < <fence>``,
    so the database itself rejects a write from a holder whose lock was taken
    over since (its token is lower than one already stored). Return True when
    the row was updated, False when it was stale or the row does not exist.
    """
    check_count(fence, "fence")
    if fence_field in fields:
        raise InvalidArgument(
            "fields", fence_field, "is set from the fence; do not pass it as a field"
        )
    if isinstance(queryset_or_model, type) and issubclass(queryset_or_model, models.Model):
        queryset = queryset_or_model._default_manager.all()
    else:
        queryset = queryset_or_model.all()
    updated = queryset.filter(pk=pk, **{f"{fence_field}__lt": fence}).update(
        **fields, **{fence_field: fence}
    )
    return updated == 1


class FencedQuerySet(models.QuerySet):
    """A QuerySet with ``fenced_update(pk, fence, **fields)``, for a model with a fence.

    The model declares ``fence = models.BigIntegerField(default=0)`` and
    ``objects = FencedQuerySet.as_manager()``; a holder of a lock then writes with
    ``Item.objects.fenced_update(pk, lock.fence, price=10)``.
    """

    def fenced_update(
        self, pk: Any, fence: int, *, fence_field: str = "fence", **fields: Any
    ) -> bool:
        """Update row ``pk`` of this QuerySet unless it holds a fence >= ``fence`` (see
        the module's ``fenced_update``)."""
        return fenced_update(self, pk, fence, fence_field=fence_field, **fields)
