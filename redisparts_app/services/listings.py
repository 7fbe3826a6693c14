"""Read-only listings for the admin: which queue groups, chats, guilds, logs, statistics,
counters and configurations exist, one page at a time.

Import: ``from redisparts_app.services.listings import lock_page, queue_groups``.

Nothing here writes. Names are found with SCAN (``keys.scan_keys`` or one SCAN call per
page, resumed from a cursor) or with ranges (ZRANGE with offsets), never by loading every
key: a page costs a bounded number of round trips whatever the size of the keyspace.

Keys read (see each component's module for their meaning):

- ``rp:queue:{<group>}:queues``           the groups of the task queues
- ``rp:lock:{<name>}:owner`` / ``:fence``   held locks; ``rp:semaphore:{<name>}:holders``
- ``rp:chat:{<chat>}:members`` / ``:msgs`` / ``:ids``   chats, members, pending messages
- ``rp:ac:{<guild>}:names``               guild address books
- ``rp:log:{<name>}:recent:<severity>``   recent logs; ``:common:<severity>`` common logs
- ``rp:stats:{<context>}:<kind>``         hourly statistics
- ``rp:counters:{index}:known``           the counters' index
- ``rp:config:{<type>}:<name>``           stored JSON configurations

Limits: SCAN guarantees that a key present for the whole walk is returned at least once;
one that appears or disappears meanwhile may be missed, and a page may hold a few more
entries than asked, about twice as many at most (SCAN returns whole batches). On a Redis
Cluster every walk covers every primary: the cursor pages one primary after the other
(``keys.scan_step``), the full listing (``stats_entries``) through
redis-py's per-node ``scan_iter``. Each page reads its keys with one pipeline, which
redis-py's cluster client splits per node: not a snapshot, and not one on a server either.
"""

import re
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..conf import app_settings
from ..connection import Client, resolve_client
from ..keys import make_key, scan_keys, scan_step, validate_key_part
from ..validation import check_int, check_page_size
from . import counters, locks
from .chat import chat_keys
from .logs import SEVERITIES

__all__ = [
    "ChatOverview",
    "Page",
    "chat_overview",
    "chat_page",
    "config_page",
    "counter_page",
    "guild_page",
    "lock_page",
    "log_page",
    "semaphore_page",
    "stats_entries",
    "tag_pattern",
]

T = TypeVar("T")

# Keys SCAN looks at per call of a full walk (``stats_entries``).
SCAN_BATCH = 500
# Most SCAN calls one page makes, so a sparse keyspace cannot keep a request busy; the
# page then comes back short (maybe empty) with a cursor to go on from.
MAX_SCAN_CALLS = 200
# The largest page a listing returns at once.
MAX_PAGE_SIZE = 1000


@dataclass(frozen=True)
class Page(Generic[T]):
    """What one page of a SCAN walk found; ``cursor`` 0 means the walk is over."""

    items: list[T]
    cursor: int


@dataclass(frozen=True)
class ChatOverview:
    """One chat: members with their pending message counts, messages held, last id."""

    id: str
    members: dict[str, int]
    pending: dict[str, int]
    held: int
    last_id: int


def tag_pattern(component: str, *roles: str) -> tuple[str, re.Pattern[str]]:
    """The SCAN pattern for ``<prefix>:<component>:{*}:<roles>`` and a regex taking the tag."""
    pattern = make_key(component, "*", *roles)
    exact = re.escape(make_key(component, "TAG", *roles)).replace(r"\{TAG\}", r"\{([^{}]+)\}")
    return pattern, re.compile(f"^{exact}$")


def _scan_page(
    component: str,
    roles: tuple[str, ...],
    cursor: int = 0,
    count: int = 50,
    *,
    client: Client | None = None,
) -> Page[str]:
    """Return up to about ``count`` tags of keys ``<prefix>:<component>:{<tag>}:<roles>``.

    Start with ``cursor`` 0 and pass the returned cursor for the next page; sorted
    within the page only.
    """
    pattern, regex = tag_pattern(component, *roles)
    found, cursor = _scan_matches(pattern, regex, cursor, count, client)
    return Page(sorted(tag for (tag,) in found), cursor)


def lock_page(
    cursor: int = 0, count: int = 50, *, client: Client | None = None
) -> Page[locks.HeldLock]:
    """Return a page of held locks (name, owner token, TTL, fence) and the cursor to go on.

    Like ``locks.held_locks`` but one SCAN page at a time; a lock released between the
    SCAN and the read is left out.
    """
    client = resolve_client(client)
    page = _scan_page("lock", ("owner",), cursor, count, client=client)
    pipe = client.pipeline(transaction=False)
    for name in page.items:
        owner_key, fence_key, _signal = locks.lock_keys(name)
        pipe.get(owner_key).pttl(owner_key).get(fence_key)
    replies = pipe.execute() if page.items else []
    held = []
    for index, name in enumerate(page.items):
        owner, pttl, fence = replies[3 * index : 3 * index + 3]
        if owner is not None:
            ttl = pttl / 1000 if pttl >= 0 else None
            fence = int(fence) if fence is not None else None
            held.append(locks.HeldLock(name=name, owner=owner.decode(), ttl=ttl, fence=fence))
    return Page(held, page.cursor)


