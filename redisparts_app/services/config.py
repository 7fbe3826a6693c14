"""Configuration and service discovery through Redis, with a per-process cache.

Import: ``from redisparts_app.services.config import get_config, set_config, set_maintenance``.

- Maintenance flag: ``set_maintenance()`` / ``clear_maintenance()``; ``is_under_maintenance()``
  and ``maintenance_status()`` read Redis at most once per ``MAINTENANCE_CHECK_INTERVAL``.
- JSON configuration per component type and name: ``set_config(type, name, dict)``;
  ``get_config(type, name, wait=1.0)`` reads Redis at most once per ``wait`` seconds.
- Connections per component: ``component_client(name)`` and ``@redis_connection(name)``
  build a client from the ``"redis"`` configuration of that name (else ``get_redis()``).

Keys (single-key commands only, so any slot will do)::

    rp:maintenance:{site}:flag   string JSON {"since", "retry_after", "message"} (seconds)
    rp:config:{<type>}:<name>    string: the JSON configuration

Guarantee: a change made elsewhere reaches a process within the interval, one made in the
same process at once; the caches are module globals shared by a process's threads and event
loops (and copied into forked children); intervals use ``clock`` (``time.monotonic``), and a
clock going backwards forces a read. Every call has an async twin named with an ``a``.
"""

import asyncio
import copy
import functools
import inspect
import json
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis.asyncio
from redis import Redis

from .. import faces
from ..conf import app_settings
from ..connection import Client, resolve_async_client, resolve_client
from ..exceptions import ComponentConnectionError, InvalidArgument, InvalidArgumentType
from ..keys import make_key, validate_key_part
from ..validation import check_count, check_seconds
from . import registry

__all__ = [
    "Maintenance",
    "aclear_maintenance",
    "aclose_component_clients",
    "acomponent_client",
    "adelete_config",
    "aget_config",
    "ais_under_maintenance",
    "amaintenance_status",
    "aset_config",
    "aset_maintenance",
    "clear_local_cache",
    "clear_maintenance",
    "component_client",
    "config_key",
    "delete_config",
    "get_config",
    "is_under_maintenance",
    "maintenance_key",
    "maintenance_status",
    "parse_config",
    "redis_connection",
    "set_config",
    "set_maintenance",
]

# Seconds between two reads of the maintenance flag in one process.
MAINTENANCE_CHECK_INTERVAL = 1.0
MAX_MESSAGE_LENGTH = 2000
# redis-py client arguments a stored "redis" configuration may set.
CLIENT_ARGUMENTS = frozenset(inspect.signature(Redis.__init__).parameters) - {"self"}
URL_SCHEMES = ("redis", "rediss", "unix")
# Deepest nesting of objects and arrays in a stored configuration. Real ones are a few
# levels deep; a fixed bound refuses a hostile one whatever the Python version's
# recursion limits (3.13 parses and encodes far deeper than 3.11 before raising).
MAX_DEPTH = 32
_TOO_DEEP = f"nested too deeply (more than {MAX_DEPTH} levels of objects and arrays)"

Clock = Callable[[], float]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Maintenance:
    """A maintenance period: started at ``since`` (Unix seconds); clients retry after seconds."""

    since: float
    retry_after: int
    message: str = ""


@dataclass
class _Entry:
    checked: float
    value: Any


_lock = threading.Lock()
_cache: dict[str, _Entry] = {}
_clients: dict[str, tuple[str, Redis]] = {}
# Per event loop: the async client of each (configuration key, configuration).
_aclients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], Any]]"
_aclients = weakref.WeakKeyDictionary()


def clear_local_cache() -> None:
    """Forget every cached flag, configuration and component client of this process."""
    with _lock:
        _cache.clear()
        _clients.clear()


def maintenance_key() -> str:
    return make_key("maintenance", "site", "flag")


def config_key(kind: str, name: str) -> str:
    kind = validate_key_part(kind, "configuration type")
    name = validate_key_part(name, "configuration name")
    return make_key("config", kind, name)


def _cached(key: str, interval: float, clock: Clock, read: faces.Op) -> faces.Steps[Any]:
    """The cached value of ``key``; ``read`` (its GET) runs when ``interval`` has passed.

    Both faces share the cache: a value either one read serves the other."""
    now = clock()
    with _lock:
        entry = _cache.get(key)
        if entry is not None and 0 <= now - entry.checked < interval:
            return entry.value
    value = yield read
    with _lock:
        _cache[key] = _Entry(now, value)
    return value


