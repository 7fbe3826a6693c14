"""The one entry point to Redis: ``get_redis(alias)`` and ``get_async_redis(alias)``.

Import: ``from redisparts_app.connection import get_redis, resolve_client``.

``REDISPARTS["CONNECTIONS"]`` maps an alias to one of these shapes::

    {"CACHE": "default"}                      # reuse a django-redis cache's pool
    {"URL": "redis://host:6379/0"}            # or rediss://, unix:///path/redis.sock?db=0
    "redis://host:6379/0"                     # shorthand for {"URL": ...}
    {"SENTINELS": [["10.0.0.1", 26379], ...], "SERVICE_NAME": "mymaster", "DB": 0}
    {"CLUSTER": ["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"]}

Every shape but CACHE takes ``"OPTIONS"`` (redis-py client arguments); SENTINELS also
takes ``"SENTINEL_OPTIONS"``. Clients return bytes (no ``decode_responses``). On a Redis
Cluster, ``on_slot``, ``slot_client`` and ``by_node`` take a service to the plain client of
one primary (for MULTI/WATCH and scripts pipelined per node); ``by_slot`` groups the keys
one script may take together. ``get_async_redis`` builds a ``redis.asyncio`` client from the
same entry, one per event loop and alias (a ``MultiplexedRedis`` on a single server);
``aon_slot``, ``atransaction`` and ``awhile_resharding`` are the async twins (``faces``).
"""

import asyncio
import functools
import inspect
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any, TypeAlias, TypeVar
from urllib.parse import unquote, urlsplit

import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.connection
import redis.asyncio.sentinel
import redis.connection
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from redis import Redis
from redis import exceptions as redis_errors
from redis.client import Pipeline
from redis.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.sentinel import Sentinel
from redis.typing import KeyT

from .conf import app_settings
from .exceptions import ConnectionNotConfigured, shorten
from .multiplexed import MultiplexedRedis

__all__ = [
    "SHAPES",
    "SLOT_MIGRATING_ERRORS",
    "SLOT_MOVED_ERRORS",
    "URL_SCHEMES",
    "Client",
    "aclose_async_clients",
    "aon_slot",
    "atransaction",
    "awhile_resharding",
    "blocking_twin",
    "by_node",
    "by_slot",
    "config_problems",
    "get_async_redis",
    "get_redis",
    "is_async_client",
    "is_cluster",
    "is_pipeline",
    "is_pipeline_class",
    "on_slot",
    "reset_clients",
    "resolve_async_client",
    "resolve_client",
    "slot_client",
    "slot_is_moving",
    "socket_timeout",
    "transaction",
    "while_resharding",
]

URL_SCHEMES = ("redis", "rediss", "unix")
SHAPES = ("CACHE", "URL", "SENTINELS", "CLUSTER")

# What services accept as ``client=``: a client, a cluster client or a pipeline. Any,
# not a union of redis-py classes: redis-py 5.2 types each command's reply as
# ``Awaitable[Any] | Any`` (one signature for its sync and asyncio clients), so a
# precise type would only add a cast at every reply.
Client: TypeAlias = Any
T = TypeVar("T")

# The most connections of a sync client built here (per server of a cluster) unless
# OPTIONS says otherwise: redis-py 5.2's default, no cap. A thread holds one connection at
# a time, so the threads bound them; redis-py 8's cap of 100 would fail a burst of a few
# hundred threads with MaxConnectionsError.
SYNC_POOL_SIZE = 2**31

_clients: dict[str, Client] = {}
_clients_lock = threading.Lock()


def get_redis(alias: str | None = None) -> Client:
    """Return the Redis client for ``alias`` (default: REDISPARTS["DEFAULT_CONNECTION"]).

    Clients other than CACHE ones are built once per process and reused; their
    pools reconnect after a fork. Raise ConnectionNotConfigured for an unknown
    alias or a malformed entry.
    """
    alias = alias or app_settings.DEFAULT_CONNECTION
    config = _connection_config(alias)
    if "CACHE" in config:
        return _cache_client(config["CACHE"])
    client = _clients.get(alias)
    if client is None:
        with _clients_lock:
            client = _clients.get(alias)
            if client is None:
                client = _clients[alias] = _build_client(config)
    return client


