"""``TaskQueue``: the keys of one queue group and every operation on them.

Import: ``from redisparts_app.services.tasks import TaskQueue``.

A group is a set of named queues sharing one hash tag, so one Lua script sees all of
them (priority dequeue, reaping, scheduling) on a Redis Cluster too. Keys, all
``<prefix>:queue:{<group>}:<role>``: ``q:<queue>`` (ready ids, FIFO), ``tasks`` (id →
JSON), ``deliveries``, ``inflight`` (id → lease deadline), ``owners`` (id → worker),
``delayed``, ``failed``, ``quarantine``, ``errors``, ``queues``, ``wake`` and
``sched_wake`` (wake-up tokens), ``workers`` (last heartbeats), ``dedup:<key>``,
``result:<id>`` and ``done:<id>`` (results.py), ``abort:<id>`` (a cancel of a running
task), and a limited task's ``permits:@<task>`` and ``starts:@<task>``.

Guarantee: each operation is one script (or one atomic step) on the group's slot, so a
task is in exactly one place at any time. Times passed in are seconds; scripts use the
server's clock (TIME), so hosts with skewed clocks agree on due times and leases.
"""

import asyncio
import datetime as dt
import json
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from json.encoder import encode_basestring_ascii
from typing import Any, NamedTuple

from django.db import DEFAULT_DB_ALIAS, connections, transaction

from ... import faces, lua
from ...conf import SettingsCache, app_settings
from ...connection import get_redis, on_slot
from ...exceptions import InvalidTask, TaskNotFound, TaskNotReplicated
from ...keys import make_key, validate_key_part
from .. import registry
from . import results as results_module
from .results import Result

__all__ = [
    "Limit",
    "TaskInfo",
    "TaskQueue",
    "queue_groups",
]

COMPONENT = "queue"
# Wake tokens kept at most; one per ready task is enough to wake every idle worker.
WAKE_CAP = 1000
# Tasks moved per script call, so one call never blocks the server for long.
BATCH = 500


@dataclass(frozen=True)
class TaskInfo:
    """What the admin shows of a task; times in seconds since the epoch."""

    id: str
    name: str
    queue: str
    args: list[Any]
    kwargs: dict[str, Any]
    retries: int = 0
    max_retries: int = 0
    enqueued_at: float | None = None
    deliveries: int = 0
    due_at: float | None = None
    worker: str | None = None
    lease_until: float | None = None
    failed_at: float | None = None
    error: str | None = None
    traceback: str | None = None
    kind: str = "task"


def queue_groups(*, client: Any = None, with_default: bool = False) -> list[str]:
    """Return the names of the queue groups that hold queues, sorted.

    The candidates are the queue registry's names (``services.registry``), never a SCAN.
    ``with_default``: list REDISPARTS["QUEUE_GROUP"] even before it holds a queue.
    """
    client = client if client is not None else get_redis()
    groups = set(
        registry.existing(COMPONENT, lambda g: make_key(COMPONENT, g, "queues"), client=client)
    )
    if with_default:
        groups.add(str(app_settings.QUEUE_GROUP))
    return sorted(groups)


def validate_task_name(name: object) -> str:
    """Return ``name`` if it can name a task (the rules of key parts), else raise."""
    return validate_key_part(name, "task name")


def limited_queue(name: str) -> str:
    """The queue of the runs of the task ``name`` registered with limits: its workers
    take a task from it only within them (``TaskQueue.claim_next``)."""
    return f"@{name}"


class Limit(NamedTuple):
    """The limits of a limited queue: at most ``concurrency`` of its tasks in flight at
    once, at most ``rate`` claimed in any ``window`` seconds (0: no such limit)."""

    concurrency: int = 0
    rate: int = 0
    window: float = 0.0


def check_count(value: object, what: str) -> int:
    """Return ``value`` if it is a non-negative int, else raise InvalidTask."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidTask(f"{what} must be a non-negative integer, got {value!r}")
    return value


def new_task_id() -> str:
    return os.urandom(16).hex()  # as random as uuid4().hex, for less CPU


def validate_seconds(
    value: object, what: str, *, allow_zero: bool = True, allow_negative: bool = False
) -> float:
    """Return ``value`` as float seconds if it is a finite number ≥ 0 (> 0 if not allow_zero;
    any finite number with allow_negative)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidTask(f"{what} must be a number of seconds, got {value!r}")
    if allow_negative:
        return float(value)
    if value < 0 or (value == 0 and not allow_zero):
        raise InvalidTask(f"{what} must be {'≥' if allow_zero else '>'} 0 seconds, got {value}")
    return float(value)


# One encoder for task arguments (json.dumps with options builds a new one per call).
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))
# The C encoder _ENCODER runs, built once, without the circular-reference check: for
# arguments that are scalars only (no container, so nothing to refer back to), where
# building an encoder per call, with its own set of containers seen, is most of the cost.
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_encode_scalars = (
    None
    if _c_make_encoder is None
    else _c_make_encoder(
        None, _ENCODER.default, encode_basestring_ascii, None, ":", ",", False, False, False
    )
)
_SCALARS = frozenset({str, int, float, bool, type(None)})
_STR = frozenset({str})


def encode_arguments(args: Any, kwargs: Any) -> str:
    """Check that ``args``/``kwargs`` are JSON-serialisable and small enough.

    Return ``"args":[...],"kwargs":{...}``, the JSON members of a task record.
    """
    kind = type(args)
    if (
        (kind is tuple or kind is list)
        and _encode_scalars is not None
        and _SCALARS.issuperset(map(type, args))
        and (
            kwargs is None
            or (
                type(kwargs) is dict
                and _STR.issuperset(map(type, kwargs))
                and _SCALARS.issuperset(map(type, kwargs.values()))
            )
        )
    ):
        # The same text as the general case below, in one C call per container.
        try:
            encoded_args = "".join(_encode_scalars(args, 0)) if args else "[]"
            encoded_kwargs = "".join(_encode_scalars(kwargs, 0)) if kwargs else "{}"
        except ValueError as exc:  # a NaN or an infinity
            raise InvalidTask(f"task arguments must be JSON-serialisable: {exc}") from exc
        members = f'"args":{encoded_args},"kwargs":{encoded_kwargs}'
    else:
        members = _encode_any(args, kwargs)
    limit = int(app_settings.QUEUE_MAX_ARGS_BYTES)
    # Measured as [args,kwargs] (the JSON is ASCII: characters are bytes).
    size = len(members) - len('"args":,"kwargs":') + len("[,]")
    if size > limit:
        raise InvalidTask(
            f"task arguments take {size} bytes as JSON, more than the "
            f"limit of {limit} (REDISPARTS['QUEUE_MAX_ARGS_BYTES'])"
        )
    return members


