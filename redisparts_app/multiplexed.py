"""``MultiplexedRedis``: the async face's client, one shared connection for plain commands.

Import: ``from redisparts_app.multiplexed import MultiplexedRedis`` (``get_async_redis()``
builds one for a CACHE, URL or SENTINELS entry).

A ``redis.asyncio.Redis`` whose plain commands, scripts (EVALSHA) and MULTI/EXEC
transactions (``multi_exec``) from every coroutine of an event loop share one connection,
pipelined automatically: the first command of a turn of the loop leaves at once, the
others of that turn together at its end, and the replies, parsed by hiredis in the
connection's ``data_received``, come back in order to the coroutines that wait for them
(no reader task, no pool lock, no connection checkout per command). The connection is
opened as one of the client's pool would be (address, TLS, AUTH, database, RESP2 or RESP3),
so the client's own reply callbacks read its replies; only redis-py's public API is used.

What keeps redis-py's path (a pooled connection, one at a time): blocking commands (B*,
WAIT, XREAD/XREADGROUP, SUBSCRIBE, MONITOR...), WATCH, pipelines, and every command of a
client that decodes replies or has no hiredis. Guarantee: a lost connection fails the
commands waiting on it with redis.ConnectionError and the next command opens a new one
(no retry: a command sent may have run).
"""

from __future__ import annotations

import asyncio
import collections
import functools
from typing import Any

import redis.asyncio
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse
from redis.exceptions import TimeoutError as RedisTimeoutError

try:
    import hiredis
except ImportError:  # pragma: no cover - hiredis is a dependency of the app
    hiredis = None  # type: ignore[assignment]

from redis import exceptions
from redis.commands.core import CoreCommands

__all__ = ["MultiplexedRedis"]

# Commands that wait on the server or need a connection of their own.
_EXCLUSIVE = frozenset(
    name.encode()
    for names in (
        "BLPOP BRPOP BRPOPLPUSH BLMOVE BLMPOP BZPOPMIN BZPOPMAX BZMPOP XREAD XREADGROUP",
        "WAIT WAITAOF MULTI EXEC DISCARD WATCH UNWATCH SUBSCRIBE PSUBSCRIBE SSUBSCRIBE",
        "MONITOR SYNC PSYNC CLIENT SELECT AUTH HELLO RESET QUIT SHUTDOWN DEBUG",
    )
    for name in names.split()
)


# Error replies by their first word -> the exception redis-py raises for them (the
# cluster redirections never reach a single server's connection).
_ERRORS: dict[str, type[exceptions.RedisError]] = {
    "NOSCRIPT": exceptions.NoScriptError,
    "READONLY": exceptions.ReadOnlyError,
    "OOM": exceptions.OutOfMemoryError,
    "EXECABORT": exceptions.ExecAbortError,
    "LOADING": exceptions.BusyLoadingError,
    "NOAUTH": exceptions.AuthenticationError,
    "WRONGPASS": exceptions.AuthenticationError,
    "NOPERM": exceptions.NoPermissionError,
}


def _error(message: str) -> exceptions.RedisError:
    """The exception of an error reply, as redis-py's parsers make it."""
    code, _, rest = message.partition(" ")
    if code in _ERRORS:
        return _ERRORS[code](rest)
    if message == "ERR max number of clients reached":
        return exceptions.ConnectionError(message[4:])
    return exceptions.ResponseError(message)


# Command name (as redis-py passes it) -> whether it may go on the shared connection.
_SHARED: dict[Any, bool] = {}
_AS_IS = (str, bytes)


def _shareable(command: Any) -> bool:
    name = command.encode() if isinstance(command, str) else bytes(command)
    return name.upper() not in _EXCLUSIVE and b" " not in name


class _Recorder(CoreCommands):
    """redis-py's command methods, recording instead of sending."""

    connection_pool: Any = None  # never used: nothing is sent

    def __init__(self) -> None:
        self.command_stack: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def execute_command(self, *args: Any, **options: Any) -> _Recorder:
        self.command_stack.append((args, options))
        return self


