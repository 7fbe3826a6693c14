"""Template context of every page: the unread guild-mail count for the navigation badge."""

import logging

import redis
from django.http import HttpRequest

from redisparts_app.exceptions import InvalidKeyPart
from redisparts_app.services.mail import Mailbox

logger = logging.getLogger("marketplace.redis")


def navigation(request: HttpRequest) -> dict[str, int | None]:
    """``unread_mail``: the signed-in user's unread count, None when it cannot be read.

    The count is read lazily (only a page that shows the navigation pays the round trip)
    and fails soft: with Redis unreachable the badge is left out, not the page.
    """
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"unread_mail": None}
    return {"unread_mail": _LazyUnread(user.get_username())}


class _LazyUnread:
    """Reads the unread count the first time a template asks for it."""

    def __init__(self, username: str) -> None:
        self.username = username
        self._value: int | bool | None = False

    def value(self) -> int | None:
        if self._value is False:
            try:
                self._value = Mailbox(self.username).unread_count()
            except InvalidKeyPart:
                self._value = None
            except redis.RedisError as exc:
                logger.warning("unread mail count unavailable: %s", exc)
                self._value = None
        return self._value  # type: ignore[return-value]

    def __str__(self) -> str:
        value = self.value()
        return "" if value is None else str(value)

    def __bool__(self) -> bool:
        return bool(self.value())
