"""Template context of every page: the unread guild-mail and chat counts for the
navigation badges."""

import logging
from collections.abc import Callable

import redis
from django.http import HttpRequest

from redisparts_app.exceptions import InvalidKeyPart
from redisparts_app.services import chat
from redisparts_app.services.mail import Mailbox

logger = logging.getLogger("marketplace.redis")


def navigation(request: HttpRequest) -> dict[str, object]:
    """``unread_mail``, ``unread_chat``: the signed-in user's unread counts, None when
    they cannot be read.

    Each count is read lazily (only a page that shows the navigation pays its round
    trips, two for the chats whatever their number) and fails soft: with Redis
    unreachable the badge is left out, not the page.
    """
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"unread_mail": None, "unread_chat": None}
    name = user.get_username()
    return {
        "unread_mail": _LazyUnread("mail", lambda: Mailbox(name).unread_count()),
        "unread_chat": _LazyUnread("chat", lambda: sum(chat.unread_counts(name).values())),
    }


class _LazyUnread:
    """Reads an unread count the first time a template asks for it."""

    def __init__(self, what: str, read: Callable[[], int]) -> None:
        self.what = what
        self.read = read
        self._value: int | bool | None = False

    def value(self) -> int | None:
        if self._value is False:
            try:
                self._value = self.read()
            except InvalidKeyPart:
                self._value = None
            except redis.RedisError as exc:
                logger.warning("unread %s count unavailable: %s", self.what, exc)
                self._value = None
        return self._value  # type: ignore[return-value]

    def __str__(self) -> str:
        value = self.value()
        return "" if value is None else str(value)

    def __bool__(self) -> bool:
        return bool(self.value())
