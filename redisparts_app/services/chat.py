"""Group chat pulled by its members: create, send, fetch pending, history, join, leave.

Import: ``from redisparts_app.services.chat import create_chat, send_message``.

Keys of one chat share the chat's hash tag, so every step on a chat is one Lua
script in one Cluster slot; a user's list of chats has the user's tag::

    rp:chat:{<chat>}:members     zset member -> id of the last message they fetched
    rp:chat:{<chat>}:msgs        zset message JSON {id, sender, ts, text} -> id (pending)
    rp:chat:{<chat>}:ids         counter of the chat's message ids
    rp:chat:{<chat>}:history     zset message JSON -> id: the chat's last messages
    rp:chat:{<chat>}:joined      hash member -> id of the last message before they joined
    rp:chat:{<chat>}:push        stream of the messages, entry id ``<message id>-0``
    rp:chat_user:{<user>}:seen   zset chat id -> id of the last message when they joined
    rp:chat_ids:{chat_ids}:next  counter giving new chats their ids

Guarantee: ids are strictly increasing and a member receives every message exactly once
and in id order, even from two fetches at once; a message some member has not fetched is
never deleted. Every function has an async twin named with an ``a`` on the same core
(``faces``). Times are Unix seconds from the injectable ``clock``.
"""

import asyncio
import functools
import json
import time
import weakref
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

import redis.asyncio.cluster

from .. import faces
from ..conf import SettingsCache, app_settings, positive_int_setting
from ..connection import (
    Client,
    by_slot,
    get_async_redis,
    is_cluster,
    is_pipeline,
    resolve_client,
    slot_client,
)
from ..exceptions import (
    ChatExists,
    ChatNotFound,
    ChatPushGap,
    InvalidArgumentType,
    NotChatMember,
)
from ..frozen import filled
from ..keys import make_key, validate_key_part
from ..validation import check_count, check_int
from . import registry
from .mail import validate_message_id, validate_text

__all__ = [
    "ChatMessage",
    "ChatSummary",
    "achat_members",
    "achat_summaries",
    "acreate_chat",
    "afetch_chat_messages",
    "afetch_pending_messages",
    "ajoin_chat",
    "aleave_chat",
    "aread_history",
    "aread_messages",
    "aread_pushed",
    "asend_message",
    "aunread_counts",
    "auser_chats",
    "chat_keys",
    "chat_members",
    "chat_summaries",
    "create_chat",
    "fetch_chat_messages",
    "fetch_pending_messages",
    "join_chat",
    "leave_chat",
    "read_history",
    "read_messages",
    "read_pushed",
    "seen_key",
    "send_message",
    "unread_counts",
    "user_chats",
]

COMPONENT = "chat"
NOT_MEMBER, NO_CHAT = -1, -2
STALE = -3  # chat_fetch: the user's chats are not those named
ROLES = ("members", "msgs", "ids", "history", "joined", "push")


@dataclass(frozen=True)
class ChatMessage:
    id: int
    sender: str
    ts: float
    text: str


@dataclass(frozen=True)
class ChatSummary:
    """A chat as a member's list shows it: its members, the member's unread count and
    the newest message the member may read (None when there is none)."""

    id: str
    members: tuple[str, ...]
    unread: int
    last: ChatMessage | None


def chat_keys(chat_id: str) -> dict[str, str]:
    """Return the keys of one (validated) chat id by role: members, msgs, ids, history,
    joined, push."""
    return {role: make_key(COMPONENT, chat_id, role) for role in ROLES}


def _keys(chat_id: str, *roles: str) -> list[str]:
    names = chat_keys(chat_id)
    return [names[role] for role in roles]


_SEND_KEYS = ("members", "msgs", "ids", "history", "push")
_READ_KEYS = ("members", "msgs", "history", "joined")