def _forget(key: str) -> None:
    with _lock:
        _cache.pop(key, None)


# -- maintenance flag ------------------------------------------------------------------------


def maintenance_status(
    *, client: Client | None = None, clock: Clock = time.monotonic
) -> Maintenance | None:
    """Return the current Maintenance, or None; Redis is read at most once a second."""
    return faces.run(_maintenance_status(clock), resolve_client(client))


async def amaintenance_status(
    *, client: Client | None = None, clock: Clock = time.monotonic
) -> Maintenance | None:
    """The async twin of ``maintenance_status`` (``client``: a redis.asyncio client or None)."""
    return await faces.arun(_maintenance_status(clock), client)


def _maintenance_status(clock: Clock) -> faces.Steps[Maintenance | None]:
    key = maintenance_key()
    read = faces.command("get", key, then=_parse_maintenance)
    return (yield from _cached(key, MAINTENANCE_CHECK_INTERVAL, clock, read))


def _parse_maintenance(raw: bytes | None) -> Maintenance | None:
    if raw is None:
        return None
    try:
        return Maintenance(**json.loads(raw))
    except (ValueError, TypeError):
        # A flag set by hand (SET ... 1) still means maintenance.
        return Maintenance(since=0.0, retry_after=app_settings.MAINTENANCE_RETRY_AFTER)


def is_under_maintenance(*, client: Client | None = None, clock: Clock = time.monotonic) -> bool:
    """Return True while the maintenance flag is set (read at most once a second)."""
    return maintenance_status(client=client, clock=clock) is not None


async def ais_under_maintenance(
    *, client: Client | None = None, clock: Clock = time.monotonic
) -> bool:
    """The async twin of ``is_under_maintenance``."""
    return await amaintenance_status(client=client, clock=clock) is not None


def set_maintenance(
    *,
    retry_after: int | None = None,
    message: str = "",
    client: Client | None = None,
    clock: Clock = time.time,
) -> Maintenance:
    """Set the flag; ``retry_after`` seconds (default MAINTENANCE_RETRY_AFTER) go to clients."""
    return faces.run(_set_maintenance(retry_after, message, clock), resolve_client(client))


async def aset_maintenance(
    *,
    retry_after: int | None = None,
    message: str = "",
    client: Client | None = None,
    clock: Clock = time.time,
) -> Maintenance:
    """The async twin of ``set_maintenance``."""
    return await faces.arun(_set_maintenance(retry_after, message, clock), client)


def _set_maintenance(
    retry_after: int | None, message: str, clock: Clock
) -> faces.Steps[Maintenance]:
    if retry_after is None:
        retry_after = app_settings.MAINTENANCE_RETRY_AFTER
    check_count(retry_after, "retry_after (whole seconds)")
    if not isinstance(message, str) or len(message) > MAX_MESSAGE_LENGTH:
        raise InvalidArgument(
            "message",
            message,
            f"must be a string of at most {MAX_MESSAGE_LENGTH} characters",
            show_value=False,
        )
    status = Maintenance(since=clock(), retry_after=retry_after, message=message)
    yield faces.command("set", maintenance_key(), json.dumps(status.__dict__))
    _forget(maintenance_key())
    return status


def clear_maintenance(*, client: Client | None = None) -> bool:
    """Clear the flag; return whether it was set."""
    return faces.run(_deleting(maintenance_key()), resolve_client(client))


async def aclear_maintenance(*, client: Client | None = None) -> bool:
    """The async twin of ``clear_maintenance``."""
    return await faces.arun(_deleting(maintenance_key()), client)


def _deleting(key: str) -> faces.Steps[bool]:
    """DEL ``key`` and drop it from the cache; whether it was there."""
    removed = yield faces.command("delete", key)
    _forget(key)
    return bool(removed)


# -- JSON configuration ----------------------------------------------------------------------