def _encode_any(args: Any, kwargs: Any) -> str:
    """``encode_arguments`` of any arguments, before the size check."""
    if type(args) not in (list, tuple):
        if isinstance(args, str | bytes | dict) or not isinstance(args, Sequence):
            raise InvalidTask(f"args must be a list or tuple, got {type(args).__name__}")
        args = list(args)
    kwargs = {} if kwargs is None else kwargs
    if not isinstance(kwargs, dict) or (kwargs and not all(isinstance(k, str) for k in kwargs)):
        raise InvalidTask("kwargs must be a dict with string keys")
    try:
        return _ENCODER.encode({"args": args, "kwargs": kwargs})[1:-1]
    except (TypeError, ValueError) as exc:
        raise InvalidTask(f"task arguments must be JSON-serialisable: {exc}") from exc


# Keys built once per process; cached by the KEY_PREFIX in force too, so a changed
# setting builds them anew.
@lru_cache(maxsize=256)
def _group_key(prefix: str, group: str, roles: tuple[str, ...]) -> str:
    return make_key(COMPONENT, group, *roles)


@lru_cache(maxsize=256)
def _enqueue_keys(prefix: str, group: str, queue: str) -> tuple[str, ...]:
    """KEYS[1..4] of queue_enqueue.lua for a task ready now in ``queue`` (a checked name)."""
    roles = [("tasks",), ("q", queue), ("queues",), ("wake",)]
    return tuple(_group_key(prefix, group, role) for role in roles)


@lru_cache(maxsize=256)
def _delayed_keys(prefix: str, group: str) -> tuple[str, ...]:
    """KEYS[1..4] of queue_enqueue.lua for a delayed task."""
    roles = [("tasks",), ("delayed",), ("queues",), ("sched_wake",)]
    return tuple(_group_key(prefix, group, role) for role in roles)


@lru_cache(maxsize=256)
def _claim_keys(prefix: str, group: str, queues: tuple[str, ...]) -> tuple[str, ...]:
    """KEYS[1..5+q] of queue_dequeue.lua for ``queues`` (checked here, once per process)."""
    roles = ["tasks", "inflight", "owners", "deliveries", "wake"]
    keys = [_group_key(prefix, group, (role,)) for role in roles]
    keys += [_group_key(prefix, group, ("q", validate_key_part(q, "queue"))) for q in queues]
    return tuple(keys)


# Task and queue names in use, per key prefix and group: the queue name checked, the
# record's text from the name to "max_retries", and the enqueue script's keys. An
# enqueue then checks its names in one lookup (the name checks depend on the settings).
_names: SettingsCache[tuple[str, str, str, str], tuple[str, str, tuple[str, ...]]] = SettingsCache()


def _named(prefix: str, group: str, name: Any, queue: Any) -> tuple[str, str, tuple[str, ...]]:
    """Check a task name, then a queue name (InvalidKeyPart); return what ``_names`` holds."""
    from .registry import get_task  # registry.py imports this module

    valid_name = validate_task_name(name)
    valid_queue = validate_key_part(queue, "queue")
    registered = get_task(valid_name)
    if registered is not None and registered.limited:
        valid_queue = limited_queue(valid_name)  # whatever queue the caller named
    head = f'"name":{_json_string(valid_name)},"queue":{_json_string(valid_queue)},'
    found = (
        valid_queue,
        f'{head}"retries":0,"max_retries":',
        _enqueue_keys(prefix, group, valid_queue),
    )
    if type(name) is str and type(queue) is str:
        _names.remember((prefix, group, name, queue), found)
    return found


# Group names checked, as ``_names`` (a Task builds its TaskQueue per enqueue).
_groups: SettingsCache[str, str] = SettingsCache()


def _valid_group(group: Any) -> str:
    valid = validate_key_part(group, "queue group")
    if type(group) is str:
        _groups.remember(group, valid)
    return valid


def _sync_store() -> tuple[Any, Any]:
    """Django's Local of database connections and its store for sync threads, or (None,
    None) if they are kept otherwise: ``connections`` holds them in a thread-critical
    asgiref Local, whose store in a thread with no running event loop is one
    threading.local holding each alias's connection as an attribute (what
    ``connections[alias]`` reads there, and ``connections[alias] = ...`` writes, as tests
    and LiveServerThread's shared connections do). Checked here as it behaves."""
    try:
        local = connections._connections  # type: ignore[attr-defined]
        store = local._storage
        sync_store = local._get_storage() if asyncio._get_running_loop() is None else None
    except AttributeError:
        return None, None
    if type(store) is threading.local and sync_store is store:
        return local, store
    return None, None


_SYNC_STORE = _sync_store()


def _in_atomic_block(using: str | None) -> bool:
    """Whether the connection to database ``using`` (None: the default) of this thread,
    or of this async context, is inside ``transaction.atomic()``.

    ``transaction.get_connection(using).in_atomic_block``, its common case (a sync thread
    that has its connection) read straight from the store ``_sync_store`` found: Django's
    own lookup asks asyncio for a running loop by catching its RuntimeError, through two
    Python layers, about a microsecond per enqueue. Code with a running loop, a thread
    without its connection yet (made here, as Django does), and a Local replaced since
    (a store of others' connections) take Django's lookup itself.
    """
    local, store = _SYNC_STORE
    if (
        connections._connections is local  # type: ignore[attr-defined]
        and asyncio._get_running_loop() is None
    ):
        connection = getattr(store, DEFAULT_DB_ALIAS if using is None else using, None)
        if connection is not None:
            return connection.in_atomic_block
    return transaction.get_connection(using).in_atomic_block