def _fetch_keys(*chat_ids: str) -> list[str]:
    # The members and pending messages keys of each chat, which the fetch script takes:
    # the ids put between the two halves of a chat key, because a fetch across many
    # chats builds them for every chat. The ids are validated already (a user's chats
    # when they joined).
    head, tail = _key_halves(app_settings.KEY_PREFIX)
    keys: list[str] = []
    for chat_id in chat_ids:
        keys += (f"{head}{chat_id}{tail}:members", f"{head}{chat_id}{tail}:msgs")
    return keys


@functools.cache
def _key_halves(prefix: str) -> list[str]:
    # A chat key around its id, once per key prefix (the cache key; make_key reads it).
    return make_key(COMPONENT, "\0").split("\0")


# (id of the client, user) -> the user's chats at their last fetch through it, in the
# seen zset's order: a guess the fetch script checks, so a stale or mixed-up entry costs
# a round trip, never a message.
_known_chats: SettingsCache[tuple[int, str], list[str]] = SettingsCache(10_000)


def seen_key(user: str) -> str:
    """Return the key of the (validated) user's zset of chats."""
    return make_key("chat_user", user, "seen")


def create_chat(
    sender: str,
    recipients: Iterable[str],
    message: str,
    *,
    chat_id: str | None = None,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> str:
    """Create a chat of ``sender`` and ``recipients`` with a first message; return its id.

    Members start at position 0, so every one of them fetches the first message.
    Without ``chat_id`` a new numeric id is taken from a counter; an id in use
    raises ChatExists.
    """
    core = _create_chat(sender, recipients, message, chat_id, clock)
    return faces.run(core, resolve_client(client))


async def acreate_chat(
    sender: str,
    recipients: Iterable[str],
    message: str,
    *,
    chat_id: str | None = None,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> str:
    """The async twin of ``create_chat`` (``client``: a redis.asyncio client or None)."""
    return await faces.arun(_create_chat(sender, recipients, message, chat_id, clock), client)


def _create_chat(
    sender: str,
    recipients: Iterable[str],
    message: str,
    chat_id: str | None,
    clock: Callable[[], float],
) -> faces.Steps[str]:
    sender = validate_key_part(sender, "sender")
    if isinstance(recipients, str):
        raise InvalidArgumentType(
            "recipients", recipients, "must be a collection of user names, not one string"
        )
    members = sorted({sender, *(validate_key_part(r, "recipient") for r in recipients)})
    encoded = _encode(sender, message, clock)
    send_args = _send_args()
    if chat_id is None:
        chat_id = str((yield faces.command("incr", make_key("chat_ids", "chat_ids", "next"))))
    else:
        chat_id = validate_key_part(chat_id, "chat")
    created = yield faces.script(
        "chat_send", keys=_keys(chat_id, *_SEND_KEYS), args=[sender, encoded, *send_args, *members]
    )
    if not created:
        raise ChatExists(chat_id)
    ops = [faces.command("zadd", seen_key(member), {chat_id: 0}) for member in members]
    ops.append(registry.note_command(COMPONENT, chat_id))  # in the same round trip, every time
    yield faces.pipeline(ops)
    return chat_id


def send_message(
    chat_id: str,
    sender: str,
    text: str,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> int:
    """Post ``text`` in a chat as ``sender`` (a member); return the message id.

    The message enters the history and the push stream in the same script, which
    trims both.
    """
    return faces.run(_send_message(chat_id, sender, text, clock), resolve_client(client))


async def asend_message(
    chat_id: str,
    sender: str,
    text: str,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> int:
    """The async twin of ``send_message``."""
    return await faces.arun(_send_message(chat_id, sender, text, clock), client)


def _send_message(
    chat_id: str, sender: str, text: str, clock: Callable[[], float]
) -> faces.Steps[int]:
    chat_id = validate_key_part(chat_id, "chat")
    sender = validate_key_part(sender, "sender")
    encoded = _encode(sender, text, clock)
    result = yield faces.script(
        "chat_send", keys=_keys(chat_id, *_SEND_KEYS), args=[sender, encoded, *_send_args()]
    )
    _raise_for(result, chat_id, sender)
    return int(result)


def fetch_pending_messages(
    user: str, *, client: Client | None = None
) -> list[tuple[str, list[ChatMessage]]]:
    """Take ``user``'s pending messages of every chat they belong to.

    Return ``(chat_id, messages)`` for each chat with new messages, messages in
    id order. Atomic per chat (on a single server, across the chats too); see the
    module docstring for the round trips.
    """
    return faces.run(_fetch_pending_messages(user), resolve_client(client))


async def afetch_pending_messages(
    user: str, *, client: Client | None = None
) -> list[tuple[str, list[ChatMessage]]]:
    """The async twin of ``fetch_pending_messages``."""
    return await faces.arun(_fetch_pending_messages(user), client)


def _fetch_pending_messages(user: str) -> faces.Steps[list[tuple[str, list[ChatMessage]]]]:
    user = validate_key_part(user, "user")
    key = seen_key(user)
    client = yield faces.CLIENT
    limit = _fetch_limit()
    # One server: the chats this process saw at the user's last fetch, checked and
    # fetched by one script (one round trip); a Cluster spreads them over the slots.
    known = None if is_cluster(client) or is_pipeline(client) else (id(client), user)
    chats = _known_chats.get(known) if known else None
    reply = None
    if chats is not None:
        keys = [key, *_fetch_keys(*chats)]
        reply = yield faces.script("chat_fetch", keys=keys, args=[user, limit, ":".join(chats)])
        if reply[0] == STALE:  # the user's chats changed: fetch the ones it lists
            chats, reply = _decoded(reply[1:]), None
    else:
        chats = yield faces.command("zrange", key, 0, -1, then=_decoded)
    if reply is not None:
        groups, replies = [chats], [reply]
    elif chats:
        # One script takes many chats: every chat on a single server; on a Redis Cluster
        # the chats of one slot, each node's scripts sent in one pipeline.
        groups = by_slot(client, chats, lambda chat: make_key(COMPONENT, chat))  # the chat's slot
        calls = [(_fetch_keys(*group), [user, limit]) for group in groups]
        replies = yield faces.scripts("chat_fetch", calls)
    else:
        groups = replies = []
    # Each group's reply: the count taken per chat (or a negative code), then the
    # messages taken, joined.
    messages = _decode([reply[-1] for reply in replies if reply[-1]])
    fetched, gone, start = [], [], 0
    for group, reply in zip(groups, replies, strict=True):
        for chat, count in zip(group, reply[:-1], strict=True):
            if count > 0:
                fetched.append((chat, messages[start : start + count]))
                start += count
            elif count < 0:
                gone.append(chat)
    if gone:  # left or deleted since: the seen entries are stale
        yield faces.command("zrem", key, *gone)
        chats = [chat for chat in chats if chat not in gone]
    if known:
        _known_chats.remember(known, chats)
    return fetched


def fetch_chat_messages(
    chat_id: str, user: str, *, client: Client | None = None
) -> list[ChatMessage]:
    """Take ``user``'s pending messages of one chat (one script, one round trip)."""
    return faces.run(_fetch_chat_messages(chat_id, user), resolve_client(client))


async def afetch_chat_messages(
    chat_id: str, user: str, *, client: Client | None = None
) -> list[ChatMessage]:
    """The async twin of ``fetch_chat_messages``."""
    return await faces.arun(_fetch_chat_messages(chat_id, user), client)


def _fetch_chat_messages(chat_id: str, user: str) -> faces.Steps[list[ChatMessage]]:
    chat_id = validate_key_part(chat_id, "chat")
    user = validate_key_part(user, "user")
    count, joined = yield faces.script(
        "chat_fetch", keys=_fetch_keys(chat_id), args=[user, _fetch_limit()]
    )
    _raise_for(count, chat_id, user)
    return _decode([joined] if joined else [])


def read_history(
    chat_id: str,
    user: str,
    count: int = 20,
    before: int | None = None,
    *,
    client: Client | None = None,
) -> list[ChatMessage]:
    """Return the newest ``count`` history messages with an id below ``before`` (None:
    the newest of all), oldest first, without moving ``user``'s position.

    Page back with ``before`` set to the first id returned; an empty page is the start
    of the history. A member who joined a running chat gets the messages from their
    join on. ``count`` is at most ``CHAT_FETCH_LIMIT``.
    """
    return faces.run(_read_history(chat_id, user, count, before), resolve_client(client))


async def aread_history(
    chat_id: str,
    user: str,
    count: int = 20,
    before: int | None = None,
    *,
    client: Client | None = None,
) -> list[ChatMessage]:
    """The async twin of ``read_history``."""
    return await faces.arun(_read_history(chat_id, user, count, before), client)


def _read_history(
    chat_id: str, user: str, count: int, before: int | None
) -> faces.Steps[list[ChatMessage]]:
    count = check_count(count, "count", maximum=_fetch_limit())
    before_id = 0 if before is None else validate_message_id(before)
    reply = yield from _read(chat_id, user, "history", before_id, count)
    return _decode(reply[:0:-1])


def read_messages(
    chat_id: str,
    user: str,
    after: int = 0,
    limit: int | None = None,
    *,
    client: Client | None = None,
) -> list[ChatMessage]:
    """Return the pending messages (those some member has not fetched) after id
    ``after``, oldest first, without moving ``user``'s position (to resume a display
    from a message id). A member who joined a running chat gets none from before."""
    return faces.run(_read_messages(chat_id, user, after, limit), resolve_client(client))


async def aread_messages(
    chat_id: str,
    user: str,
    after: int = 0,
    limit: int | None = None,
    *,
    client: Client | None = None,
) -> list[ChatMessage]:
    """The async twin of ``read_messages``."""
    return await faces.arun(_read_messages(chat_id, user, after, limit), client)


def _read_messages(
    chat_id: str, user: str, after: int, limit: int | None
) -> faces.Steps[list[ChatMessage]]:
    if after != 0:
        after = validate_message_id(after)
    limit = _fetch_limit() if limit is None else check_count(limit, "limit")
    reply = yield from _read(chat_id, user, "after", after, limit)
    return _decode(reply[1:])


def unread_counts(user: str, *, client: Client | None = None) -> dict[str, int]:
    """Return the number of pending messages per chat of ``user`` (two round trips)."""
    return faces.run(_unread_counts(user), resolve_client(client))


async def aunread_counts(user: str, *, client: Client | None = None) -> dict[str, int]:
    """The async twin of ``unread_counts``."""
    return await faces.arun(_unread_counts(user), client)


def _unread_counts(user: str) -> faces.Steps[dict[str, int]]:
    user = validate_key_part(user, "user")
    chats = yield faces.command("zrange", seen_key(user), 0, -1, then=_decoded)
    replies = yield _read_chats(chats, user, "unread")
    return {
        chat: int(reply[1]) for chat, reply in zip(chats, replies, strict=True) if reply[0] >= 0
    }


def chat_summaries(user: str, *, client: Client | None = None) -> list[ChatSummary]:
    """Return a summary of each chat of ``user`` (two round trips, like unread_counts).

    The last message is the newest one of the history the user may read (else of the
    pending messages, with the history off).
    """
    return faces.run(_chat_summaries(user), resolve_client(client))


async def achat_summaries(user: str, *, client: Client | None = None) -> list[ChatSummary]:
    """The async twin of ``chat_summaries``."""
    return await faces.arun(_chat_summaries(user), client)


def _chat_summaries(user: str) -> faces.Steps[list[ChatSummary]]:
    user = validate_key_part(user, "user")
    chats = yield faces.command("zrange", seen_key(user), 0, -1, then=_decoded)
    summaries = []
    for chat, reply in zip(chats, (yield _read_chats(chats, user, "summary")), strict=True):
        if reply[0] < 0:
            continue  # left or deleted since the chats were read
        last = _decode([reply[2]])[0] if reply[2] else None
        members = tuple(member.decode() for member in reply[3:])
        summaries.append(ChatSummary(chat, members, int(reply[1]), last))
    return summaries


def _read_chats(chats: list[str], user: str, mode: str) -> faces.Op:
    # One chat_read per chat, pipelined: a constant number of round trips.
    calls = [(_keys(chat, *_READ_KEYS), [user, mode, 0, 0]) for chat in chats]
    return faces.scripts("chat_read", calls)


def join_chat(chat_id: str, user: str, *, client: Client | None = None) -> int:
    """Add ``user`` to a chat at its latest message; return that message id.

    The user receives, and reads in the history, the messages sent after joining.
    Joining again changes nothing.
    """
    return faces.run(_join_chat(chat_id, user), resolve_client(client))


async def ajoin_chat(chat_id: str, user: str, *, client: Client | None = None) -> int:
    """The async twin of ``join_chat``."""
    return await faces.arun(_join_chat(chat_id, user), client)


def _join_chat(chat_id: str, user: str) -> faces.Steps[int]:
    chat_id = validate_key_part(chat_id, "chat")
    user = validate_key_part(user, "user")
    keys = _keys(chat_id, "members", "ids", "joined")
    position = yield faces.script("chat_join", keys=keys, args=[user])
    _raise_for(position, chat_id, user)
    yield faces.command("zadd", seen_key(user), {chat_id: position})
    return int(position)


def leave_chat(chat_id: str, user: str, *, client: Client | None = None) -> int:
    """Remove ``user`` from a chat; return the members left.

    The last member out deletes the chat's keys, its history too (0 is returned).
    """
    return faces.run(_leave_chat(chat_id, user), resolve_client(client))


async def aleave_chat(chat_id: str, user: str, *, client: Client | None = None) -> int:
    """The async twin of ``leave_chat``."""
    return await faces.arun(_leave_chat(chat_id, user), client)


def _leave_chat(chat_id: str, user: str) -> faces.Steps[int]:
    chat_id = validate_key_part(chat_id, "chat")
    user = validate_key_part(user, "user")
    left = yield faces.script("chat_leave", keys=_keys(chat_id, *ROLES), args=[user])
    _raise_for(left, chat_id, user)
    ops = [faces.command("zrem", seen_key(user), chat_id)]
    if left == 0:  # the chat is gone: forget it at once
        ops.append(registry.forget_command(COMPONENT, chat_id))
    yield faces.pipeline(ops)
    return int(left)


def chat_members(chat_id: str, *, client: Client | None = None) -> dict[str, int]:
    """Return the members of a chat with the id of the last message each fetched."""
    return faces.run(_chat_members(chat_id), resolve_client(client))


async def achat_members(chat_id: str, *, client: Client | None = None) -> dict[str, int]:
    """The async twin of ``chat_members``."""
    return await faces.arun(_chat_members(chat_id), client)


def _chat_members(chat_id: str) -> faces.Op:
    chat_id = validate_key_part(chat_id, "chat")

    def positions(members: list[Any]) -> dict[str, int]:
        if not members:
            raise ChatNotFound(chat_id)
        return {member.decode(): int(score) for member, score in members}

    key = chat_keys(chat_id)["members"]
    return faces.command("zrange", key, 0, -1, withscores=True, then=positions)


def user_chats(user: str, *, client: Client | None = None) -> list[str]:
    """Return the ids of the chats ``user`` belongs to."""
    return faces.run(_user_chats(user), resolve_client(client))


async def auser_chats(user: str, *, client: Client | None = None) -> list[str]:
    """The async twin of ``user_chats``."""
    return await faces.arun(_user_chats(user), client)


def _user_chats(user: str) -> faces.Op:
    user = validate_key_part(user, "user")
    return faces.command("zrange", seen_key(user), 0, -1, then=_decoded)


def _decoded(names: list[bytes]) -> list[str]:
    return [name.decode() for name in names]


# Push --------------------------------------------------------------------------------------

# Longest wait of one read: a page's stream sends a keep-alive between reads anyway.
MAX_BLOCK_MS = 60_000


def read_pushed(
    chat_id: str,
    member: str,
    last_id: int = 0,
    block_ms: int = 0,
    *,
    client: Client | None = None,
) -> list[ChatMessage]:
    """Return the messages after id ``last_id`` from the chat's push stream, oldest first.

    When there is none, wait up to ``block_ms`` milliseconds (0: not at all) for the
    next and return [] if none came. Does not move ``member``'s position. Raise
    ChatNotFound or NotChatMember before waiting, and ChatPushGap when messages after
    ``last_id`` have left the stream. A member who joined a running chat gets nothing
    from before. Keys: rp:chat:{<chat>}:members, joined, push.
    """
    client = resolve_client(client)
    chat_id, member, last_id, block_ms = _push_args(chat_id, member, last_id, block_ms)
    names = chat_keys(chat_id)
    # Membership, the join point, the last id and what the stream holds after last_id:
    # one round trip.
    pipe = client.pipeline(transaction=False)
    pipe.zscore(names["members"], member)
    pipe.exists(names["members"])
    pipe.hget(names["joined"], member)
    pipe.get(names["ids"])
    _queue_xrange(pipe, names["push"], last_id)
    position, exists, joined, latest, entries = pipe.execute()
    after, messages = _caught_up(
        chat_id, member, last_id, position, exists, joined, latest, _messages(entries)
    )
    if not messages and block_ms:
        server = slot_client(client, names["push"])  # XREAD's keys move: no COMMAND GETKEYS
        reply = server.execute_command(*_xread_args(names["push"], after, block_ms))
        messages = _messages(_stream_entries(reply))
    return _pushed(chat_id, after, messages)


async def aread_pushed(
    chat_id: str,
    member: str,
    last_id: int = 0,
    block_ms: int = 0,
    *,
    client: Any = None,
) -> list[ChatMessage]:
    """read_pushed() on asyncio: ``client`` is a redis.asyncio client (default:
    ``get_async_redis(blocking=True)``, with no socket timeout, since the read blocks).

    The readers of one chat in this process asking from the same id share the round
    trips: one membership and catch-up read for all that ask in the same turn of the
    event loop, and one blocking XREAD, so a message wakes a thousand readers with one
    reply, and they wait again with one more round trip.
    """
    if client is None:
        client = get_async_redis(blocking=True)
    chat_id, member, last_id, block_ms = _push_args(chat_id, member, last_id, block_ms)
    base = make_key(COMPONENT, chat_id)  # the four keys built alone: once per wake-up
    keys = [f"{base}:members", f"{base}:joined", f"{base}:ids", f"{base}:push"]
    read = await _shared_catch_up(client, keys, member, last_id)
    after, messages = _caught_up(chat_id, member, last_id, *read)
    if not messages and block_ms:
        messages = await _shared_xread(client, keys[3], after, block_ms)
    return list(_pushed(chat_id, after, messages))  # a list of its own: the readers share one


def _push_args(chat_id: str, member: str, last_id: int, block_ms: int) -> tuple[str, str, int, int]:
    return (
        validate_key_part(chat_id, "chat"),
        validate_key_part(member, "member"),
        check_int(last_id, "last_id", minimum=0),
        check_int(block_ms, "block_ms", minimum=0, maximum=MAX_BLOCK_MS),
    )


def _queue_xrange(pipe: Any, key: str, after: int) -> None:
    # XRANGE rather than XREAD: its key has a fixed place (no COMMAND GETKEYS on a cluster).
    pipe.xrange(key, f"({after}-0", "+", count=_fetch_limit())


def _caught_up(
    chat_id: str,
    member: str,
    last_id: int,
    position: Any,
    exists: int,
    joined: Any,
    latest: Any,
    messages: list[ChatMessage],
) -> tuple[int, list[ChatMessage]]:
    """The id to read after (the join point when that is later) and the member's messages
    of those the stream holds after ``last_id``; ChatPushGap for a ``last_id`` past the
    chat's last message, which a stream read would wait on for ever."""
    if position is None:
        _raise_for(NOT_MEMBER if exists else NO_CHAT, chat_id, member)
    if last_id > int(latest or 0):
        raise ChatPushGap(chat_id, last_id, int(latest or 0) + 1)
    after = max(last_id, int(joined or 0))
    if after > last_id:  # the member joined later: the messages up to the join are not theirs
        messages = [message for message in messages if message.id > after]
    return after, messages


def _xread_args(key: str, after: int, block_ms: int) -> list[Any]:
    return ["XREAD", "COUNT", _fetch_limit(), "BLOCK", block_ms, "STREAMS", key, f"{after}-0"]


def _stream_entries(reply: Any) -> list[Any]:
    # XREAD of one stream: RESP2 [[key, entries]]; RESP3 {key: entries}, or with redis-py
    # 5.2 {key: [entries]}; None on timeout. An entry is (id, fields).
    if not reply:
        return []
    if not isinstance(reply, dict):
        return list(reply[0][1])
    entries = next(iter(reply.values()))
    if entries and not isinstance(entries[0][0], bytes | str):
        entries = entries[0]
    return list(entries)


def _messages(entries: list[Any]) -> list[ChatMessage]:
    return _decode([fields[b"m"] for _, fields in entries])


def _pushed(chat_id: str, after: int, messages: list[ChatMessage]) -> list[ChatMessage]:
    if messages and messages[0].id != after + 1:
        # Ids are contiguous: the trimming took the ones between.
        raise ChatPushGap(chat_id, after, messages[0].id)
    return messages


# Reads under way that readers share, per loop: catch-up reads by (client id, stream key,
# id) -> (the members asking, the read); XREADs by (client id, stream key, id, wait).
_catch_ups: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, Any]]"
_catch_ups = weakref.WeakKeyDictionary()
_xreads: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, _Shared]]"
_xreads = weakref.WeakKeyDictionary()


