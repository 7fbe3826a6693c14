"""Group chat pulled by its members: create, send, fetch pending, history, join, leave.

Import: ``from redisparts_app.services.chat import create_chat, send_message``.

Keys of one chat share the chat's hash tag, so every step on a chat is one Lua
script in one Cluster slot; a user's list of chats has the user's tag::

    rp:chat:{<chat>}:members     zset member -> id of the last message they fetched
    rp:chat:{<chat>}:msgs        zset message JSON {id, sender, ts, text} -> id: the
                                 messages some member has not fetched yet
    rp:chat:{<chat>}:ids         counter of the chat's message ids
    rp:chat:{<chat>}:history     zset message JSON -> id: the chat's last messages
    rp:chat:{<chat>}:joined      hash member -> id of the last message before they
                                 joined (only members who joined a running chat)
    rp:chat_user:{<user>}:seen   zset chat id -> id of the last message when the user
                                 joined (the user's chats)
    rp:chat_ids:{chat_ids}:next  counter giving new chats their ids

Guarantees: a message gets its id and enters the pending messages and the history
in one script, so ids are strictly increasing and appear in order; fetching takes
a member's pending messages and advances the member's position atomically per
chat, so a member receives every message exactly once and in id order, even from
two fetches at once. Pending messages every member has fetched are deleted. Only
members read or post.

History, apart from that: the last ``CHAT_HISTORY_LENGTH`` messages of each chat
(0 keeps none), younger than ``CHAT_HISTORY_DAYS`` days when that is not 0, read
page by page by message id with ``read_history`` (one script, one round trip; a
page is at most ``CHAT_FETCH_LIMIT`` messages). Whether members have fetched a
message does not matter to it. The script that sends a message adds it to the
history and trims the history, removing at most 100 messages per send: the one
beyond the length at each send; after the settings are lowered, the rest over the
next sends. With an age limit, messages older than it leave at the next send (that
many at most), and the history of a chat without a message for that long expires
whole. A member who joins a running chat reads the history from their join on, as
they fetch messages. The last member out deletes the chat with its history.

``fetch_pending_messages`` reads the user's chats (round trip 1) and runs the
fetch script once over all of them (round trip 2; on a Redis Cluster, whose slots
spread the chats over the nodes, one script per slot and one pipeline per primary
holding any of the chats); a third round trip removes from the user's ``seen``
zset the chats they left or that were deleted meanwhile — a constant number of
round trips whatever the number of chats. Only on a single server is the fetch
atomic across chats. The member positions in the chats are the truth; the
``seen`` zset only lists the user's chats (the book keeps positions there too,
which costs every fetch a write). Creating a chat writes the chat, then the
members' ``seen`` entries: a crash in between leaves members who see the chat
only after joining it again.

Every function has an async twin named with an ``a`` (``await asend_message(...)``,
``await afetch_pending_messages(user)``, ...) taking a redis.asyncio ``client`` (None:
``get_async_redis()``); both run the same core (``faces``): the same scripts, keys and
checks.

Times are Unix seconds (float) from the injectable ``clock``. Message text is
limited by ``CHAT_MAX_MESSAGE_LENGTH`` characters; one fetch takes at most
``CHAT_FETCH_LIMIT`` messages per chat (the rest come with the next fetch).
"""

import itertools
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .. import faces
from ..conf import app_settings, positive_int_setting
from ..connection import (
    Client,
    by_slot,
    resolve_client,
)
from ..exceptions import ChatExists, ChatNotFound, InvalidArgumentType, NotChatMember
from ..keys import make_key, validate_key_part
from ..validation import check_count
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
    "seen_key",
    "send_message",
    "unread_counts",
    "user_chats",
]

COMPONENT = "chat"
NOT_MEMBER, NO_CHAT = -1, -2
ROLES = ("members", "msgs", "ids", "history", "joined")


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
    joined."""
    return {role: make_key(COMPONENT, chat_id, role) for role in ROLES}


def _keys(chat_id: str, *roles: str) -> list[str]:
    names = chat_keys(chat_id)
    return [names[role] for role in roles]


_SEND_KEYS = ("members", "msgs", "ids", "history")
_READ_KEYS = ("members", "msgs", "history", "joined")


def _fetch_keys(*chat_ids: str) -> list[str]:
    # The members and pending messages keys of each chat, which the fetch script takes;
    # built alone because a fetch across many chats builds them for every chat.
    keys: list[str] = []
    for chat_id in chat_ids:
        base = make_key(COMPONENT, chat_id)
        keys += (f"{base}:members", f"{base}:msgs")
    return keys


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
    history = _history_args()
    if chat_id is None:
        chat_id = str((yield faces.command("incr", make_key("chat_ids", "chat_ids", "next"))))
    else:
        chat_id = validate_key_part(chat_id, "chat")
    created = yield faces.script(
        "chat_send", keys=_keys(chat_id, *_SEND_KEYS), args=[sender, encoded, *history, *members]
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

    The message enters the history in the same script, which trims the history.
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
        "chat_send", keys=_keys(chat_id, *_SEND_KEYS), args=[sender, encoded, *_history_args()]
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
    chats = yield faces.command("zrange", key, 0, -1, then=_decoded)
    if not chats:
        return []
    # One script takes many chats: every chat on a single server; on a Redis Cluster
    # the chats of one slot, each node's scripts sent in one pipeline.
    client = yield faces.CLIENT
    groups = by_slot(client, chats, lambda chat: make_key(COMPONENT, chat))  # the chat's slot
    limit = _fetch_limit()
    calls = [(_fetch_keys(*group), [user, limit]) for group in groups]
    chats = [chat for group in groups for chat in group]
    # Each group's reply: the count taken per chat (or a negative code), then the
    # messages taken, joined.
    replies = yield faces.scripts("chat_fetch", calls)
    counts = [count for reply in replies for count in reply[:-1]]
    gone = [chat for chat, count in zip(chats, counts, strict=True) if count < 0]
    if gone:  # left or deleted since: the seen entries are stale
        yield faces.command("zrem", key, *gone)
    messages = iter(_decode([reply[-1] for reply in replies if reply[-1]]))
    return [
        (chat, list(itertools.islice(messages, count)))
        for chat, count in zip(chats, counts, strict=True)
        if count > 0
    ]


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
    return [_message(fields) for fields in _decode_json(array.decode())]


_new_object = object.__new__


def _message(fields: dict) -> ChatMessage:
    # A frozen dataclass sets each field through object.__setattr__; filling the
    # instance dict at once is 3x faster, and stored messages hold exactly its fields.
    message = _new_object(ChatMessage)
    message.__dict__.update(fields)
    return message


def _fetch_limit() -> int:
    return positive_int_setting("CHAT_FETCH_LIMIT")


def _history_args() -> list[int]:
    # The send script's history arguments: messages kept, seconds each is kept.
    length = positive_int_setting("CHAT_HISTORY_LENGTH", zero=True)
    return [length, positive_int_setting("CHAT_HISTORY_DAYS", zero=True) * 86400]


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