def resolve_client(client: Client | None) -> Client:
    """Return ``client``, or get_redis() when it is None.

    Not ``client or get_redis()``: an empty pipeline is falsy, and a service
    given one must queue its commands on it.
    """
    return client if client is not None else get_redis()


def _connection_config(alias: str) -> dict[str, Any]:
    """Return the validated configuration of ``alias`` as a dict."""
    connections = app_settings.CONNECTIONS
    if alias not in connections:
        known = ", ".join(sorted(connections)) or "none"
        raise ConnectionNotConfigured(
            f'no Redis connection {shorten(repr(alias))} in REDISPARTS["CONNECTIONS"] '
            f"(known: {known})"
        )
    config = connections[alias]
    if isinstance(config, str):
        config = {"URL": config}
    problems = config_problems(config)
    if problems:
        raise ConnectionNotConfigured(f"Redis connection {alias!r}: {problems[0]}")
    return config


def config_problems(config: Any) -> list[str]:
    """Return what is wrong with one CONNECTIONS entry (empty when it is usable)."""
    if isinstance(config, str):
        config = {"URL": config}
    if not isinstance(config, dict):
        return [f"must be a URL string or a dict, got {type(config).__name__}"]
    shapes = [shape for shape in SHAPES if shape in config]
    if len(shapes) != 1:
        return [f"must have exactly one of {', '.join(SHAPES)}, got {sorted(config)}"]
    options = config.get("OPTIONS", {})
    if not isinstance(options, dict):
        return ["OPTIONS must be a dict of redis-py keyword arguments"]
    shape = shapes[0]
    if shape == "CACHE":
        return _cache_problems(config["CACHE"])
    if shape == "URL":
        return _url_problems(config["URL"])
    if shape == "CLUSTER":
        nodes = config["CLUSTER"]
        nodes = [nodes] if isinstance(nodes, str) else nodes
        if not isinstance(nodes, list | tuple) or not nodes:
            return ["CLUSTER must be a URL or a non-empty list of URLs"]
        return [problem for node in nodes for problem in _url_problems(node, ("redis", "rediss"))]
    sentinels = config["SENTINELS"]
    if not isinstance(sentinels, list | tuple) or not sentinels:
        return ["SENTINELS must be a non-empty list of [host, port] pairs"]
    for entry in sentinels:
        if not (
            isinstance(entry, list | tuple)
            and len(entry) == 2
            and isinstance(entry[0], str)
            and isinstance(entry[1], int)
        ):
            return [f"SENTINELS entry {entry!r} is not a [host, port] pair"]
    if not isinstance(config.get("SERVICE_NAME"), str) or not config["SERVICE_NAME"]:
        return ["SENTINELS needs SERVICE_NAME, the master name the sentinels monitor"]
    return []


def _build_client(config: dict[str, Any]) -> Client:
    """Build a new client for a validated URL, SENTINELS or CLUSTER entry."""
    options = {"max_connections": SYNC_POOL_SIZE, **config.get("OPTIONS", {})}
    if "URL" in config:
        return Redis.from_url(config["URL"], **options)
    if "CLUSTER" in config:
        nodes, options = _cluster_arguments(config)
        options.setdefault("max_connections", SYNC_POOL_SIZE)
        if isinstance(nodes, str):
            return RedisCluster.from_url(nodes, **options)
        # redis-py 5.2 declares connection_pool abstract on its cluster client.
        return RedisCluster(  # type: ignore[abstract]
            startup_nodes=[ClusterNode(host, port) for host, port in nodes], **options
        )
    sentinel = Sentinel(
        [tuple(entry) for entry in config["SENTINELS"]],
        sentinel_kwargs=config.get("SENTINEL_OPTIONS"),
        **options,
    )
    return sentinel.master_for(config["SERVICE_NAME"], db=config.get("DB", 0))