def _options(
    group: str,
    dedup_key: str | None,
    dedup_ttl: float | None,
    wait_replicas: int | None,
    wait_timeout: float | None,
) -> tuple[str | None, str | None, float, tuple[int, float] | None]:
    """Check an enqueue's de-duplication and replica options (InvalidTask, InvalidKeyPart);
    return the checked key, its Redis key, the TTL in seconds (0.0 without a key nor a
    TTL), and (replicas, timeout in seconds) when replicas are awaited, else None."""
    settings = app_settings
    dedup = None
    if dedup_key is not None:
        dedup_key = validate_key_part(dedup_key, "de-duplication key")
        dedup = make_key(COMPONENT, group, "dedup", dedup_key)
    ttl = 0.0  # the defaults from settings are checked at start-up (checks.py)
    if dedup is not None or dedup_ttl is not None:
        ttl = validate_seconds(
            settings.QUEUE_DEDUP_TTL if dedup_ttl is None else dedup_ttl,
            "dedup_ttl",
            allow_zero=False,
        )
    if wait_replicas is None:
        wait_replicas = settings.QUEUE_WAIT_REPLICAS
    if type(wait_replicas) is not int or wait_replicas < 0:
        check_count(wait_replicas, "wait_replicas")
    if wait_replicas or wait_timeout is not None:
        wait_timeout = validate_seconds(
            settings.QUEUE_WAIT_TIMEOUT if wait_timeout is None else wait_timeout,
            "wait_timeout",
            allow_zero=False,
        )
    # The timeout was checked above whenever replicas are awaited.
    replicas = (wait_replicas, wait_timeout) if wait_replicas and wait_timeout else None
    return dedup_key, dedup, ttl, replicas


# What ``_options`` gives for an enqueue without any (nor QUEUE_WAIT_REPLICAS).
_NO_OPTIONS = (None, None, 0.0, None)


class PreparedPush(NamedTuple):
    """An enqueue checked and built, ready to send on either face: the script's KEYS and
    ARGV, (replicas, timeout in seconds) when the push waits for replicas, and the keys
    of an earlier run's result to delete first (a task id given by the caller)."""

    task_id: str
    keys: tuple[str, ...]
    argv: list[Any]
    replicas: tuple[int, float] | None
    stale: tuple[str, ...]


# PreparedPush(...) without the Python __new__ a NamedTuple has.
_new_tuple = tuple.__new__


# A name or key part as a JSON string (key parts may hold quotes or non-ASCII text).
_json_string = lru_cache(maxsize=1024)(json.dumps)


def _holder(prepared: PreparedPush, reply: Any) -> str:
    """The id of the task holding the place, from queue_enqueue.lua's reply: 1 when this
    task was stored, else the id (a string) of the task holding the de-duplication key."""
    if type(reply) is int:
        return prepared.task_id
    return reply.decode() if isinstance(reply, bytes) else str(reply)


def _json_time(microseconds: int) -> str:
    """Seconds since the epoch as a JSON number, to the microsecond: integer arithmetic
    costs a fraction of float's shortest-repr formatting."""
    seconds, fraction = divmod(microseconds, 1_000_000)
    # The six digits by a slice: a format spec (":06d") runs code little else runs.
    return f"{seconds}.{str(1_000_000 + fraction)[1:]}"