def semaphore_page(cursor: int = 0, count: int = 20, *, client: Client | None = None) -> Page[str]:
    """Return a page of semaphore names that have a holders zset."""
    return _scan_page("semaphore", ("holders",), cursor, count, client=client)


def chat_page(cursor: int = 0, count: int = 25, *, client: Client | None = None) -> Page[str]:
    """Return a page of chat ids."""
    return _scan_page("chat", ("members",), cursor, count, client=client)


def chat_overview(chat_id: str, *, client: Client | None = None) -> ChatOverview | None:
    """Return a chat's members, each one's pending messages, and what it holds; None if gone.

    Pending messages of a member are those with an id above the last one it fetched
    (ZCOUNT on the messages zset, scored by id), read in one pipeline.
    """
    client = resolve_client(client)
    names = chat_keys(validate_key_part(chat_id, "chat"))
    members = {
        member.decode(): int(score)
        for member, score in client.zrange(names["members"], 0, -1, withscores=True)
    }
    if not members:
        return None
    pipe = client.pipeline(transaction=False)
    for last in members.values():
        pipe.zcount(names["msgs"], f"({last}", "+inf")
    pipe.zcard(names["msgs"])
    pipe.get(names["ids"])
    *pending, held, last_id = pipe.execute()
    return ChatOverview(
        id=chat_id,
        members=members,
        pending=dict(zip(members, (int(n) for n in pending), strict=True)),
        held=int(held),
        last_id=int(last_id or 0),
    )


def guild_page(cursor: int = 0, count: int = 50, *, client: Client | None = None) -> Page[str]:
    """Return a page of guilds that have an address book."""
    return _scan_page("ac", ("names",), cursor, count, client=client)


def _scan_matches(
    pattern: str, regex: re.Pattern[str], cursor: int, count: int, client: Any
) -> tuple[set[tuple[str, ...]], int]:
    """SCAN from ``cursor`` until about ``count`` keys matched ``regex``; return its groups."""
    check_int(cursor, "cursor", minimum=0)
    check_page_size(count, "count", maximum=MAX_PAGE_SIZE)
    client = resolve_client(client)
    found: set[tuple[str, ...]] = set()
    for _ in range(MAX_SCAN_CALLS):
        cursor, batch = scan_step(client, cursor, pattern, count)
        for key in batch:
            match = regex.match(key.decode("utf-8", "replace"))
            if match:
                found.add(match.groups())
        if cursor == 0 or len(found) >= count:
            break
    return found, int(cursor)


def config_page(
    cursor: int = 0, count: int = 50, *, client: Client | None = None
) -> Page[tuple[str, str]]:
    """Return a page of stored configurations as sorted (type, name) pairs, and the cursor."""
    prefix = re.escape(app_settings.KEY_PREFIX)
    regex = re.compile(rf"^{prefix}:config:\{{([^{{}}]+)\}}:([^:{{}}]+)$")
    found, cursor = _scan_matches(make_key("config", "*", "*"), regex, cursor, count, client)
    return Page(sorted((kind, name) for kind, name in found), cursor)


def log_page(cursor: int = 0, count: int = 50, *, client: Client | None = None) -> Page[str]:
    """Return a page of log names that have a recent log of any severity."""
    prefix = re.escape(app_settings.KEY_PREFIX)
    severities = "|".join(SEVERITIES)
    regex = re.compile(rf"^{prefix}:log:\{{([^{{}}]+)\}}:recent:(?:{severities})$")
    found, cursor = _scan_matches(make_key("log", "*", "recent", "*"), regex, cursor, count, client)
    return Page(sorted(name for (name,) in found), cursor)


def stats_entries(count: int = 200, *, client: Client | None = None) -> list[tuple[str, str]]:
    """Return up to ``count`` (context, kind) pairs with statistics this or last hour, sorted."""
    client = resolve_client(client)
    prefix = app_settings.KEY_PREFIX + ":stats:"
    regex = re.compile(r"^\{([^{}]+)\}:([^:{}]+)(?::last)?$")
    found: set[tuple[str, str]] = set()
    for key in scan_keys(client, prefix + "*", count=SCAN_BATCH):
        match = regex.match(key.decode("utf-8", "replace")[len(prefix) :])
        if match:
            found.add((match.group(1), match.group(2)))
            if len(found) >= count:
                break
    return sorted(found)


def counter_page(
    start: int = 0, count: int = 50, *, client: Client | None = None
) -> tuple[dict[str, list[int]], int]:
    """Return a page of the counters' index (name -> precisions) and the index size.

    The index has one entry per counter and precision, ordered by precision then
    name; the page covers entries ``start`` to ``start + count - 1`` (ZRANGE).
    """
    check_int(start, "start", minimum=0)
    check_page_size(count, "count", maximum=MAX_PAGE_SIZE)
    client = resolve_client(client)
    pipe = client.pipeline(transaction=False)
    pipe.zrange(counters.index_key(), start, start + count - 1)
    pipe.zcard(counters.index_key())
    members, total = pipe.execute()
    found: dict[str, list[int]] = {}
    for member in members:
        precision, _, name = member.decode("utf-8", "replace").partition(":")
        if precision.isascii() and precision.isdigit() and name:
            found.setdefault(name, []).append(int(precision))
    return {name: sorted(found[name]) for name in sorted(found)}, int(total)
