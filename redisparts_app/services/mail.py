"""Guild mail: single-recipient mailboxes pulled by their owner.

A sender puts a message (sender, subject, body, time) in the recipient's
mailbox; the recipient fetches it newest first, page by page, marks messages
read and deletes them. Keys, all tagged with the recipient so each step is one
Lua script in one Cluster slot:

    rp:mail:{<user>}:ids     counter of message ids (never reused)
    rp:mail:{<user>}:box     zset message id -> id (the order)
    rp:mail:{<user>}:msgs    hash message id -> JSON {id, sender, subject, body, ts}
    rp:mail:{<user>}:unread  set of unread message ids

Times are Unix seconds (float) from the injectable ``clock``. Every step is
atomic; a mailbox keeps at most ``MAIL_MAX_MESSAGES`` messages and sending one
more drops the oldest. Subjects and bodies are limited by
``MAIL_MAX_SUBJECT_LENGTH`` and ``MAIL_MAX_BODY_LENGTH`` (characters); bad
input raises before anything is written.
"""

import json
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from redis import Redis

from .. import lua
from ..conf import app_settings
from ..connection import get_redis
from ..exceptions import InvalidMessage, MailMessageNotFound
from ..keys import make_key, validate_key_part

COMPONENT = "mail"
# Line breaks and tabs are text in a body or a chat message; other controls are not.
_TEXT_CONTROLS_ALLOWED = frozenset("\n\r\t")


def validate_text(value: object, field: str, max_length: int, *, multiline: bool = True) -> str:
    """Return ``value`` in NFC form if it is acceptable message text, else raise.

    Raise TypeError for a non-string and InvalidMessage (a ValueError) for blank
    text, more than ``max_length`` characters, or control characters (line
    breaks and tabs are allowed when ``multiline``).
    """
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a string, got {type(value).__name__}")
    if len(value) > max_length:
        raise InvalidMessage(field, f"{len(value)} characters, more than {max_length}")
    text = unicodedata.normalize("NFC", value)
    if not text.strip():
        raise InvalidMessage(field, "must not be empty")
    allowed = _TEXT_CONTROLS_ALLOWED if multiline else frozenset()
    for char in text:
        if unicodedata.category(char) in ("Cc", "Cs") and char not in allowed:
            raise InvalidMessage(field, f"control character U+{ord(char):04X} is not allowed")
    return text


def validate_message_id(value: object) -> int:
    """Return ``value`` if it is a message id (an int >= 1), else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"message id must be an int, got {type(value).__name__}")
    if value < 1:
        raise InvalidMessage("message id", f"must be at least 1, got {value}")
    return value


@dataclass(frozen=True)
class MailMessage:
    id: int
    sender: str
    subject: str
    body: str
    ts: float
    read: bool


@dataclass(frozen=True)
class MailPage:
    """One page of a mailbox: ``messages`` newest first, and the mailbox's counts."""

    messages: list[MailMessage]
    total: int
    unread: int
    offset: int


class Mailbox:
    """The mailbox of ``user``; ``client`` may be a client, cluster client or pipeline."""

    def __init__(
        self,
        user: str,
        *,
        client: Redis | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.user = validate_key_part(user, "user")
        self.client = client if client is not None else get_redis()
        self.clock = clock

    def _key(self, role: str) -> str:
        return make_key(COMPONENT, self.user, role)

    def send(self, sender: str, subject: str, body: str) -> int:
        """Put a message from ``sender`` in this mailbox; return its id (1, 2, ...)."""
        sender = validate_key_part(sender, "sender")
        subject = validate_text(
            subject, "subject", app_settings.MAIL_MAX_SUBJECT_LENGTH, multiline=False
        )
        body = validate_text(body, "body", app_settings.MAIL_MAX_BODY_LENGTH)
        fields = {"sender": sender, "subject": subject, "body": body, "ts": self.clock()}
        encoded = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
        keys = [self._key("ids"), self._key("box"), self._key("msgs"), self._key("unread")]
        args = [encoded, app_settings.MAIL_MAX_MESSAGES]
        return int(lua.script(self.client, "mail_send")(keys=keys, args=args))

    def fetch(self, offset: int = 0, limit: int = 20) -> MailPage:
        """Return ``limit`` messages from the ``offset``-th newest, newest first."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidMessage("offset", f"must be an int >= 0, got {offset!r}")
        most = app_settings.MAIL_MAX_PAGE_SIZE
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= most:
            raise InvalidMessage("limit", f"must be an int from 1 to {most}, got {limit!r}")
        keys = [self._key("box"), self._key("msgs"), self._key("unread")]
        reply = lua.script(self.client, "mail_fetch")(keys=keys, args=[offset, limit])
        total, unread, rest = int(reply[0]), int(reply[1]), reply[2:]
        messages = []
        for encoded, unread_flag in zip(rest[::2], rest[1::2], strict=True):
            data = json.loads(encoded)
            messages.append(MailMessage(**data, read=not unread_flag))
        return MailPage(messages=messages, total=total, unread=unread, offset=offset)

    def mark_read(self, message_id: int) -> bool:
        """Mark a message read; return False if it already was. Unknown ids raise."""
        message_id = validate_message_id(message_id)
        keys = [self._key("msgs"), self._key("unread")]
        result = lua.script(self.client, "mail_mark_read")(keys=keys, args=[message_id])
        if result == -1:
            raise MailMessageNotFound(self.user, message_id)
        return bool(result)

    def unread_count(self) -> int:
        """Return the number of unread messages."""
        return int(self.client.scard(self._key("unread")))

    def delete(self, message_id: int) -> None:
        """Delete a message; unknown ids raise MailMessageNotFound."""
        message_id = validate_message_id(message_id)
        keys = [self._key("box"), self._key("msgs"), self._key("unread")]
        if not lua.script(self.client, "mail_delete")(keys=keys, args=[message_id]):
            raise MailMessageNotFound(self.user, message_id)