def _cluster_arguments(
    config: dict[str, Any],
) -> tuple[str | list[tuple[str, int]], dict[str, Any]]:
    """Return a CLUSTER entry's one URL, or its (host, port) startup nodes, and the client's
    keyword arguments (the first URL's user, password and scheme unless OPTIONS names them)."""
    options = dict(config.get("OPTIONS", {}))
    nodes = config["CLUSTER"]
    if isinstance(nodes, str):
        return nodes, options
    first = urlsplit(nodes[0])
    # Quoted in the URL like any user and password (a "@" or ":" in them must be).
    options.setdefault("username", unquote(first.username) if first.username else None)
    options.setdefault("password", unquote(first.password) if first.password else None)
    options.setdefault("ssl", first.scheme == "rediss")
    return [(str(urlsplit(n).hostname), urlsplit(n).port or 6379) for n in nodes], options


# -- the async face -------------------------------------------------------------------

# Per event loop (a redis.asyncio connection belongs to the loop that opened it), the
# async clients built so far, by (alias, settings generation, blocking): reset_clients()
# starts a new generation rather than dropping clients that aclose_async_clients() must
# still close.
_AsyncClients: TypeAlias = dict[tuple[str, int, bool], Any]
_async_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _AsyncClients]"
_async_clients = weakref.WeakKeyDictionary()
_generation = 0
# An async cluster client's plain clients of its primaries, for MULTI/WATCH (aslot_client).
_node_clients: "weakref.WeakKeyDictionary[Any, dict[str, Any]]" = weakref.WeakKeyDictionary()
# An async client's twin for blocking reads (blocking_twin).
_blocking_twins: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()

_ASYNC_CONNECTION_CLASSES: dict[type, type] = {
    sync: getattr(redis.asyncio.connection, sync.__name__)
    for sync in (
        redis.connection.Connection,
        redis.connection.SSLConnection,
        redis.connection.UnixDomainSocketConnection,
    )
}


def get_async_redis(alias: str | None = None, *, blocking: bool = False) -> Client:
    """Return the ``redis.asyncio`` client for ``alias`` in the running event loop.

    Built from the same CONNECTIONS entry as ``get_redis(alias)`` (a CACHE entry: from
    the cache client's pool settings), once per event loop and alias. ``blocking=True``:
    the client for reads that wait long (XREAD BLOCK of a push stream): no socket
    timeout, and a connection of its own per read under way, however many wait, so
    they never hold up the other calls' connections. RuntimeError outside a running
    loop; ConnectionNotConfigured as for get_redis.
    """
    alias = alias or app_settings.DEFAULT_CONNECTION
    loop = asyncio.get_running_loop()
    clients = _async_clients.get(loop)
    if clients is None:
        with _clients_lock:
            clients = _async_clients.setdefault(loop, {})
    client = clients.get((alias, _generation, blocking))
    if client is None:
        config = _connection_config(alias)
        client = clients[(alias, _generation, blocking)] = _build_async_client(config, blocking)
    return client


def resolve_async_client(client: Client | None) -> Client:
    """Return ``client`` (a redis.asyncio client), or get_async_redis() when it is None.

    TypeError for a sync client or pipeline: its replies cannot be awaited.
    """
    if client is None:
        return get_async_redis()
    if not is_async_client(client):
        raise TypeError(
            f"the async methods need a redis.asyncio client, got {type(client).__name__}; "
            "pass none to use get_async_redis()"
        )
    return client


def is_async_client(client: Any) -> bool:
    """Whether ``client`` is a redis.asyncio client or cluster client."""
    kind: type = type(client)
    return _is_async_class(kind)


