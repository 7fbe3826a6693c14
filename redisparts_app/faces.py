"""One core, two faces: a service call written once, run on a sync or an asyncio client.

Import: ``from redisparts_app import faces``.

A service method's *core* holds its whole logic (validation, key names, script
arguments, decoding the replies) and no I/O: a generator that yields the Redis
operations it needs, receives each one's reply, and returns the call's result::

    def _send(self, sender, text):             # the core
        reply = yield faces.script("mail_send", keys, args)
        return int(reply)

    def send(self, sender, text):              # the sync face
        return faces.run(self._send(sender, text), self.client)

    async def asend(self, sender, text):       # the async face
        return await faces.arun(self._send(sender, text), self.aclient)

The operations are ``command``, ``script``, ``pipeline`` and the others below, and
``CLIENT``; an error of one is raised inside the core, which may catch it.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable, Generator, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from types import GeneratorType
from typing import Any, TypeAlias, TypeVar

import redis.asyncio
from redis.exceptions import NoScriptError, ResponseError

from . import lua, wakeups
from .connection import (
    SLOT_MIGRATING_ERRORS,
    aon_slot,
    atransaction,
    awhile_resharding,
    by_node,
    get_redis,
    is_async_client,
    is_pipeline,
    on_slot,
    resolve_async_client,
    resolve_client,
    while_resharding,
)
from .connection import (
    transaction as sync_transaction,
)
from .multiplexed import MultiplexedRedis

__all__ = [
    "CLIENT",
    "Core",
    "Op",
    "Steps",
    "arun",
    "clients",
    "command",
    "on",
    "pipeline",
    "pop_signal",
    "run",
    "script",
    "scripts",
    "sleep",
    "transaction",
    "watch",
]

T = TypeVar("T")


class Op:
    """One Redis operation of a core; ``then`` decodes its reply (None: as it comes)."""

    __slots__ = ()
    then: Callable[[Any], Any] | None


@dataclass(slots=True)
class Command(Op):
    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    then: Callable[[Any], Any] | None = None


@dataclass(slots=True)
class Script(Op):
    name: str
    keys: Sequence[Any]
    args: Sequence[Any]
    then: Callable[[Any], Any] | None = None


@dataclass(slots=True)
class Pipeline(Op):
    ops: list[Command | Script]
    then: Callable[[Any], Any] | None = None
    key: str | None = None


@dataclass(slots=True)
class Transaction(Op):
    key: str
    ops: list[Command]
    then: Callable[[Any], Any] | None = None


@dataclass(slots=True)
class Watch(Op):
    key: str
    reads: list[Command]
    write: Callable[[list[Any]], list[Command] | None]
    then: Callable[[Any], Any] | None = None
    also: Sequence[str] = ()


@dataclass(slots=True)
class Scripts(Op):
    name: str
    calls: list[tuple[list[str], list[Any]]]
    then: Callable[[Any], Any] | None = None


@dataclass(slots=True)
class On(Op):
    client: Any
    op: Op
    then: Callable[[Any], Any] | None = None


@dataclass(slots=True)
class PopSignal(Op):
    key: str
    seconds: float
    patience: float
    then: Callable[[Any], Any] | None = None


@dataclass(slots=True)
class Sleep(Op):
    seconds: float
    then: Callable[[Any], Any] | None = field(default=None)


class _Client(Op):
    __slots__ = ()
    then = None


# Yield it to receive the client the core runs on.
CLIENT = _Client()

# A core of several steps: yields operations, receives their replies, returns the result.
Steps: TypeAlias = Generator[Op, Any, T]
Core: TypeAlias = Steps[T] | Op


def command(name: str, *args: Any, then: Callable[[Any], Any] | None = None, **kwargs: Any) -> Op:
    """The redis-py method ``name`` called with ``args`` and ``kwargs``."""
    return Command(name, args, kwargs, then)


def script(
    name: str, keys: Sequence[Any], args: Sequence[Any], *, then: Callable[[Any], Any] | None = None
) -> Op:
    """The bundled Lua script ``name`` (``lua/<name>.lua``) run on ``keys`` and ``args``."""
    return Script(name, keys, args, then)


def pipeline(
    ops: list[Any], *, key: str | None = None, then: Callable[[Any], Any] | None = None
) -> Op:
    """Commands and scripts sent together (no MULTI); the reply is the list of replies.

    On a cluster client a cluster pipeline, which sends each node its part; with ``key``,
    one connection of the server holding ``key`` (for WAIT, which counts its own
    connection's writes). A script the server lacks is loaded and sent again, with the
    commands that came after it (so a WAIT after it counts its write).
    """
    return Pipeline(ops, then, key)


def transaction(key: str, ops: list[Any], *, then: Callable[[Any], Any] | None = None) -> Op:
    """Commands run as one MULTI/EXEC on the server holding ``key`` (their keys share its
    hash tag); the reply is EXEC's list of replies."""
    return Transaction(key, ops, then)


def watch(
    key: str,
    reads: list[Any],
    write: Callable[[list[Any]], list[Any] | None],
    *,
    also: Sequence[str] = (),
    then: Callable[[Any], Any] | None = None,
) -> Op:
    """An optimistic transaction on the server holding ``key``: WATCH ``key`` (and the
    keys ``also`` names, in its slot), run the ``reads`` at once, then MULTI, the
    commands ``write(read replies)`` returns, EXEC.

    The reply is ``(read replies, EXEC's replies)``; ``(read replies, None)`` when
    ``write`` returned None (UNWATCH, nothing written). A write of the key by another
    client between WATCH and EXEC raises redis.WatchError in the core, which may retry.
    """
    return Watch(key, reads, write, then, also)


def scripts(
    name: str, calls: list[tuple[list[str], list[Any]]], *, then: Callable[[Any], Any] | None = None
) -> Op:
    """Script ``name`` run once per ``(keys, args)`` (each call's keys in one slot), in one
    pipeline per node; the reply is the list of their replies, in order."""
    return Scripts(name, calls, then)


def on(client: Any, op: Op) -> Op:
    """``op`` sent to ``client`` instead of the core's client: a client of the same face
    (sync, or ``redis.asyncio`` on the async face), for a core that talks to two servers."""
    return On(client, op)


def sleep(seconds: float) -> Op:
    """Wait ``seconds`` (time.sleep on the sync face, asyncio.sleep on the async one)."""
    return Sleep(seconds)


def pop_signal(key: str, seconds: float, patience: float) -> Op:
    """Pop an element of the wake-up list ``key`` with a BLPOP ending ``seconds`` from now
    (at least 2 ms, at most half the socket timeout); the reply is whether one came. The
    waiters of a process on one list take turns at one BLPOP (``wakeups``): a waiter
    waits up to ``patience`` seconds for its turn (the reply is then False)."""
    return PopSignal(key, seconds, patience)


def clients(client: Any) -> tuple[Any, Any]:
    """Return the (sync, async) clients of a service given ``client=``.

    A redis.asyncio client serves the async methods and get_redis() the sync ones; any
    other client (or None: get_redis()) the sync methods, and the async methods then
    use get_async_redis() (the async second of None).
    """
    if is_async_client(client):
        return get_redis(), client
    return resolve_client(client), None


# -- the sync face --------------------------------------------------------------------


def run(core: Core[T], client: Any) -> T:
    """Run ``core`` on the sync ``client`` (a client, cluster client or pipeline)."""
    if type(core) is not GeneratorType:
        return _do(core, client)
    # The hot path of every sync call: sends inlined rather than through _resume, and
    # CLIENT answered here (cores ask for it on their way to a cached check).
    send = core.send
    try:
        op = send(None)
        while True:
            if op is CLIENT:
                op = send(client)
                continue
            try:
                reply = _do(op, client)
            except Exception as exc:
                op = core.throw(exc)
                continue
            op = send(reply)
    except StopIteration as stop:
        return stop.value
    except BaseException:
        _abandon(core)
        raise


class _Result:
    """What a core returned (the executors' loop ends on it)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _abandon(core: Steps[Any]) -> None:
    """Close a core left midway (a cancelled task): a core whose ``finally`` wants one
    more operation (a clean-up write) cannot have it, and its key's TTL or a purge
    clears what it leaves."""
    with suppress(RuntimeError):
        core.close()


def _resume(core: Steps[Any], reply: Any, error: Exception | None) -> Any:
    """Give ``core`` the reply (or raise the error) of its last operation; return its next
    operation, or a _Result once it has returned."""
    try:
        return core.send(reply) if error is None else core.throw(error)
    except StopIteration as stop:
        return _Result(stop.value)


def _do(op: Any, client: Any) -> Any:
    kind = type(op)
    if kind is Script:  # first: the one operation of the hottest calls (locks, semaphores)
        reply = lua.call(client, op.name, op.keys, op.args)
    elif kind is Command:
        reply = getattr(client, op.name)(*op.args, **op.kwargs)
    elif kind is _Client:
        return client
    elif kind is Pipeline:
        reply = _sync_pipeline(client, op)
    elif kind is Transaction:
        reply = sync_transaction(client, op.key, lambda pipe: _queue_all(pipe, op.ops))
    elif kind is Scripts:
        reply = _sync_scripts(client, op.name, op.calls)
    elif kind is Watch:
        reply = while_resharding(client, lambda: _sync_watch(client, op))
    elif kind is PopSignal:
        reply = wakeups.pop_signal(client, op.key, op.seconds, op.patience)
    elif kind is Sleep:
        time.sleep(op.seconds)
        reply = None
    elif kind is On:
        reply = _do(op.op, op.client)
    else:
        raise TypeError(f"a core yielded {op!r}, not a faces operation")
    return reply if op.then is None else op.then(reply)


def _queue_all(pipe: Any, ops: list[Any]) -> None:
    for op in ops:
        if type(op) is Script:  # not pipe.evalsha(), which cluster pipelines refuse
            pipe.execute_command("EVALSHA", lua.sha(op.name), len(op.keys), *op.keys, *op.args)
        else:
            getattr(pipe, op.name)(*op.args, **op.kwargs)


def _sync_watch(client: Any, op: Watch) -> tuple[list[Any], list[Any] | None]:
    with on_slot(client, op.key) as server, server.pipeline(transaction=True) as pipe:
        pipe.watch(op.key, *op.also)
        reads = [getattr(pipe, read.name)(*read.args, **read.kwargs) for read in op.reads]
        writes = op.write(reads)
        if writes is None:
            pipe.unwatch()
            return reads, None
        pipe.multi()
        _queue_all(pipe, writes)
        return reads, pipe.execute()


def _sync_pipeline(client: Any, op: Pipeline) -> list[Any]:
    if is_pipeline(client):  # queue on the caller's pipeline; its execute() sends them
        _queue_all(client, op.ops)
        return client
    if op.key is not None:
        with on_slot(client, op.key) as server:
            return _sync_send(server, op.ops)
    return _sync_send(client, op.ops)


def _sync_send(client: Any, ops: list[Any]) -> list[Any]:
    pipe = client.pipeline(transaction=False)
    _queue_all(pipe, ops)
    replies = pipe.execute(raise_on_error=False)
    again = _unloaded(ops, replies)
    if again:
        for name in {ops[i].name for i in again if type(ops[i]) is Script}:
            client.script_load(lua.source(name))
        _replace(replies, again, _sync_send(client, [ops[i] for i in again]))
    return _raise_first(replies)


def _unloaded(ops: list[Any], replies: list[Any]) -> list[int]:
    """The indexes of the ops to send again after a NOSCRIPT: the scripts refused, and
    every command after the first of them."""
    refused = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if not refused:
        return []
    return [i for i in range(refused[0], len(ops)) if i in refused or type(ops[i]) is Command]


def _replace(replies: list[Any], indexes: list[int], again: list[Any]) -> None:
    for index, reply in zip(indexes, again, strict=True):
        replies[index] = reply


def _raise_first(replies: list[Any]) -> list[Any]:
    for reply in replies:
        if isinstance(reply, Exception):
            raise lua.plain_error(reply)
    return replies


def _sync_scripts(client: Any, name: str, calls: list[tuple[list[str], list[Any]]]) -> list:
    """One pipeline per node of the calls' keys (one round trip on a single server).

    EVALSHA directly rather than redis-py's pipeline scripts, which add a SCRIPT EXISTS
    round trip to every execute (and which cluster pipelines refuse). A call whose slot
    is moving was not run by the server: the cluster client runs it where the slot is now.
    """
    replies: list = [None] * len(calls)
    for indexes in by_node(client, range(len(calls)), lambda i: calls[i][0][0]):
        with on_slot(client, calls[indexes[0]][0][0]) as server:
            group = _node_scripts(server, name, [calls[i] for i in indexes])
        for index, reply in zip(indexes, group, strict=True):
            if isinstance(reply, SLOT_MIGRATING_ERRORS):
                keys, args = calls[index]
                call = lua.script(client, name)
                reply = while_resharding(client, lambda: call(keys=keys, args=args))  # noqa: B023
            replies[index] = reply
    return replies


def _node_scripts(server: Any, name: str, calls: list[tuple[list[str], list[Any]]]) -> list:
    call = lua.script(server, name)
    if len(calls) == 1:  # a pipeline of one call only costs more
        [(keys, args)] = calls
        try:
            return [call(keys=keys, args=args)]
        except SLOT_MIGRATING_ERRORS as exc:
            return [exc]
    for attempt in (1, 2):
        pipe = server.pipeline(transaction=False)
        for keys, args in calls:
            pipe.evalsha(call.sha, len(keys), *keys, *args)
        replies = pipe.execute(raise_on_error=False)
        if attempt == 1 and any(isinstance(r, NoScriptError) for r in replies):
            server.script_load(call.script)
            continue
        for reply in replies:
            if isinstance(reply, Exception) and not isinstance(reply, SLOT_MIGRATING_ERRORS):
                raise lua.plain_error(reply)
        return replies
    raise AssertionError("unreachable")


# -- the async face -------------------------------------------------------------------


async def arun(core: Core[T], client: Any = None) -> T:
    """Run ``core`` on the ``redis.asyncio`` ``client`` (None: get_async_redis())."""
    client = resolve_async_client(client)
    do = _ado
    if type(client) is redis.asyncio.RedisCluster:
        # Read the slots first: redis-py 8.1 sends a call made before its first read of
        # them to any node, and after a few MOVED replies closes every connection of
        # the client, those other coroutines are using too. Once read, this returns at once.
        await client.initialize()
        do = _ado_in_turn
    if not isinstance(core, GeneratorType):
        return await do(core, client)
    reply: Any = None
    error: Exception | None = None
    try:
        while type(op := _resume(core, reply, error)) is not _Result:
            try:
                reply, error = await do(op, client), None
            except Exception as exc:
                reply, error = None, exc
    except BaseException:  # cancelled, interrupted, or the core's own error
        _abandon(core)
        raise
    return op.value


# Per async cluster client, the turns of its calls under way. Its nodes fail a call past
# max_connections (redis-py 8: 100 per node) rather than make it wait, as a single
# server's BlockingConnectionPool does: a thousand coroutines calling at once would fail.
# Half the connections serve calls, each waiting for its turn; the other half is left to
# waits (wake-up BLPOPs, one per list and process), which take no turn.
_cluster_turns: weakref.WeakKeyDictionary[Any, asyncio.Semaphore] = weakref.WeakKeyDictionary()


async def _ado_in_turn(op: Any, client: Any) -> Any:
    """``_ado`` on an async cluster client: at most half its max_connections at once."""
    if type(op) is PopSignal:
        return await _ado(op, client)
    turns = _cluster_turns.get(client)
    if turns is None:
        most = client.connection_kwargs.get("max_connections") or 2**31
        turns = _cluster_turns[client] = asyncio.Semaphore(max(1, most // 2))
    async with turns:
        return await _ado(op, client)


async def _ado(op: Any, client: Any) -> Any:
    kind = type(op)
    if kind is Command:
        reply = await getattr(client, op.name)(*op.args, **op.kwargs)
    elif kind is Script:
        reply = await _ascript(client, op.name, op.keys, op.args)
    elif kind is _Client:
        return client
    elif kind is Pipeline:
        reply = await _apipeline(client, op)
    elif kind is Scripts:
        reply = await _asend(client, [Script(op.name, k, a) for k, a in op.calls])
    elif kind is Transaction:
        if type(client) is MultiplexedRedis:  # one server: no slot to find
            recorder = client.command_recorder()
            _queue_all(recorder, op.ops)
            reply = await client.multi_exec(recorder.command_stack)
        else:
            reply = await atransaction(client, op.key, lambda pipe: _queue_all(pipe, op.ops))
    elif kind is Watch:
        reply = await awhile_resharding(client, lambda: _awatch(client, op))
    elif kind is PopSignal:
        reply = await wakeups.apop_signal(client, op.key, op.seconds, op.patience)
    elif kind is Sleep:
        await asyncio.sleep(op.seconds)
        reply = None
    elif kind is On:
        reply = await _ado(op.op, resolve_async_client(op.client))
    else:
        raise TypeError(f"a core yielded {op!r}, not a faces operation")
    return reply if op.then is None else op.then(reply)


async def _awatch(client: Any, op: Watch) -> tuple[list[Any], list[Any] | None]:
    async with aon_slot(client, op.key) as server, server.pipeline(transaction=True) as pipe:
        await pipe.watch(op.key, *op.also)
        reads = [await getattr(pipe, read.name)(*read.args, **read.kwargs) for read in op.reads]
        writes = op.write(reads)
        if writes is None:
            await pipe.unwatch()
            return reads, None
        pipe.multi()
        _queue_all(pipe, writes)
        return reads, await pipe.execute()


async def _ascript(client: Any, name: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
    sha = lua.sha(name)
    try:
        try:
            return await client.execute_command("EVALSHA", sha, len(keys), *keys, *args)
        except NoScriptError:
            sha = await client.script_load(lua.source(name))
            return await client.execute_command("EVALSHA", sha, len(keys), *keys, *args)
    except ResponseError as exc:
        raise lua.plain_error(exc) from None


async def _apipeline(client: Any, op: Pipeline) -> list[Any]:
    if op.key is not None:
        async with aon_slot(client, op.key) as server:
            return await _asend(server, op.ops)
    return await _asend(client, op.ops)


async def _asend(client: Any, ops: list[Any]) -> list[Any]:
    # An async cluster client's pipeline sends each node its part, at once, and follows
    # redirections itself.
    async with client.pipeline(transaction=False) as pipe:
        _queue_all(pipe, ops)
        replies = await pipe.execute(raise_on_error=False)
    again = _unloaded(ops, replies)
    if again:
        for name in {ops[i].name for i in again if type(ops[i]) is Script}:
            await client.script_load(lua.source(name))
        _replace(replies, again, await _asend(client, [ops[i] for i in again]))
    return _raise_first(replies)