class _Shared:
    """A read that many readers of this loop wait on: each gets a future of its own, set
    when the read is done, so a reader that goes away (its page closed) cancels only its
    own wait. One callback sets them all: cheaper per reader than asyncio.shield."""

    def __init__(self, read: Coroutine[Any, Any, Any]) -> None:
        self.waiters: list[asyncio.Future] = []
        self.task = asyncio.ensure_future(read)
        self.task.add_done_callback(self._done)

    def wait(self) -> asyncio.Future:
        waiter = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        return waiter

    def _done(self, task: asyncio.Task) -> None:
        error = None if task.cancelled() else task.exception()
        for waiter in self.waiters:
            if waiter.done():
                continue
            if task.cancelled():
                waiter.cancel()
            elif error is not None:
                waiter.set_exception(error)
            else:
                waiter.set_result(task.result())


async def _shared_catch_up(
    client: Any, keys: list[str], member: str, after: int
) -> tuple[Any, int, Any, Any, list[ChatMessage]]:
    """Membership, join point, the last id and the messages after ``after``, read in one
    round trip for every reader of the chat that asks from ``after`` before the read is
    sent (the readers a message woke, which ask again in the same turn of the loop)."""
    members_key, joined_key, ids_key, push_key = keys
    running = _catch_ups.setdefault(asyncio.get_running_loop(), {})
    batch_key = (id(client), push_key, after)
    batch = running.get(batch_key)
    if batch is None:
        members: list[str] = []

        async def read() -> tuple[list[Any], int, list[Any], Any, list[ChatMessage]]:
            del running[batch_key]  # sent now: later readers make a batch of their own
            pipe = client.pipeline(transaction=False)
            pipe.zmscore(members_key, members)
            pipe.exists(members_key)
            pipe.hmget(joined_key, members)
            pipe.get(ids_key)
            _queue_xrange(pipe, push_key, after)
            positions, exists, joined, latest, entries = await pipe.execute()
            return positions, exists, joined, latest, _messages(entries)

        batch = running[batch_key] = (members, _Shared(read()))
    members, shared = batch
    index = len(members)
    members.append(member)
    positions, exists, joined, latest, messages = await shared.wait()
    return positions[index], exists, joined[index], latest, messages