@functools.cache
def _is_async_class(kind: type) -> bool:
    return issubclass(kind, redis.asyncio.Redis | redis.asyncio.RedisCluster)


async def aclose_async_clients() -> None:
    """Close the async clients built in the running event loop (before the loop ends)."""
    clients = _async_clients.pop(asyncio.get_running_loop(), {})
    for client in clients.values():
        for server in _node_clients.pop(client, {}).values():
            await server.aclose()
        twin = _blocking_twins.pop(client, None)
        if twin is not None:
            await twin.aclose()
        await client.aclose()


def blocking_twin(client: Any) -> Any:
    """Return the async client for ``client``'s blocking reads (a wake-up list's BLPOP).

    ``client`` itself, unless its pool makes callers queue for a connection (a
    BlockingConnectionPool, as get_async_redis() builds for a single server): then a
    client of the same server and settings on a pool without a cap, made once per
    ``client`` (aclose_async_clients() closes it with a client it built), so a read
    that waits never holds a connection the other calls queue for. A cluster client's
    nodes open a connection per call under way.
    """
    pool = getattr(client, "connection_pool", None)
    if not isinstance(pool, redis.asyncio.BlockingConnectionPool):
        return client
    twin = _blocking_twins.get(client)
    if twin is None:
        twin = _blocking_twins[client] = redis.asyncio.Redis(
            connection_pool=redis.asyncio.ConnectionPool(
                connection_class=pool.connection_class, **pool.connection_kwargs
            )
        )
    return twin


def _build_async_client(config: dict[str, Any], blocking: bool = False) -> Client:
    """Build a new redis.asyncio client for a validated CONNECTIONS entry (``blocking``:
    see get_async_redis)."""
    if "CACHE" in config:
        return _async_twin(_cache_client(config["CACHE"]), blocking)
    if "CLUSTER" in config:
        nodes, options = _cluster_arguments(config)
    else:
        options = dict(config.get("OPTIONS", {}))
    if blocking:  # no time limit on a reply, and no cap on the connections
        options["socket_timeout"] = None
        options.pop("max_connections", None)
    if "URL" in config:
        if blocking:  # a connection per waiting read, as many as there are
            pool = redis.asyncio.ConnectionPool.from_url(config["URL"], **options)
            pool.connection_kwargs["socket_timeout"] = None  # even if the URL names one
            return redis.asyncio.Redis(connection_pool=pool)
        # A blocking pool: a burst of coroutines beyond its size (redis-py 8: 100
        # connections) waits for a connection rather than failing.
        pool = redis.asyncio.BlockingConnectionPool.from_url(config["URL"], **options)
        return MultiplexedRedis(connection_pool=pool)
    if "CLUSTER" in config:
        if isinstance(nodes, str):
            return redis.asyncio.RedisCluster.from_url(nodes, **options)
        startup = [redis.asyncio.cluster.ClusterNode(host, port) for host, port in nodes]
        # redis-py 5.2 declares connection_pool abstract on its cluster client.
        return redis.asyncio.RedisCluster(startup_nodes=startup, **options)  # type: ignore[abstract]
    sentinel = redis.asyncio.sentinel.Sentinel(
        [tuple(entry) for entry in config["SENTINELS"]],
        sentinel_kwargs=config.get("SENTINEL_OPTIONS"),
        **options,
    )
    return sentinel.master_for(
        config["SERVICE_NAME"],
        redis_class=redis.asyncio.Redis if blocking else MultiplexedRedis,
        db=config.get("DB", 0),
    )


