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

from .. import faces
from ..conf import app_settings
from ..connection import Client
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
    """The mailbox of ``user``; ``client`` may be a client, cluster client or pipeline, or
    a redis.asyncio client for the async methods (``asend``, ``afetch``, ...; see
    ``faces.clients``)."""

    def __init__(
        self,
        user: str,
        *,
        client: Client | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.user = validate_key_part(user, "user")
        self.client, self.aclient = faces.clients(client)
        self.clock = clock

    def _key(self, role: str) -> str:
        return make_key(COMPONENT, self.user, role)

    def send(self, sender: str, subject: str, body: str) -> int:
        """Put a message from ``sender`` in this mailbox; return its id (1, 2, ...)."""
        return faces.run(self._send(sender, subject, body), self.client)

    async def asend(self, sender: str, subject: str, body: str) -> int:
        """The async twin of ``send``."""
        return await faces.arun(self._send(sender, subject, body), self.aclient)

    def _send(self, sender: str, subject: str, body: str) -> faces.Op:
        sender = validate_key_part(sender, "sender")
        subject = validate_text(
            subject, "subject", app_settings.MAIL_MAX_SUBJECT_LENGTH, multiline=False
        )
        body = validate_text(body, "body", app_settings.MAIL_MAX_BODY_LENGTH)
        fields = {"sender": sender, "subject": subject, "body": body, "ts": self.clock()}
        encoded = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
        keys = [self._key("ids"), self._key("box"), self._key("msgs"), self._key("unread")]
        args = [encoded, app_settings.MAIL_MAX_MESSAGES]
        return faces.script("mail_send", keys, args, then=int)

    def fetch(self, offset: int = 0, limit: int = 20) -> MailPage:
        """Return ``limit`` messages from the ``offset``-th newest, newest first."""
        return faces.run(self._fetch(offset, limit), self.client)

    async def afetch(self, offset: int = 0, limit: int = 20) -> MailPage:
        """The async twin of ``fetch``."""
        return await faces.arun(self._fetch(offset, limit), self.aclient)

    def _fetch(self, offset: int, limit: int) -> faces.Op:
        check_int(offset, "offset", minimum=0)
        check_page_size(limit, "limit", maximum=app_settings.MAIL_MAX_PAGE_SIZE)
        keys = [self._key("box"), self._key("msgs"), self._key("unread")]

        def page(reply: list) -> MailPage:
            total, unread, rest = int(reply[0]), int(reply[1]), reply[2:]
            messages = []
            for encoded, unread_flag in zip(rest[::2], rest[1::2], strict=True):
                data = json.loads(encoded)
                messages.append(MailMessage(**data, read=not unread_flag))
            return MailPage(messages=messages, total=total, unread=unread, offset=offset)

        return faces.script("mail_fetch", keys, [offset, limit], then=page)

    def mark_read(self, message_id: int) -> bool:
        """Mark a message read; return False if it already was. Unknown ids raise."""
        return faces.run(self._mark_read(message_id), self.client)

    async def amark_read(self, message_id: int) -> bool:
        """The async twin of ``mark_read``."""
        return await faces.arun(self._mark_read(message_id), self.aclient)

    def _mark_read(self, message_id: int) -> faces.Op:
        message_id = validate_message_id(message_id)

        def marked(result: int) -> bool:
            if result == -1:
                raise MailMessageNotFound(self.user, message_id)
            return bool(result)

        keys = [self._key("msgs"), self._key("unread")]
        return faces.script("mail_mark_read", keys, [message_id], then=marked)

    def unread_count(self) -> int:
        """Return the number of unread messages."""
        return faces.run(self._unread_count(), self.client)

    async def aunread_count(self) -> int:
        """The async twin of ``unread_count``."""
        return await faces.arun(self._unread_count(), self.aclient)

    def _unread_count(self) -> faces.Op:
        return faces.command("scard", self._key("unread"), then=int)

    def delete(self, message_id: int) -> None:
        """Delete a message; unknown ids raise MailMessageNotFound."""
        faces.run(self._delete(message_id), self.client)

    async def adelete(self, message_id: int) -> None:
        """The async twin of ``delete``."""
        await faces.arun(self._delete(message_id), self.aclient)

    def _delete(self, message_id: int) -> faces.Op:
        message_id = validate_message_id(message_id)

        def deleted(result: int) -> None:
            if not result:
                raise MailMessageNotFound(self.user, message_id)

        keys = [self._key("box"), self._key("msgs"), self._key("unread")]
        return faces.script("mail_delete", keys, [message_id], then=deleted)
