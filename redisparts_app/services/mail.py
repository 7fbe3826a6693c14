"""Guild mail: single-recipient mailboxes pulled by their owner.

Import: ``from redisparts_app.services.mail import Mailbox``.

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
from collections.abc import Callable
from dataclasses import dataclass

from .. import lua
from ..conf import app_settings
from ..connection import Client, resolve_client
from ..exceptions import MailMessageNotFound
from ..keys import make_key, validate_key_part
from ..validation import check_count, check_int, check_page_size, check_text

__all__ = [
    "MailMessage",
    "MailPage",
    "Mailbox",
    "validate_message_id",
    "validate_text",
]

COMPONENT = "mail"


# Mail and chat text rules, importable from here where callers have always found them.
validate_text = check_text


def validate_message_id(value: object) -> int:
    """Return ``value`` if it is a message id (an int >= 1), else raise InvalidArgument."""
    return check_count(value, "message id")


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
        client: Client | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.user = validate_key_part(user, "user")
        self.client = resolve_client(client)
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
        check_int(offset, "offset", minimum=0)
        check_page_size(limit, "limit", maximum=app_settings.MAIL_MAX_PAGE_SIZE)
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