def _async_twin(client: Any, blocking: bool = False) -> Client:
    """Return a redis.asyncio client with the connection settings of a plain sync client
    (``blocking``: see get_async_redis)."""
    pool = client.connection_pool
    connection_class = _ASYNC_CONNECTION_CLASSES.get(pool.connection_class)
    if type(pool) is not redis.ConnectionPool or connection_class is None:
        raise ConnectionNotConfigured(
            f"no async client for a cache client on {type(pool).__name__}; give the async "
            'face a URL, SENTINELS or CLUSTER entry in REDISPARTS["CONNECTIONS"]'
        )
    # The parser is chosen per face (hiredis' sync parser does not serve asyncio).
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k != "parser_class"}
    if blocking:
        kwargs["socket_timeout"] = None
        pool = redis.asyncio.ConnectionPool(connection_class=connection_class, **kwargs)
        return redis.asyncio.Redis(connection_pool=pool)
    return MultiplexedRedis(
        connection_pool=redis.asyncio.BlockingConnectionPool(
            connection_class=connection_class, max_connections=pool.max_connections, **kwargs
        )
    )


async def aslot_client(client: Any, key: KeyT) -> Any:
    """The async twin of ``slot_client``: for an async cluster client, a plain async
    client of the primary that owns ``key``'s slot (kept while the cluster client lives)."""
    if not isinstance(client, redis.asyncio.RedisCluster):
        return client
    await client.initialize()
    node = client.get_node_from_key(key)  # type: ignore[arg-type]  # str or bytes alike
    assert node is not None  # an initialized client knows every slot's primary
    servers = _node_clients.setdefault(client, {})
    server = servers.get(node.name)
    if server is None:
        pool = redis.asyncio.ConnectionPool(
            connection_class=node.connection_class, **node.connection_kwargs
        )
        server = servers[node.name] = MultiplexedRedis(connection_pool=pool)
    return server


@asynccontextmanager
async def aon_slot(client: Any, key: KeyT) -> AsyncIterator[Any]:
    """The async twin of ``on_slot``."""
    try:
        yield await aslot_client(client, key)
    except SLOT_MOVED_ERRORS:
        if isinstance(client, redis.asyncio.RedisCluster):
            with suppress(redis_errors.RedisError):
                await client.nodes_manager.initialize()
        raise


async def awhile_resharding(client: Any, call: Callable[[], Awaitable[T]]) -> T:
    """The async twin of ``while_resharding``: ``await call()``, again while its slot moves."""
    pauses = _resharding_pauses()
    while True:
        try:
            return await call()
        except SLOT_MIGRATING_ERRORS:
            pause = next(pauses, None)
            if not isinstance(client, redis.asyncio.RedisCluster) or pause is None:
                raise
            with suppress(redis_errors.RedisError):
                await client.nodes_manager.initialize()
            await asyncio.sleep(pause)


async def atransaction(client: Any, key: KeyT, queue: Callable[[Any], object]) -> list[Any]:
    """The async twin of ``transaction``: one MULTI/EXEC on the server holding ``key``
    (on a MultiplexedRedis, on its shared connection)."""

    async def run() -> list[Any]:
        async with aon_slot(client, key) as server:
            pipe = server.pipeline(transaction=True)
            queue(pipe)
            if isinstance(server, MultiplexedRedis):
                return await server.multi_exec(pipe.command_stack)
            return await pipe.execute()

    return await awhile_resharding(client, run)


def slot_client(client: Any, key: KeyT) -> Any:
    """Return a client of the server holding ``key``: ``client`` unless it is a cluster client.

    For a RedisCluster, the plain client of the primary that owns ``key``'s slot,
    whose pipelines can WATCH and MULTI (redis-py 5.2's cluster pipelines cannot).
    Correct for a transaction whose keys all share ``key``'s hash tag, as every
    transaction of the services does: one server holds them all. The slot map is
    the cluster client's: use it inside ``on_slot`` so that a failover or a
    resharding makes the cluster client read the map again.
    """
    if isinstance(client, RedisCluster):
        return client.get_node_from_key(key).redis_connection
    return client


# What a server client meets when its slot moved: a dead or demoted primary, a redirection.
SLOT_MOVED_ERRORS = (
    redis_errors.ConnectionError,
    redis_errors.TimeoutError,
    redis_errors.MovedError,
    redis_errors.AskError,
    redis_errors.ReadOnlyError,
)


