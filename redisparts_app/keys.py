"""Key names: ``<prefix>:<component>:{<tag>}:<role>``.

Import: ``from redisparts_app.keys import make_key, validate_key_part``.

Every key that one script or MULTI touches carries the same ``{tag}``, so each
atomic step stays in one Redis Cluster slot. User-supplied parts (user, guild,
chat and queue names) go through ``validate_key_part`` first, so no input can
reach another component's keys or a SCAN pattern.
"""

import re
from collections.abc import AsyncIterator, Iterator
from functools import cache

from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.typing import KeyT

from .conf import app_settings
from .connection import Client
from .exceptions import InvalidArgument
from .validation import FORBIDDEN_KEY_CATEGORIES, FORBIDDEN_KEY_CHARACTERS, check_key_part

__all__ = [
    "FORBIDDEN_CATEGORIES",
    "FORBIDDEN_CHARACTERS",
    "ascan_keys",
    "component_pattern",
    "is_key_part",
    "make_key",
    "scan_keys",
    "scan_step",
    "slot_of",
    "validate_key_part",
]

_COMPONENT_RE = re.compile(r"^[a-z][a-z0-9_]*$")

# The checks of user-supplied key parts live in validation.py; these names stay
# importable from here, where callers have always found them.
FORBIDDEN_CHARACTERS = FORBIDDEN_KEY_CHARACTERS
FORBIDDEN_CATEGORIES = FORBIDDEN_KEY_CATEGORIES
validate_key_part = check_key_part


def is_key_part(value: object) -> bool:
    """Whether ``value`` may be used inside a key as it is (``validate_key_part`` keeps it)."""
    try:
        return check_key_part(value) == value
    except InvalidArgument:
        return False


@cache
def _is_component(name: str) -> bool:
    # Cached: components are a few constants of the code, and keys are built often.
    return _COMPONENT_RE.match(name) is not None


def make_key(component: str, tag: str, *roles: str) -> str:
    """Build ``<prefix>:<component>:{<tag>}[:<role>...]``.

    ``component`` is a lower-case identifier chosen by the code ("lock", "chat");
    ``tag`` groups the keys that must share a Cluster slot; it is either a
    constant of the code or a part already passed through validate_key_part.
    """
    if not _is_component(component):
        raise ValueError(f"component must be a lower-case identifier, got {component!r}")
    if not tag or "{" in tag or "}" in tag:
        raise ValueError(f"hash tag must be non-empty and brace-free, got {tag!r}")
    for role in roles:
        if not role or "{" in role or "}" in role:
            raise ValueError(f"key role must be non-empty and brace-free, got {role!r}")
    return ":".join((app_settings.KEY_PREFIX, component, f"{{{tag}}}", *roles))


def component_pattern(component: str) -> str:
    """Return the SCAN MATCH pattern for every key of ``component``."""
    if not _COMPONENT_RE.match(component):
        raise ValueError(f"component must be a lower-case identifier, got {component!r}")
    return f"{app_settings.KEY_PREFIX}:{component}:*"


def scan_keys(client: Client, pattern: str, count: int = 500) -> Iterator[bytes]:
    """Yield the keys matching ``pattern`` with SCAN (never KEYS).

    On a Redis Cluster client, redis-py scans every primary.
    """
    yield from client.scan_iter(match=pattern, count=count)


async def ascan_keys(client: Client, pattern: str, count: int = 500) -> AsyncIterator[bytes]:
    """The async twin of ``scan_keys``, on a redis.asyncio client (every primary of a
    cluster, too)."""
    async for key in client.scan_iter(match=pattern, count=count):
        yield key


def scan_step(client: Client, cursor: int, pattern: str, count: int) -> tuple[int, list[bytes]]:
    """One SCAN call from ``cursor``: return the next cursor (0 when the walk is over) and keys.

    On a Redis Cluster client the walk visits the primaries one after the other,
    in address order; the cursor packs the primary's position with that primary's
    own SCAN cursor, so a caller pages through the whole cluster with one integer.
    A failover or resharding in the middle of a walk may skip or repeat keys.
    """
    if not isinstance(client, RedisCluster):
        next_cursor, batch = client.scan(cursor, match=pattern, count=count)
        return int(next_cursor), batch
    primaries = sorted(client.get_primaries(), key=lambda node: node.name)
    index, node_cursor = cursor % len(primaries), cursor // len(primaries)
    node_cursor, batch = primaries[index].redis_connection.scan(
        node_cursor, match=pattern, count=count
    )
    if node_cursor == 0:
        index += 1
        if index == len(primaries):
            return 0, batch
    return int(node_cursor) * len(primaries) + index, batch


def slot_of(key: KeyT) -> int:
    """Return the Redis Cluster hash slot of ``key``."""
    return key_slot(key.encode() if isinstance(key, str) else key)