async def _shared_xread(client: Any, key: str, after: int, block_ms: int) -> list[ChatMessage]:
    """One blocking XREAD per stream, id and wait for all the readers of this loop, its
    reply decoded once for them all."""
    running = _xreads.setdefault(asyncio.get_running_loop(), {})
    read_key = (id(client), key, after, block_ms)
    shared = running.get(read_key)
    if shared is None:
        shared = running[read_key] = _Shared(_xread(client, key, after, block_ms))
        shared.task.add_done_callback(lambda _: running.pop(read_key, None))
    return await shared.wait()


async def _xread(client: Any, key: str, after: int, block_ms: int) -> list[ChatMessage]:
    args = _xread_args(key, after, block_ms)
    if isinstance(client, redis.asyncio.cluster.RedisCluster):
        await client.initialize()  # XREAD's keys move: name the node, no COMMAND GETKEYS
        node = client.get_node_from_key(key)
        return _messages(_stream_entries(await client.execute_command(*args, target_nodes=node)))
    return _messages(_stream_entries(await client.execute_command(*args)))


def _encode(sender: str, text: str, clock: Callable[[], float]) -> str:
    text = validate_text(text, "message", app_settings.CHAT_MAX_MESSAGE_LENGTH)
    fields = {"sender": sender, "ts": clock(), "text": text}
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