class TaskQueue:
    """The named queues of one group (hash tag); ``group`` defaults to QUEUE_GROUP.

    ``client``: a client or cluster client, or a redis.asyncio one for ``aenqueue``
    (``faces.clients``).
    """

    def __init__(self, group: str | None = None, *, client: Any = None) -> None:
        group = app_settings.QUEUE_GROUP if group is None else group
        valid = _groups.get(group) if type(group) is str else None
        self.group = valid if valid is not None else _valid_group(group)
        self.client, self.aclient = faces.clients(client)

    # -- keys -------------------------------------------------------------------

    def key(self, *roles: str) -> str:
        """The key of fixed ``roles`` ("tasks", "q", queue name), built once per process."""
        return _group_key(app_settings.KEY_PREFIX, self.group, roles)

    def queue_key(self, queue: str) -> str:
        return self.key("q", validate_key_part(queue, "queue"))

    def result_key(self, task_id: str) -> str:
        return make_key(COMPONENT, self.group, "result", validate_key_part(task_id, "task id"))

    def done_key(self, task_id: str) -> str:
        """The list a task's waiters block on (``results.py``)."""
        return make_key(COMPONENT, self.group, "done", validate_key_part(task_id, "task id"))

    def abort_key(self, task_id: str) -> str:
        """The mark a cancel of a running task sets for its worker (``cancel``)."""
        return make_key(COMPONENT, self.group, "abort", validate_key_part(task_id, "task id"))

    def result(self, task_id: str) -> Result:
        """The handle of the task ``task_id`` of this group, to read or wait for its result."""
        return Result(validate_key_part(task_id, "task id"), self)

    # -- enqueue ----------------------------------------------------------------

    def enqueue(
        self,
        name: str,
        *,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        queue: str = "default",
        delay: float = 0.0,
        max_retries: int | None = None,
        dedup_key: str | None = None,
        dedup_ttl: float | None = None,
        on_commit: bool = True,
        using: str | None = None,
        task_id: str | None = None,
        wait_replicas: int | None = None,
        wait_timeout: float | None = None,
        expires: float | dt.datetime | None = None,
    ) -> Result:
        """Enqueue a run of the task registered as ``name``; return its ``Result`` (its id).

        ``delay`` seconds > 0 puts it in the delayed set for the scheduler; a delay ≤ 0
        (a due time already passed) makes it ready now.
        ``dedup_key``: until the task that took the key is done or has failed for good
        (a retry keeps it), and at most ``dedup_ttl`` seconds (default QUEUE_DEDUP_TTL),
        another enqueue with it stores nothing and returns the first task's id; taking
        the key and pushing are one atomic step. ``task_id``: a stable id of your own
        (a key part), e.g. to find the task again; a random one by default.
        Inside a transaction of the ``using`` database the push happens on commit
        (nothing is sent if it rolls back) unless ``on_commit=False``. Every
        argument is checked first: InvalidTask / InvalidKeyPart, nothing written.
        The name need not be registered in this process; a worker that does not
        know it puts the task in the failed registry.
        ``wait_replicas`` (default QUEUE_WAIT_REPLICAS): replicas that must have the
        task before this returns (Redis WAIT, up to ``wait_timeout`` seconds, default
        QUEUE_WAIT_TIMEOUT); fewer raise TaskNotReplicated, the task being stored on
        the master only.
        ``expires``: seconds from now, or an aware datetime; a task no worker started by
        then is not run, and its result says EXPIRED.
        """
        prepared = self._prepare(
            name, args, kwargs, queue, delay, max_retries, dedup_key, dedup_ttl,
            task_id, wait_replicas, wait_timeout, "task", False,
            None if expires is None else results_module.check_expires(expires),
        )  # fmt: skip
        if on_commit and _in_atomic_block(using):
            transaction.on_commit(partial(self._send, prepared), using=using)
            return Result(prepared.task_id, self)
        return Result(self._send(prepared), self)

    async def aenqueue(
        self,
        name: str,
        *,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        queue: str = "default",
        delay: float = 0.0,
        max_retries: int | None = None,
        dedup_key: str | None = None,
        dedup_ttl: float | None = None,
        task_id: str | None = None,
        wait_replicas: int | None = None,
        wait_timeout: float | None = None,
        expires: float | dt.datetime | None = None,
    ) -> Result:
        """The async twin of ``enqueue``, on this queue's redis.asyncio client (the one
        given as ``client``, else ``get_async_redis()``): the same checks, record and
        script. It pushes at once: no database transaction spans an ``await`` (Django runs
        them in its sync thread), so there is no ``on_commit``."""
        prepared = self._prepare(
            name, args, kwargs, queue, delay, max_retries, dedup_key, dedup_ttl,
            task_id, wait_replicas, wait_timeout, "task", False,
            None if expires is None else results_module.check_expires(expires),
        )  # fmt: skip
        return Result(await faces.arun(self._push(prepared), self.aclient), self)

    def _enqueue(
        self,
        name: str,
        args: Sequence[Any],
        kwargs: dict[str, Any] | None,
        queue: str,
        delay: float,
        max_retries: int | None,
        dedup_key: str | None,
        dedup_ttl: float | None,
        on_commit: bool,
        using: str | None,
        task_id: str | None,
        wait_replicas: int | None,
        wait_timeout: float | None,
        *,
        kind: str,
        front: bool,
    ) -> str:
        """``enqueue`` with the record's ``kind`` (the Tasks backend's runs are "django"),
        and ``front``: a ready task goes to the head of its queue (a higher priority)."""
        prepared = self._prepare(
            name, args, kwargs, queue, delay, max_retries, dedup_key, dedup_ttl,
            task_id, wait_replicas, wait_timeout, kind, front,
        )  # fmt: skip
        if on_commit and _in_atomic_block(using):
            transaction.on_commit(partial(self._send, prepared), using=using)
            return prepared.task_id
        return self._send(prepared)

    def _prepare(
        self,
        name: str,
        args: Sequence[Any],
        kwargs: dict[str, Any] | None,
        queue: str,
        delay: float,
        max_retries: int | None,
        dedup_key: str | None,
        dedup_ttl: float | None,
        task_id: str | None,
        wait_replicas: int | None,
        wait_timeout: float | None,
        kind: str,
        front: bool,
        expires_at: float | None = None,
    ) -> "PreparedPush":
        """Check every argument of an enqueue and build its record and script call (both
        faces): InvalidTask / InvalidKeyPart before anything is sent.

        The common cases of the checks are inline (names checked before, a float delay,
        int counts, no option of ``_options``); anything else goes to the check that
        converts or raises."""
        settings = app_settings
        prefix = settings.KEY_PREFIX
        named = (
            _names.get((prefix, self.group, name, queue))
            if type(name) is str and type(queue) is str
            else None
        )
        queue, head, enqueue_keys = named or _named(prefix, self.group, name, queue)
        arguments = encode_arguments(args, kwargs)
        # Floats compared with floats: a comparison with an int takes a slower path.
        if type(delay) is not float or not 0.0 <= delay < math.inf:
            delay = max(0.0, validate_seconds(delay, "delay", allow_negative=True))
        if max_retries is None:
            max_retries = settings.QUEUE_MAX_RETRIES
        if type(max_retries) is not int or max_retries < 0:
            check_count(max_retries, "max_retries")
        # The options an enqueue seldom has are checked apart (``_options``).
        dedup_key, dedup, ttl, replicas = (
            _options(self.group, dedup_key, dedup_ttl, wait_replicas, wait_timeout)
            if dedup_key is not None
            or dedup_ttl is not None
            or wait_replicas is not None
            or wait_timeout is not None
            or settings.QUEUE_WAIT_REPLICAS
            or type(settings.QUEUE_WAIT_REPLICAS) is not int  # False: checked, and refused
            else _NO_OPTIONS
        )
        stale: tuple[str, ...] = ()
        if task_id is None:
            task_id = new_task_id()
            id_json = f'"{task_id}"'  # hex digits need no escaping
        else:
            task_id = validate_key_part(task_id, "task id")
            id_json = json.dumps(task_id)
            if kind == "task":  # the Tasks backend wrote this run's record already
                stale = (
                    self.result_key(task_id), self.done_key(task_id), self.abort_key(task_id)
                )  # fmt: skip
        now = time.time_ns() // 1000
        enqueued_at = _json_time(now)
        # "ready_at" is when it may run (the scheduler moves it then): a queue's backlog age
        # counts from there, not from the enqueue of a delayed task. The record is written
        # as JSON text around the arguments' JSON (made to check them): its other members
        # are numbers and checked names.
        ready_at = _json_time(now + int(delay * 1_000_000)) if delay else enqueued_at
        dedup_member = f',"dedup":{json.dumps(dedup_key)}' if dedup_key is not None else ""
        if expires_at is not None:  # host time, as enqueued_at; compared by the worker
            dedup_member += f',"expires_at":{_json_time(int(expires_at * 1_000_000))}'
        body = (
            f'{{"id":{id_json},{head}{max_retries},"enqueued_at":{enqueued_at},'
            f'"ready_at":{ready_at},"kind":{_json_string(kind)}{dedup_member},{arguments}}}'
        )
        # Sent only when one is needed: the common case passes four keys and four values.
        delay_ms = int(delay * 1000) if delay else 0
        keys = _delayed_keys(prefix, self.group) if delay_ms else enqueue_keys
        argv: list[Any] = [task_id, body, queue, WAKE_CAP]
        if dedup is not None:
            keys = (*keys, dedup)
        if delay_ms or dedup is not None or front:
            argv += [delay_ms, max(1, int(ttl * 1000)) if ttl else 1, 1 if front else 0]
        return _new_tuple(PreparedPush, (task_id, keys, argv, replicas, stale))

    def _push(self, prepared: "PreparedPush") -> faces.Steps[str]:
        """The core of a push: the enqueue script (with WAIT when replicas are awaited),
        then the group's registry note; return the id of the task holding the place."""
        if prepared.stale:
            # A reused id: an earlier run's result must not answer for this one. Before
            # the push, so a worker cannot record the new run first.
            yield faces.command("delete", *prepared.stale)
        script = faces.script("queue_enqueue", prepared.keys, prepared.argv)
        if prepared.replicas is None:
            reply = yield script
        else:
            # WAIT counts replica acknowledgements of its own connection's writes, so the
            # script and WAIT share one pipeline; on a cluster, that of the group's node.
            replicas, timeout = prepared.replicas
            wait = faces.command("execute_command", "WAIT", replicas, max(1, int(timeout * 1000)))
            reply, acknowledged = yield faces.pipeline([script, wait], key=prepared.keys[0])
            if acknowledged < replicas:
                raise TaskNotReplicated(prepared.task_id, acknowledged, replicas, timeout)
        yield from registry.noting(COMPONENT, self.group)  # once the group exists
        return _holder(prepared, reply)

    def _send(self, prepared: "PreparedPush") -> str:
        """The sync face of ``_push``, its common case (no replicas awaited) without
        stepping the core: the script as the core sends it, then the registry's note
        only when it has something to send (``registry.recently_noted``)."""
        client = self.client
        if prepared.replicas is not None or prepared.stale:
            return faces.run(self._push(prepared), client)
        reply = lua.call(client, "queue_enqueue", prepared.keys, prepared.argv)
        if not registry.recently_noted(client, COMPONENT, self.group):
            faces.run(registry.noting(COMPONENT, self.group), client)
        return _holder(prepared, reply)

    def validate(
        self, name: str, args: Any, kwargs: Any, queue: str
    ) -> tuple[str, list[Any], dict[str, Any], str]:
        """Check a task name, its arguments and queue name; return them normalised."""
        name, queue, arguments = self._checked(name, args, kwargs, queue)
        decoded = json.loads(f"{{{arguments}}}")  # what a worker reads back: tuples are lists
        return name, decoded["args"], decoded["kwargs"], queue

    @staticmethod
    def _checked(name: str, args: Any, kwargs: Any, queue: str) -> tuple[str, str, str]:
        """Check a task name, queue name and arguments; return the names and the
        arguments' JSON (see encode_arguments)."""
        name = validate_task_name(name)
        queue = validate_key_part(queue, "queue")
        return name, queue, encode_arguments(args, kwargs)

    # -- worker side ------------------------------------------------------------

    def dequeue(
        self, queues: Sequence[str], worker_id: str, lease: float
    ) -> tuple[dict[str, Any], int] | None:
        """Move the first task of the first non-empty queue in flight under ``worker_id``.

        Return (task record, delivery count) or None when every queue is empty.
        The lease ends ``lease`` seconds from now unless extended.
        """
        claimed = self.claim(queues, worker_id, lease, 1)
        return claimed[0] if claimed else None

    def claim(
        self, queues: Sequence[str], worker_id: str, lease: float, count: int
    ) -> list[tuple[dict[str, Any], int]]:
        """Move up to ``count`` ready tasks in flight under ``worker_id``, in one round trip.

        Tasks come from the first non-empty queue first, then the next ones; a task
        delivered before (its worker died, or a retry) only ever comes alone. Return
        (task record, delivery count) pairs, in queue order; empty when every queue is.
        """
        return self.claim_next(queues, worker_id, lease, count)[0]

    def claim_next(
        self,
        queues: Sequence[str],
        worker_id: str,
        lease: float,
        count: int,
        done: Sequence[dict[str, Any]] = (),
        *,
        wait: float = 0.0,
        results: Mapping[str, str] | None = None,
        limits: Mapping[str, Limit] | None = None,
    ) -> tuple[list[tuple[dict[str, Any], int]], list[str]]:
        """Record the ``done`` task records as done, then ``claim`` up to ``count`` tasks.

        One script call: a worker's one round trip between two tasks. Return (claimed
        pairs, ids of done tasks ``worker_id`` no longer held, which are left as they are).
        The de-duplication key of a task recorded done is released.
        ``wait`` > 0: first block up to that many seconds (≥ 0.01) for a wake-up token,
        in the same round trip: the server runs the claim as soon as the token comes,
        so an idle worker gets its task one round trip after the enqueue.
        ``results``: done task id -> its result JSON, written with its record as done.
        ``limits``: limited queue (``limited_queue``) among ``queues`` -> its ``Limit``:
        a task is taken from it only while fewer than its ``concurrency`` are in flight
        and fewer than its ``rate`` were claimed in the last ``window`` seconds.
        """
        keys = list(_claim_keys(app_settings.KEY_PREFIX, self.group, tuple(queues)))
        results = results or {}
        kept = [(r["id"], results[r["id"]]) for r in done if results.get(r["id"])]
        args = [worker_id, int(lease * 1000), count, len(queues), len(done), len(kept)]
        args += [results_module.ttl_ms() if kept else 0, len(limits or ())]
        if limits:
            for place, queue in enumerate(queues, 1):
                limit = limits.get(queue)
                if limit is not None:
                    keys += [self.permits_key(queue), self.starts_key(queue)]
                    args += [place, limit.concurrency, limit.rate, round(limit.window * 1000)]
        for task_id, _ in kept:
            keys += [self.result_key(task_id), self.done_key(task_id)]
        deduped = [record for record in done if record.get("dedup")]
        keys += [self.dedup_key(record["dedup"]) for record in deduped]
        args += [record["id"] for record in done]
        for pair in kept:
            args += pair
        args += [record["id"] for record in deduped]
        if wait > 0:
            # A pipeline's commands run in order on the server: the script runs right
            # after BLPOP returns (a token or the timeout), with no reply in between.
            with on_slot(self.client, keys[0]) as server:
                pipe = server.pipeline(transaction=False)
                pipe.blpop([keys[4]], timeout=max(0.01, wait))
                lua.script(server, "queue_dequeue")(keys=keys, args=args, client=pipe)
                _token, (lost, found) = pipe.execute()
        else:
            lost, found = lua.script(self.client, "queue_dequeue")(keys=keys, args=args)
        claimed = [
            (json.loads(found[index + 1]), int(found[index + 2]))
            for index in range(0, len(found), 3)
        ]
        return claimed, [task_id.decode() for task_id in lost]

    def permits_key(self, queue: str) -> str:
        """The zset of the permits of a limited queue: id of the task in flight -> when
        it took its permit (ms)."""
        return self.key("permits", validate_key_part(queue, "queue"))

    def starts_key(self, queue: str) -> str:
        """The log of the claims of a rate-limited queue: start -> when (ms)."""
        return self.key("starts", validate_key_part(queue, "queue"))

    def dedup_key(self, key: str) -> str:
        """The key a de-duplication key part ``key`` is held under."""
        return make_key(
            COMPONENT, self.group, "dedup", validate_key_part(key, "de-duplication key")
        )

    def extend(self, task_id: str, worker_id: str, lease: float) -> bool:
        """Push the lease of a held task to ``lease`` seconds from now; False if lost."""
        return not self.extend_all([task_id], worker_id, lease)

    def extend_all(self, task_ids: Sequence[str], worker_id: str, lease: float) -> list[str]:
        """Push the leases of held tasks to ``lease`` seconds from now; return the lost ids."""
        keys = [self.key("inflight"), self.key("owners")]
        lost = lua.script(self.client, "queue_extend")(
            keys=keys, args=[worker_id, int(lease * 1000), *task_ids]
        )
        return [task_id.decode() for task_id in lost]

    def beat(
        self, worker_id: str, task_ids: Sequence[str], lease: float
    ) -> tuple[list[str], list[str]]:
        """A worker's heartbeat: record it alive and ``extend_all`` its tasks' leases.

        The reaper requeues every task of a worker that has not beaten for
        QUEUE_WORKER_TIMEOUT seconds, whatever its lease. Return (the lost ids, the ids
        of held tasks a cancel marked for abort).
        """
        keys = [self.key("inflight"), self.key("owners"), self.key("workers")]
        keys += [self.abort_key(task_id) for task_id in task_ids]
        reply = lua.script(self.client, "queue_extend")(
            keys=keys, args=[worker_id, int(lease * 1000), *task_ids]
        )
        if not task_ids:  # no abort marks given: the lost ids alone
            return [task_id.decode() for task_id in reply], []
        lost, aborting = reply
        return [i.decode() for i in lost], [i.decode() for i in aborting]

    def marked(self, task_ids: Sequence[str]) -> list[str]:
        """The ids among ``task_ids`` a cancel marked for abort (one round trip)."""
        if not task_ids:
            return []
        with on_slot(self.client, self.key("tasks")) as server:
            pipe = server.pipeline(transaction=False)
            for task_id in task_ids:
                pipe.exists(self.abort_key(task_id))
            found = pipe.execute()
        return [task_id for task_id, mark in zip(task_ids, found, strict=True) if mark]

    def retire(self, worker_id: str) -> None:
        """Forget a worker's heartbeat (it stopped cleanly, holding nothing)."""
        self.client.hdel(self.key("workers"), worker_id)

    def workers(self) -> dict[str, float]:
        """Return the workers that beat, with their last heartbeat (seconds, server clock)."""
        beats = self.client.hgetall(self.key("workers"))
        return {worker.decode(): int(ms) / 1000 for worker, ms in beats.items()}

    def acknowledge(
        self,
        task_ids: Sequence[str],
        worker_id: str,
        *,
        records: Sequence[dict[str, Any]] = (),
        results: Mapping[str, str] | None = None,
    ) -> list[str]:
        """Record held tasks as done (``settle(..., "done")`` for many, in one round trip).

        ``records``: the tasks' records, to release their de-duplication keys;
        ``results``: id -> result JSON, written in the same step. Return the ids
        ``worker_id`` no longer held (reaped or deleted), left as they are.
        """
        known = {record["id"]: record for record in records}
        done = [known.get(task_id, {"id": task_id}) for task_id in task_ids]
        return self.claim_next([], worker_id, 0, 0, done, results=results)[1]

    def release(self, records: Sequence[dict[str, Any]], worker_id: str) -> int:
        """Put held tasks that were never started back at the head of their queues, in order.

        Their delivery is not counted. Return how many ``worker_id`` still held.
        """
        keys = [self.key(role) for role in ("inflight", "owners", "deliveries", "wake")]
        keys += [self.queue_key(record["queue"]) for record in records]
        args = [worker_id, WAKE_CAP, *(record["id"] for record in records)]
        return int(lua.script(self.client, "queue_release")(keys=keys, args=args))

    def settle(
        self,
        task_id: str,
        worker_id: str,
        outcome: str,
        payload: dict[str, Any] | None = None,
        delay: float = 0.0,
        *,
        dedup_key: str | None = None,
        result: str | None = None,
        cancelled: str | None = None,
    ) -> bool:
        """Record ``done``, ``expired``, ``cancelled`` (aborted), ``retry`` (payload:
        updated record, after ``delay`` s) or ``fail`` (payload: error) for a held task;
        False when the lease was lost.

        ``dedup_key``: the task's de-duplication key part, released unless retried.
        ``result``: the task's result JSON, written in the same step; ``cancelled``: for
        a retry, the CANCELLED result recorded instead if a cancel marked the task.
        """
        keys = [
            self.key(role)
            for role in (
                "tasks", "inflight", "owners", "deliveries",
                "delayed", "failed", "errors", "sched_wake",
            )
        ]  # fmt: skip
        keys += [self.result_key(task_id), self.done_key(task_id), self.abort_key(task_id)]
        if dedup_key:
            keys.append(self.dedup_key(dedup_key))
        argv = [task_id, worker_id, outcome, json.dumps(payload or {}), int(delay * 1000)]
        argv += [result or "", results_module.ttl_ms(), cancelled or ""]
        return bool(lua.script(self.client, "queue_settle")(keys=keys, args=argv))

    def queue_names(self) -> list[str]:
        """Return the names of the group's queues (every queue ever enqueued to), sorted."""
        return sorted(name.decode() for name in self.client.smembers(self.key("queues")))

    def reap(self, max_deliveries: int | None = None) -> tuple[int, int, float | None]:
        """Requeue tasks whose lease expired or whose worker stopped beating for
        QUEUE_WORKER_TIMEOUT seconds, or quarantine them after ``max_deliveries``.

        Return (requeued, quarantined, seconds until the next lease deadline or None).
        """
        if max_deliveries is None:
            max_deliveries = int(app_settings.QUEUE_MAX_DELIVERIES)
        names = self.queue_names()
        keys = [
            self.key(role)
            for role in (
                "tasks", "inflight", "owners", "deliveries", "quarantine", "errors", "wake",
                "workers",
            )
        ]  # fmt: skip
        keys += [self.queue_key(name) for name in names]
        timeout_ms = int(float(app_settings.QUEUE_WORKER_TIMEOUT) * 1000)
        requeued, quarantined, next_ms = lua.script(self.client, "queue_reap")(
            keys=keys, args=[max_deliveries, BATCH, WAKE_CAP, timeout_ms, *names]
        )
        if quarantined:
            self._record_quarantined([task_id.decode() for task_id in quarantined])
        return int(requeued), len(quarantined), None if next_ms < 0 else next_ms / 1000

    def _record_quarantined(self, ids: list[str]) -> None:
        """Record a FAILED result for each quarantined task that keeps one, so its state
        is terminal and its waiters wake (a task requeued or deleted meanwhile is left)."""
        from .registry import get_task  # registry.py imports this module

        bodies = self.client.hmget(self.key("tasks"), ids)
        errors = self.client.hmget(self.key("errors"), ids)
        for task_id, body, error in zip(ids, bodies, errors, strict=True):
            if body is None:
                continue
            record = json.loads(body)
            registered = get_task(record["name"])
            if record.get("kind", "task") != "task" or (registered and not registered.result):
                continue
            reason = json.loads(error).get("reason", "") if error else ""
            failed = results_module.encode(
                record, results_module.FAILED, "", finished=time.time(),
                error={"type": "Quarantined", "message": reason, "traceback": ""},
            )  # fmt: skip
            keys = [self.key("quarantine"), self.result_key(task_id), self.done_key(task_id)]
            lua.script(self.client, "queue_quarantined")(
                keys=keys, args=[task_id, failed, results_module.ttl_ms()]
            )

    def schedule(self) -> tuple[int, float | None]:
        """Move due delayed tasks to their queues; return (moved, seconds to next due or None)."""
        names = self.queue_names()
        keys = [self.key("tasks"), self.key("delayed"), self.key("wake")]
        keys += [self.queue_key(name) for name in names]
        moved, next_ms = lua.script(self.client, "queue_schedule")(
            keys=keys, args=[BATCH, WAKE_CAP, *names]
        )
        return int(moved), None if next_ms < 0 else next_ms / 1000

    def wait_for_schedule(self, timeout: float) -> None:
        """Block up to ``timeout`` seconds for a new delayed task or retry."""
        self.client.blpop([self.key("sched_wake")], timeout=max(0.01, timeout))

    # -- inspection (admin) -----------------------------------------------------

    def length(self, queue: str) -> int:
        """Return the number of ready tasks in ``queue``."""
        return int(self.client.llen(self.queue_key(queue)))

    def counts(self) -> dict[str, Any]:
        """Return ready tasks per queue, the sizes of delayed, in-flight, failed,
        quarantine, and the ``limits`` of the limited queues."""
        names = self.queue_names()
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.llen(self.queue_key(name))
        for role in ("delayed", "inflight", "failed", "quarantine"):
            pipe.zcard(self.key(role))
        values = pipe.execute()
        counts: dict[str, Any] = {"queues": dict(zip(names, values[: len(names)], strict=True))}
        counts.update(
            zip(("delayed", "inflight", "failed", "quarantine"), values[len(names) :], strict=True)
        )
        counts["limits"] = self.limits(names)
        return counts

    def limits(self, names: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
        """Return, per limited queue (``limited_queue``) of the group: the ``task``, its
        ``concurrency`` and ``rate_limit`` as registered in this process (None: none, or
        not registered here), the permits ``held`` (task id and since when, seconds; a
        permit whose task left the in-flight set is free and not listed), the runs
        ``started`` in the rate limit's last window, and the tasks ``waiting``.

        ``names``: the group's queue names, if read already."""
        from .registry import get_task  # registry.py imports this module

        names = self.queue_names() if names is None else names
        limited = {name: get_task(name[1:]) for name in names if name.startswith("@")}
        if not limited:
            return {}
        with on_slot(self.client, self.key("tasks")) as server:  # TIME: the group's node
            return self._limits(server, limited)

    def _limits(self, server: Any, limited: dict[str, Any]) -> dict[str, dict[str, Any]]:
        pipe = server.pipeline(transaction=False)
        pipe.time()
        for name in limited:
            pipe.zrange(self.permits_key(name), 0, -1, withscores=True)
            pipe.llen(self.queue_key(name))
        (seconds, micros), *replies = pipe.execute()
        now_ms = seconds * 1000 + micros // 1000
        holders = [member for permits in replies[::2] for member, _ in permits]
        pipe = server.pipeline(transaction=False)
        for member in holders:
            pipe.zscore(self.key("inflight"), member)
        for name, registered in limited.items():
            window = registered.limit.window if registered and registered.limit else 0.0
            pipe.zcount(self.starts_key(name), f"({now_ms - round(window * 1000)}", "+inf")
        leases = pipe.execute()
        running = {member for member, lease in zip(holders, leases, strict=False) if lease}
        found = {}
        started = leases[len(holders) :]
        for (name, registered), permits, waiting, count in zip(
            limited.items(), replies[::2], replies[1::2], started, strict=True
        ):
            found[name] = {
                "task": name[1:],
                "concurrency": registered.concurrency if registered else None,
                "rate_limit": registered.rate_limit if registered else None,
                "held": [
                    {"id": member.decode(), "since": since / 1000}
                    for member, since in permits
                    if member in running
                ],
                "started": int(count) if registered and registered.rate_limit else None,
                "waiting": int(waiting),
            }
        return found

    def peek(self, queue: str, start: int = 0, count: int = 20) -> list[TaskInfo]:
        """Return up to ``count`` ready tasks of ``queue`` from position ``start`` (0: next)."""
        start, count = _page(start, count)
        ids = self.client.lrange(self.queue_key(queue), start, start + count - 1)
        return self._infos([i.decode() for i in ids])

    def delayed(self, start: int = 0, count: int = 20) -> list[TaskInfo]:
        """Return delayed tasks and retries, soonest first, with ``due_at``."""
        return self._zset_page("delayed", "due_at", start, count)

    def inflight(self, start: int = 0, count: int = 20) -> list[TaskInfo]:
        """Return tasks being run, earliest lease deadline first, with worker and deliveries."""
        infos = self._zset_page("inflight", "lease_until", start, count)
        if not infos:
            return infos
        owners = self.client.hmget(self.key("owners"), [info.id for info in infos])
        return [
            replace(info, worker=owner.decode() if owner else None)
            for info, owner in zip(infos, owners, strict=True)
        ]

    def failed(self, start: int = 0, count: int = 20) -> list[TaskInfo]:
        """Return failed tasks, oldest failure first, with error and traceback."""
        return self._zset_page("failed", "failed_at", start, count)

    def quarantined(self, start: int = 0, count: int = 20) -> list[TaskInfo]:
        """Return quarantined tasks (delivered too often without finishing), oldest first."""
        return self._zset_page("quarantine", "failed_at", start, count)

    def get(self, task_id: str) -> TaskInfo:
        """Return one task wherever it is; raise TaskNotFound."""
        infos = self._infos([validate_key_part(task_id, "task id")])
        if not infos:
            raise TaskNotFound(task_id)
        return infos[0]

    # -- operations (admin) -----------------------------------------------------

    def requeue(self, task_id: str) -> None:
        """Put a failed or quarantined task back at the tail of its queue, retries reset,
        and clear its result (its waiters wait for the new run).

        Raise TaskNotFound when it is in neither registry.
        """
        task_id = validate_key_part(task_id, "task id")
        body = self.client.hget(self.key("tasks"), task_id)
        if body is None:
            raise TaskNotFound(task_id, "in the failed registry or quarantine")
        record = json.loads(body)
        record["retries"] = 0
        keys = [
            self.key(role) for role in ("tasks", "failed", "quarantine", "errors", "deliveries")
        ]
        keys += [self.queue_key(record["queue"]), self.key("wake")]
        keys += [self.done_key(task_id), self.abort_key(task_id)]
        if record.get("kind", "task") == "task":  # the Tasks backend's run reads its own
            keys.append(self.result_key(task_id))
        requeued = lua.script(self.client, "queue_requeue")(
            keys=keys, args=[task_id, json.dumps(record, separators=(",", ":")), WAKE_CAP]
        )
        if not requeued:
            raise TaskNotFound(task_id, "in the failed registry or quarantine")

    def _cancel(self, task_id: str) -> faces.Steps[results_module.Cancel]:
        """The core of ``cancel``: read the task's record (its queue, de-duplication key
        and the CANCELLED result to record), then one script decides."""
        task_id = validate_key_part(task_id, "task id")
        body = yield faces.command("hget", self.key("tasks"), task_id)
        record = json.loads(body) if body is not None else {"queue": "default"}
        if record.get("kind", "task") != "task":
            raise InvalidTask(
                f"task {task_id} is a Django Tasks run, which has no cancelled state: "
                "delete it instead"
            )
        keys = [self.key("tasks"), self.queue_key(record["queue"])]
        keys += [self.key(role) for role in ("delayed", "owners", "deliveries", "failed")]
        keys += [self.key("quarantine"), self.result_key(task_id), self.done_key(task_id)]
        keys.append(self.abort_key(task_id))
        if record.get("dedup"):
            keys.append(self.dedup_key(record["dedup"]))
        from .registry import get_task  # registry.py imports this module

        registered = get_task(record["name"]) if body is not None else None
        result = ""
        if body is not None and (registered is None or registered.result):
            now = time.time()
            result = results_module.encode(record, results_module.CANCELLED, "", finished=now)
        reply = yield faces.script("queue_cancel", keys, [task_id, result, results_module.ttl_ms()])
        return results_module.Cancel(reply.decode() if isinstance(reply, bytes) else reply)

    def cancel(self, task_id: str) -> results_module.Cancel:
        """Cancel a task: one that waits (ready, delayed, or for a retry) is removed and
        recorded CANCELLED in one script (a worker's claim of it is either before or
        after: exactly one wins) and never runs; a running one is marked for abort
        (``aborted()`` says True in it, and QUEUE_CANCEL_GRACE seconds later its pool
        ends it; it is recorded CANCELLED once it stops, unless it ended on its own
        first). Return a ``Cancel``: CANCELLED, ABORTING, FINISHED or UNKNOWN.

        InvalidKeyPart for an id that cannot be one; InvalidTask for a Django Tasks run.
        """
        return faces.run(self._cancel(task_id), self.client)

    async def acancel(self, task_id: str) -> results_module.Cancel:
        """The async twin of ``cancel``."""
        return await faces.arun(self._cancel(task_id), self.aclient)

    def delete(self, task_id: str) -> None:
        """Remove a task wherever it is; raise TaskNotFound if it does not exist."""
        task_id = validate_key_part(task_id, "task id")
        body = self.client.hget(self.key("tasks"), task_id)
        if body is None:
            raise TaskNotFound(task_id)
        keys = [self.key("tasks"), self.queue_key(json.loads(body)["queue"])]
        keys += [
            self.key(role)
            for role in (
                "delayed", "inflight", "owners", "deliveries", "failed", "quarantine", "errors",
            )
        ]  # fmt: skip
        if not lua.script(self.client, "queue_delete")(keys=keys, args=[task_id]):
            raise TaskNotFound(task_id)

    # -- helpers ----------------------------------------------------------------

    def _zset_page(self, role: str, field: str, start: int, count: int) -> list[TaskInfo]:
        start, count = _page(start, count)
        entries = self.client.zrange(self.key(role), start, start + count - 1, withscores=True)
        infos = self._infos([member.decode() for member, _ in entries])
        scores = {member.decode(): score / 1000 for member, score in entries}
        return [replace(info, **{field: scores[info.id]}) for info in infos]

    def _infos(self, ids: list[str]) -> list[TaskInfo]:
        if not ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(self.key("tasks"), ids)
        pipe.hmget(self.key("deliveries"), ids)
        pipe.hmget(self.key("errors"), ids)
        bodies, deliveries, errors = pipe.execute()
        infos = []
        for body, delivered, error in zip(bodies, deliveries, errors, strict=True):
            if body is None:  # deleted between the two reads
                continue
            record = json.loads(body)
            problem = json.loads(error) if error else {}
            infos.append(
                TaskInfo(
                    id=record["id"],
                    name=record["name"],
                    queue=record["queue"],
                    args=record["args"],
                    kwargs=record["kwargs"],
                    retries=record.get("retries", 0),
                    max_retries=record.get("max_retries", 0),
                    enqueued_at=record.get("enqueued_at"),
                    deliveries=int(delivered or 0),
                    failed_at=problem.get("at"),
                    error=problem.get("reason"),
                    traceback=problem.get("traceback"),
                    kind=record.get("kind", "task"),
                )
            )
        return infos


def _page(start: object, count: object) -> tuple[int, int]:
    checked = []
    for value, what in ((start, "start"), (count, "count")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidTask(f"{what} must be a non-negative integer, got {value!r}")
        checked.append(value)
    first, size = checked
    if size == 0 or size > 1000:
        raise InvalidTask(f"count must be between 1 and 1000, got {size}")
    return first, size