@contextmanager
def on_slot(client: Any, key: KeyT) -> Iterator[Any]:
    """``with on_slot(client, key) as server:`` run commands on ``slot_client(client, key)``.

    When they fail because the slot moved (a failover or a resharding), the cluster
    client reads the slot map again before the error goes on, so the caller's next
    attempt reaches the new primary, as it would through the cluster client itself.
    """
    try:
        yield slot_client(client, key)
    except SLOT_MOVED_ERRORS:
        if isinstance(client, RedisCluster):
            with suppress(
                redis_errors.RedisError
            ):  # the map is read again on the next cluster call too
                client.nodes_manager.initialize()
        raise


# What a server answers while a slot migrates (a resharding): the command was refused
# before it ran, so running it again, once the move is done, is safe.
SLOT_MIGRATING_ERRORS = (
    redis_errors.MovedError,
    redis_errors.AskError,
    redis_errors.TryAgainError,
)


def slot_is_moving(exc: BaseException) -> bool:
    """Whether ``exc`` says the slot of the keys is being moved: a redirection, TRYAGAIN,
    or a script that met one of its keys already gone to the slot's new node."""
    return isinstance(exc, SLOT_MIGRATING_ERRORS) or (
        isinstance(exc, redis_errors.ResponseError) and "non local key" in str(exc)
    )


# How long a call waits for a slot's migration to end; one slot moves in milliseconds.
RESHARDING_PATIENCE = 10.0


def while_resharding(client: Any, call: Callable[[], T]) -> T:
    """Return ``call()``, calling it again while the slot it works on is being moved.

    For a call whose writes are one transaction or one script, run on a server of
    ``on_slot`` (a cluster client follows MOVED, ASK and TRYAGAIN by itself, but a
    server's own client does not): the server refused it before anything ran. Waits
    up to RESHARDING_PATIENCE seconds, from 5 ms doubling to 100 ms between tries,
    reading the slot map again each time; other errors, and any error off a cluster,
    go on at once.
    """
    pauses = _resharding_pauses()
    while True:
        try:
            return call()
        except SLOT_MIGRATING_ERRORS:
            pause = next(pauses, None)
            if not isinstance(client, RedisCluster) or pause is None:
                raise
            with suppress(redis_errors.RedisError):
                client.nodes_manager.initialize()
            time.sleep(pause)


def _resharding_pauses() -> Iterator[float]:
    """The pauses between tries of a call refused while its slot moves (both faces)."""
    deadline = time.monotonic() + RESHARDING_PATIENCE
    pause = 0.005
    while time.monotonic() <= deadline:
        yield pause
        pause = min(pause * 2, 0.1)


def transaction(client: Any, key: KeyT, queue: Callable[[Pipeline], object]) -> list[Any]:
    """Run the commands ``queue(pipe)`` puts on a pipeline as one MULTI/EXEC on the
    server holding ``key`` (their keys share its hash tag); return EXEC's replies. Runs
    again while the slot is being moved (``while_resharding``)."""

    def run() -> list[Any]:
        with on_slot(client, key) as server:
            pipe = server.pipeline(transaction=True)
            queue(pipe)
            return pipe.execute()

    return while_resharding(client, run)


def by_node(client: Any, items: Iterable[T], key_of: Callable[[T], KeyT]) -> list[list[T]]:
    """Group ``items`` by the server holding ``key_of(item)``, in their original order.

    One group with every item unless ``client`` is a cluster client; then one group
    per primary holding any of the keys. ``on_slot(client, key_of(group[0]))`` gives
    a group's server: a pipeline per group is one round trip per node.
    """
    items = list(items)
    if not isinstance(client, RedisCluster):
        return [items] if items else []
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        groups.setdefault(client.get_node_from_key(key_of(item)).name, []).append(item)
    return list(groups.values())