_decode_json = json.JSONDecoder().decode


def _decode(encoded: list[bytes]) -> list[ChatMessage]:
    # ``encoded``: JSON messages, or runs of them already joined by ",".
    # One JSON array for all the messages: one decoder call rather than one each.
    # They are stored as UTF-8: decoding first skips json.loads' encoding sniffing.
    if not encoded:
        return []
    array = b"[" + b",".join(encoded) + b"]"
    # Stored messages hold exactly the fields of a ChatMessage.
    return [filled(ChatMessage, fields) for fields in _decode_json(array.decode())]


def _fetch_limit() -> int:
    return positive_int_setting("CHAT_FETCH_LIMIT")


def _send_args() -> list[int]:
    # The send script's settings: history messages kept, seconds each is kept, push
    # stream entries kept.
    length = positive_int_setting("CHAT_HISTORY_LENGTH", zero=True)
    days = positive_int_setting("CHAT_HISTORY_DAYS", zero=True)
    return [length, days * 86400, positive_int_setting("CHAT_PUSH_LENGTH")]


def _raise_for(code: int, chat_id: str, user: str) -> None:
    if code == NO_CHAT:
        raise ChatNotFound(chat_id)
    if code == NOT_MEMBER:
        raise NotChatMember(chat_id, user)


def _read(chat_id: str, user: str, mode: str, after: int, limit: int) -> faces.Steps[list[Any]]:
    chat_id = validate_key_part(chat_id, "chat")
    user = validate_key_part(user, "user")
    reply = yield faces.script(
        "chat_read", keys=_keys(chat_id, *_READ_KEYS), args=[user, mode, after, limit]
    )
    _raise_for(reply[0], chat_id, user)
    return reply
