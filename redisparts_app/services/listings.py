"""Read-only listings for the admin: which queue groups, locks, semaphores, chats, guilds,
logs, statistics, counters and configurations exist, one page at a time.

Import: ``from redisparts_app.services.listings import lock_page, chat_page``.

Names come from the components' registries (``services.registry``) or from ranges (ZRANGE
with offsets), never from SCAN, so a page takes a bounded number of round trips whatever
the size of the keyspace. Each page checks its names' keys in one pipeline and leaves out,
and lets the registry forget, what is gone. Keys read (see each component's module):

- ``rp:registry:{<component>}:names``; ``rp:queue:{<group>}:queues``
- ``rp:lock:{<name>}:owner`` / ``:fence``; ``rp:semaphore:{<name>}:holders``
- ``rp:chat:{<chat>}:members`` / ``:msgs`` / ``:ids``; ``rp:ac:{<guild>}:names``
- ``rp:log:{<name>}:recent:<severity>`` / ``:common:<severity>``
- ``rp:stats:{<context>}:<kind>``; ``rp:counters:{index}:known``; ``rp:config:{<type>}:<name>``

Limits: a page is read at one moment; names registered or forgotten between two pages
may shift the next page by as many (a name may be skipped or shown twice), and a page
may come back shorter than asked when some of its names were gone.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..connection import Client, resolve_client
from ..keys import make_key, validate_key_part
from ..validation import check_int, check_page_size
from . import counters, locks, registry, semaphores
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
]

T = TypeVar("T")

# The largest page a listing returns at once.
MAX_PAGE_SIZE = 1000


@dataclass(frozen=True)
class Page(Generic[T]):
    """What one page of a listing found; ``cursor`` 0 means the listing is over."""

    items: list[T]
    cursor: int


@dataclass(frozen=True)
class ChatOverview:
    """One chat: members with their pending message counts, messages held for members
    who have not fetched them, messages kept in its history, last id."""

    id: str
    members: dict[str, int]
    pending: dict[str, int]
    held: int
    last_id: int
    history: int = 0


def _registry_page(
    component: str,
    key_of: Callable[[str], str | list[str]],
    cursor: int,
    count: int,
    client: Client | None,
) -> Page[str]:
    """A page of the registered names of ``component`` whose keys exist (sorted within the
    page), and the cursor to go on from, 0 at the end."""
    check_int(cursor, "cursor", minimum=0)
    check_page_size(count, "count", maximum=MAX_PAGE_SIZE)
    client = resolve_client(client)
    names, following = registry.page(component, cursor, count, client=client)
    return Page(registry.existing(component, key_of, names, client=client), following)


def lock_page(
    cursor: int = 0, count: int = 50, *, client: Client | None = None
) -> Page[locks.HeldLock]:
    """Return a page of held locks (name, owner token, TTL, fence) and the cursor to go on.

    Like ``locks.held_locks`` a page of the registry at a time; a lock released between
    the registry's read and the lock's is left out.
    """
    check_int(cursor, "cursor", minimum=0)
    check_page_size(count, "count", maximum=MAX_PAGE_SIZE)
    client = resolve_client(client)
    names, following = registry.page("lock", cursor, count, client=client)
    return Page(locks.read_held(names, client=client), following)


def semaphore_page(cursor: int = 0, count: int = 20, *, client: Client | None = None) -> Page[str]:
    """Return a page of semaphore names that have a holders zset."""
    return _registry_page("semaphore", semaphores.holders_key, cursor, count, client)


def chat_page(cursor: int = 0, count: int = 25, *, client: Client | None = None) -> Page[str]:
    """Return a page of chat ids."""
    return _registry_page("chat", _chat_members_key, cursor, count, client)


def _chat_members_key(chat_id: str) -> str:
    return chat_keys(chat_id)["members"]


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
    pipe.zcard(names["history"])
    *pending, held, last_id, history = pipe.execute()
    return ChatOverview(
        id=chat_id,
        members=members,
        pending=dict(zip(members, (int(n) for n in pending), strict=True)),
        held=int(held),
        last_id=int(last_id or 0),
        history=int(history),
    )


def guild_page(cursor: int = 0, count: int = 50, *, client: Client | None = None) -> Page[str]:
    """Return a page of guilds that have an address book."""
    return _registry_page("ac", _book_key, cursor, count, client)


def _book_key(guild: str) -> str:
    return make_key("ac", guild, "names")


def config_page(
    cursor: int = 0, count: int = 50, *, client: Client | None = None
) -> Page[tuple[str, str]]:
    """Return a page of stored configurations as sorted (type, name) pairs, and the cursor."""
    page = _registry_page("config", _config_key, cursor, count, client)
    pairs = [entry.split(":", 1) for entry in page.items]
    return Page(sorted((kind, name) for kind, name in pairs), page.cursor)


def _config_key(entry: str) -> str:
    kind, name = entry.split(":", 1)
    return make_key("config", kind, name)


def log_page(cursor: int = 0, count: int = 50, *, client: Client | None = None) -> Page[str]:
    """Return a page of log names that have a recent log of any severity."""
    return _registry_page("log", _recent_log_keys, cursor, count, client)


def _recent_log_keys(name: str) -> list[str]:
    return [make_key("log", name, "recent", severity) for severity in SEVERITIES]


def stats_entries(count: int = 200, *, client: Client | None = None) -> list[tuple[str, str]]:
    """Return up to ``count`` (context, kind) pairs with statistics this or last hour, sorted."""
    page = _registry_page("stats", _stats_keys, 0, count, client)
    pairs = [entry.split(":", 1) for entry in page.items]
    return sorted((context, kind) for context, kind in pairs)


def _stats_keys(entry: str) -> list[str]:
    context, kind = entry.split(":", 1)
    key = make_key("stats", context, kind)
    return [key, f"{key}:last"]


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