def _encode_config(config: Any) -> str:
    """Return ``config`` as compact JSON; raise InvalidArgument if it is not a storable dict."""
    if not isinstance(config, dict):
        raise InvalidArgumentType(
            "configuration", config, f"must be a dict, got {type(config).__name__}"
        )
    if not all(isinstance(key, str) for key in config):
        raise InvalidArgument("configuration", config, "its keys must be strings")
    if not _nested_within(config, MAX_DEPTH):
        raise InvalidArgument("configuration", config, _TOO_DEEP, show_value=False)
    try:
        text = json.dumps(config, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(
            "configuration", config, f"must be JSON-serialisable ({exc})"
        ) from None
    limit = app_settings.CONFIG_MAX_BYTES
    size = len(text.encode())
    if size > limit:
        raise InvalidArgument(
            "configuration",
            config,
            f"is {size} bytes of JSON; the limit is {limit} (REDISPARTS['CONFIG_MAX_BYTES'])",
        )
    return text


def _nested_within(value: Any, limit: int) -> bool:
    """Return whether ``value`` holds dicts and lists at most ``limit`` levels deep.

    Walked with a stack, not recursion, so a hostile depth (or a cycle) costs at most
    ``limit`` levels of work and never meets Python's recursion limit.
    """
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return False
        stack.extend((child, depth + 1) for child in children)
    return True


def parse_config(text: str) -> dict[str, Any]:
    """Return the configuration a person typed as JSON text (the admin, rp_config).

    Raise InvalidArgument saying what is wrong: empty, not JSON, nested too deeply for
    the parser, or not a JSON object.
    """
    text = text.strip()
    if not text:
        reason = "enter a JSON object, e.g. {}"
    else:
        try:
            value = json.loads(text)
        except ValueError as exc:
            reason = f"not valid JSON: {exc}"
        except RecursionError:  # deeper than the parser goes: past MAX_DEPTH anyway
            reason = _TOO_DEEP
        else:
            if not _nested_within(value, MAX_DEPTH):
                reason = _TOO_DEEP
            elif isinstance(value, dict):
                return value
            else:
                reason = f"the configuration must be a JSON object, not {type(value).__name__}"
    raise InvalidArgument("configuration", text, reason, show_value=False)


def set_config(
    kind: str, name: str, config: dict[str, Any], *, client: Client | None = None
) -> None:
    """Store the configuration of component ``name`` of type ``kind`` (e.g. "redis", "logs").

    Raise InvalidArgument (a ValueError) before writing anything for a value that
    is not a JSON-serialisable dict with string keys or is over the size limit.
    """
    faces.run(_set_config(kind, name, config), resolve_client(client))


async def aset_config(
    kind: str, name: str, config: dict[str, Any], *, client: Client | None = None
) -> None:
    """The async twin of ``set_config``."""
    await faces.arun(_set_config(kind, name, config), client)


def _set_config(kind: str, name: str, config: dict[str, Any]) -> faces.Steps[None]:
    key = config_key(kind, name)
    text = _encode_config(config)
    if kind == "redis":
        _client_arguments(config)
    yield faces.command("set", key, text)
    yield from registry.noting("config", f"{kind}:{name}")
    _forget(key)


def delete_config(kind: str, name: str, *, client: Client | None = None) -> bool:
    """Remove a stored configuration; return whether there was one."""
    return faces.run(_deleting(config_key(kind, name)), resolve_client(client))


async def adelete_config(kind: str, name: str, *, client: Client | None = None) -> bool:
    """The async twin of ``delete_config``."""
    return await faces.arun(_deleting(config_key(kind, name)), client)


def get_config(
    kind: str,
    name: str,
    wait: float = 1.0,
    *,
    client: Client | None = None,
    clock: Clock = time.monotonic,
) -> dict[str, Any]:
    """Return the configuration of ``kind``/``name`` ({} when none is stored).

    Redis is read at most once per ``wait`` seconds per process; in between the
    answer is a copy of the cached value, so callers may change what they get.
    """
    return faces.run(_get_config(kind, name, wait, clock), resolve_client(client))


async def aget_config(
    kind: str,
    name: str,
    wait: float = 1.0,
    *,
    client: Client | None = None,
    clock: Clock = time.monotonic,
) -> dict[str, Any]:
    """The async twin of ``get_config``, sharing its cache."""
    return await faces.arun(_get_config(kind, name, wait, clock), client)


def _get_config(kind: str, name: str, wait: float, clock: Clock) -> faces.Steps[dict[str, Any]]:
    check_seconds(wait, "wait", allow_zero=True, whole_ms=False)
    key = config_key(kind, name)

    def parse(raw: bytes | None) -> dict[str, Any]:
        if raw is None:
            return {}
        try:
            value = json.loads(raw)
        except ValueError:
            raise InvalidArgument(
                "stored configuration", key, "is not valid JSON; store it again with set_config()"
            ) from None
        if not isinstance(value, dict):
            raise InvalidArgument(
                "stored configuration",
                key,
                "is not a JSON object; store it again with set_config()",
            )
        return value

    return copy.deepcopy(
        (yield from _cached(key, wait, clock, faces.command("get", key, then=parse)))
    )


# -- connections per component ---------------------------------------------------------------


def _client_arguments(config: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """Split a "redis" configuration into (URL or None, client keyword arguments)."""
    options = dict(config)
    url = options.pop("url", None)
    if url is not None and (not isinstance(url, str) or urlsplit(url).scheme not in URL_SCHEMES):
        raise InvalidArgument("url", url, "must start with redis://, rediss:// or unix://")
    unknown = sorted(set(options) - CLIENT_ARGUMENTS)
    if unknown:
        raise InvalidArgument(
            "redis configuration",
            unknown,
            "unknown redis-py client arguments; use the keyword arguments of redis.Redis()",
        )
    return url, options


def component_client(
    component: str,
    wait: float = 1.0,
    *,
    client: Client | None = None,
    clock: Clock = time.monotonic,
) -> Redis:
    """Return the client for ``component`` as configured under type "redis".

    The configuration is read through get_config (at most once per ``wait``
    seconds) from ``client`` or the default connection; the client built from
    it is reused until the configuration changes. With nothing stored, return
    the default connection. Raise ComponentConnectionError for a stored
    configuration redis-py refuses.
    """
    config = get_config("redis", component, wait, client=client, clock=clock)
    if not config:
        return resolve_client(client)
    key = config_key("redis", component)
    fingerprint = json.dumps(config, sort_keys=True)
    with _lock:
        cached = _clients.get(key)
    if cached is not None and cached[0] == fingerprint:
        return cached[1]
    built = _build_client(component, config, Redis)
    with _lock:
        # The previous client is dropped, not closed: another thread may be using it.
        _clients[key] = (fingerprint, built)
    return built


async def acomponent_client(
    component: str,
    wait: float = 1.0,
    *,
    client: Client | None = None,
    clock: Clock = time.monotonic,
) -> Client:
    """The async twin of ``component_client``: a redis.asyncio client of the same
    configuration (read through aget_config from ``client``, a redis.asyncio client, or
    ``get_async_redis()``), or ``get_async_redis()`` when none is stored.

    A redis.asyncio connection belongs to its event loop, so the clients are kept per
    loop; ``aclose_component_clients()`` closes the running loop's.
    """
    config = await aget_config("redis", component, wait, client=client, clock=clock)
    if not config:
        return resolve_async_client(client)
    wanted = (config_key("redis", component), json.dumps(config, sort_keys=True))
    with _lock:
        clients = _aclients.setdefault(asyncio.get_running_loop(), {})
    if wanted not in clients:  # only the loop's own thread reaches its dict
        clients[wanted] = _build_client(component, config, redis.asyncio.Redis)
    return clients[wanted]


async def aclose_component_clients() -> None:
    """Close the component clients ``acomponent_client`` built in the running event loop
    (those of configurations since replaced included)."""
    with _lock:
        clients = _aclients.pop(asyncio.get_running_loop(), {})
    for built in clients.values():
        await built.aclose()


def _build_client(component: str, config: dict[str, Any], kind: Any) -> Any:
    """Build a client of class ``kind`` (sync or asyncio) from a "redis" configuration."""
    try:
        url, options = _client_arguments(config)
        return kind.from_url(url, **options) if url else kind(**options)
    except (TypeError, ValueError) as exc:
        raise ComponentConnectionError(
            f"Redis configuration of component {component!r} is unusable: {exc}"
        ) from exc


def redis_connection(component: str, wait: float = 1.0) -> Callable[[F], F]:
    """Decorate a function so it receives the component's client as its first argument.

    ``@redis_connection("logs")`` on ``def log_recent(conn, name, message)`` lets
    callers write ``log_recent("main", "started")``. On an ``async def`` the client is
    ``acomponent_client``'s, a redis.asyncio one.
    """
    validate_key_part(component, "component")

    def decorator(function: F) -> F:
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def acall(*args: Any, **kwargs: Any) -> Any:
                return await function(await acomponent_client(component, wait), *args, **kwargs)

            return acall  # type: ignore[return-value]

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            return function(component_client(component, wait), *args, **kwargs)

        return call  # type: ignore[return-value]

    return decorator