def by_slot(client: Any, items: Iterable[T], key_of: Callable[[T], KeyT]) -> list[list[T]]:
    """Group ``items`` that one script may take together, in their original order.

    One group with every item unless ``client`` is a cluster client (sync or async),
    where a script's keys must share a slot; then one group per slot of ``key_of(item)``.
    """
    items = list(items)
    if not is_cluster(client):
        return [items] if items else []
    groups: dict[int, list[T]] = {}
    for item in items:
        groups.setdefault(client.keyslot(key_of(item)), []).append(item)
    return list(groups.values())


def is_cluster(client: Any) -> bool:
    """Whether ``client`` is a cluster client, sync or async (not a pipeline)."""
    return isinstance(client, RedisCluster | redis.asyncio.RedisCluster)


def socket_timeout(client: Any) -> float | None:
    """The seconds ``client``'s connections wait for a reply before they fail (None: no
    limit), for any client: plain or cluster, sync or async. redis-py 8 sets 5 s unless
    told otherwise; a blocking command must return before it."""
    kind: type | None
    if isinstance(client, RedisCluster):
        kwargs, kind = client.nodes_manager.connection_kwargs, redis.connection.Connection
    elif isinstance(client, redis.asyncio.RedisCluster):
        kwargs, kind = client.connection_kwargs, redis.asyncio.connection.Connection
    else:
        pool = getattr(client, "connection_pool", None)
        kwargs = getattr(pool, "connection_kwargs", {})
        kind = getattr(pool, "connection_class", None)
    if "socket_timeout" in kwargs or kind is None:
        return kwargs.get("socket_timeout")
    # Not among the arguments: the connection's own default (redis-py 8: 5 s).
    return _default_socket_timeout(kind)


@functools.cache
def _default_socket_timeout(connection_class: type) -> float | None:
    """The socket timeout of a ``connection_class`` connection made without one."""
    for kind in connection_class.__mro__:
        init = kind.__dict__.get("__init__")
        if init is None:
            continue
        parameter = inspect.signature(init).parameters.get("socket_timeout")
        if parameter is not None and parameter.default is not inspect.Parameter.empty:
            return parameter.default
    return None


def is_pipeline(client: Any) -> bool:
    """Whether ``client`` is a pipeline (plain or cluster): it queues commands until execute()."""
    kind: type = type(client)
    return is_pipeline_class(kind)


@functools.cache
def is_pipeline_class(kind: type) -> bool:
    """Whether instances of ``kind`` are pipelines (``is_pipeline`` of its instances)."""
    # Cached per class: an isinstance check against redis-py's classes goes through a
    # typing Protocol, on paths that run per command.
    return issubclass(kind, Pipeline | ClusterPipeline)


def reset_clients() -> None:
    """Forget the clients built so far (their pools close when collected); async clients
    are built again too, the old ones left for aclose_async_clients()."""
    global _generation
    with _clients_lock:
        _clients.clear()
        _generation += 1


def _cache_client(cache_alias: str) -> Client:
    from django_redis import get_redis_connection

    return get_redis_connection(cache_alias)


def _cache_problems(cache_alias: Any) -> list[str]:
    backend = (
        settings.CACHES.get(cache_alias, {}).get("BACKEND", "")
        if isinstance(cache_alias, str)
        else ""
    )
    if not backend.startswith("django_redis."):
        return [f"CACHE {cache_alias!r} is not a CACHES entry using django_redis.cache.RedisCache"]
    return []


def _url_problems(url: Any, schemes: tuple[str, ...] = URL_SCHEMES) -> list[str]:
    if not isinstance(url, str):
        return [f"URL must be a string, got {type(url).__name__}"]
    scheme = urlsplit(url).scheme
    if scheme not in schemes:
        allowed = ", ".join(f"{s}://" for s in schemes)
        return [f"URL {url!r} must start with one of {allowed}"]
    return []


@receiver(setting_changed)
def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in ("REDISPARTS", "CACHES"):
        reset_clients()