class _Link(asyncio.Protocol):
    """One connection: writes coalesced per loop turn, replies matched in order."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.waiting: collections.deque[asyncio.Future] = collections.deque()
        self.buffer: list[bytes] = []
        self.turn = False  # a command went out in this turn of the loop
        self.reader = hiredis.Reader(protocolError=InvalidResponse, replyError=_error)
        self.lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, packed: bytes) -> asyncio.Future:
        if self.lost is not None or self.transport is None:
            raise RedisConnectionError(f"connection lost: {self.lost}")
        future = self.loop.create_future()
        self.waiting.append(future)
        if self.turn:  # not the first command of this turn of the loop: one write at its end
            self.buffer.append(packed)
        else:  # the first goes at once (no wait for a lone caller)
            self.turn = True
            self.loop.call_soon(self._flush)
            self.transport.write(packed)
        return future

    def _flush(self) -> None:
        self.turn = False
        if self.buffer:
            data, self.buffer = b"".join(self.buffer), []
            if self.transport is not None and self.lost is None:
                self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        waiting = self.waiting
        while (reply := self.reader.gets()) is not False:
            future = waiting.popleft()
            if future.done():  # its caller was cancelled
                continue
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or RedisConnectionError("closed by the server")
        error = RedisConnectionError(f"connection lost: {self.lost}")
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(error)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class MultiplexedRedis(redis.asyncio.Redis):
    """A redis.asyncio client whose plain commands share one auto-pipelined connection."""

    _link: _Link | None = None
    _opening: asyncio.Future | None = None
    _multiplex: bool | None = None  # set on first use (_can_multiplex)

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        command = args[0]
        shared = _SHARED.get(command)
        if shared is None:
            shared = _SHARED[command] = _shareable(command)
        if not shared or not (self._multiplex or self._can_multiplex()):
            return await super().execute_command(*args, **options)
        link = self._link
        if link is None or link.lost is not None:
            link = await self._connect()
        try:
            response = await link.send(self._pack(args))
        except redis.exceptions.ResponseError:
            if "EMPTY_RESPONSE" in options:
                return options["EMPTY_RESPONSE"]
            raise
        return self._parsed(command, response, options)

    async def multi_exec(self, stack: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[Any]:
        """Run the queued commands of a pipeline ``stack`` (``pipe.command_stack``: args
        and options) as one MULTI/EXEC on the shared connection; return EXEC's replies,
        parsed. MULTI, the commands and EXEC leave in one write, so no other command of
        the connection comes between them. Off the shared connection (see the module),
        redis-py's transaction."""
        if not self._can_multiplex():
            pipe = self.pipeline(transaction=True)
            pipe.command_stack.extend(
                (args, options) for args, options in stack
            )  # the commands as queued
            return await pipe.execute()
        link = await self._ready()
        futures = [link.send(self._pack(("MULTI",)))]
        futures += [link.send(self._pack(args)) for args, _options in stack]
        futures.append(link.send(self._pack(("EXEC",))))
        # Answered in order: awaiting each in turn costs no more than the last. A command
        # refused when queued makes EXEC answer EXECABORT; its own error goes first.
        refused: Exception | None = None
        for future in futures:
            try:
                results = await future
            except redis.exceptions.ResponseError as exc:
                refused = refused or exc
        if refused is not None:
            raise refused
        for reply in results:
            if isinstance(reply, Exception):
                raise reply
        return [
            self._parsed(args[0], reply, dict(options))
            for (args, options), reply in zip(stack, results, strict=True)
        ]

    def _pack(self, args: tuple[Any, ...]) -> bytes:
        # Text and bytes go to hiredis as they are; the encoder checks and encodes the rest
        # (numbers as redis-py writes them, a bool or None refused).
        encode = self._encoder.encode
        return hiredis.pack_command(
            tuple(arg if type(arg) in _AS_IS else encode(arg) for arg in args)
        )

    def _parsed(self, command: Any, response: Any, options: dict[str, Any]) -> Any:
        for option in ("EMPTY_RESPONSE", "NEVER_DECODE", "keys"):
            options.pop(option, None)
        callback = self.response_callbacks.get(command)
        return response if callback is None else callback(response, **options)

    async def _ready(self) -> _Link:
        link = self._link
        if link is None or link.lost is not None:
            link = await self._connect()
        return link

    def command_recorder(self) -> Any:
        """An object with redis-py's command methods that records each call's arguments
        and options in ``command_stack`` (for ``multi_exec``), sending nothing."""
        return _Recorder()

    def _can_multiplex(self) -> bool:
        can = self._multiplex
        if can is None:
            pool = self.connection_pool
            kwargs = pool.connection_kwargs
            self._encoder = pool.get_encoder()
            can = self._multiplex = hiredis is not None and not kwargs.get("decode_responses")
        return can

    async def _connect(self) -> _Link:
        # One opening at a time: the coroutines that find no connection wait for it.
        if self._opening is not None:
            return await asyncio.shield(self._opening)
        loop = asyncio.get_running_loop()
        self._opening = loop.create_future()
        try:
            link = await self._open(loop)
        except BaseException as exc:
            self._opening.set_exception(exc)
            self._opening.exception()  # retrieved: the waiters re-raise it
            self._opening = None
            raise
        self._link = link
        self._opening.set_result(link)
        self._opening = None
        return link

    async def _open(self, loop: asyncio.AbstractEventLoop) -> _Link:
        """Connect as a connection of the pool would (a sentinel pool finds the master),
        then hand the socket to a _Link."""
        connection = self.connection_pool.make_connection()
        try:
            setting = functools.partial(getattr, connection)
            path = setting("path", None)
            if path:
                where = path
                opening = loop.create_unix_connection(lambda: _Link(loop), path)
            else:
                host, port = await self._address(connection)
                where = f"{host}:{port}"
                tls: dict[str, Any] = {}
                if isinstance(connection, redis.asyncio.connection.SSLConnection):
                    tls = {"ssl": connection.ssl_context.get(), "server_hostname": host}
                opening = loop.create_connection(lambda: _Link(loop), host, port, **tls)
            try:
                async with asyncio.timeout(setting("socket_connect_timeout", None)):
                    _transport, link = await opening
            except TimeoutError as exc:  # an OSError too: first
                raise RedisTimeoutError(f"Timeout connecting to {where}") from exc
            except OSError as exc:  # as redis-py's connections report it
                raise RedisConnectionError(f"Error connecting to {where}: {exc}") from exc
            handshake: list[tuple[Any, ...]] = []
            username, password = setting("username", None), setting("password", None)
            if password:
                handshake.append(("AUTH", username, password) if username else ("AUTH", password))
            # The protocol a connection of the pool speaks (redis-py 8: RESP3 unless told
            # otherwise), which the client's reply callbacks expect.
            if str(setting("protocol", 2)) == "3":
                handshake.append(("HELLO", 3))
            if setting("client_name", None):
                handshake.append(("CLIENT", "SETNAME", setting("client_name")))
            if setting("db", 0):
                handshake.append(("SELECT", setting("db")))
            for step in handshake:
                await link.send(self._pack(step))
            return link
        finally:
            await connection.disconnect()

    @staticmethod
    async def _address(connection: Any) -> tuple[str, int]:
        # A sentinel-managed connection learns the master's address from the sentinels.
        pool = getattr(connection, "connection_pool", None)
        if pool is not None and hasattr(pool, "get_master_address"):
            return await pool.get_master_address()
        return connection.host, connection.port

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        if self._link is not None:
            self._link.close()
            self._link = None
        await super().aclose(close_connection_pool)
