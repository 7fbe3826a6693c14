"""Signal receivers of the demo site."""

import logging

import redis

from redisparts_app.exceptions import InvalidKeyPart
from redisparts_app.services import presence

logger = logging.getLogger("marketplace.redis")


def mark_offline(sender, request, user, **kwargs) -> None:
    """On log out, forget this session's presence: the user shows offline at once unless
    another of their sessions was active in the window."""
    if user is None or request is None:
        return
    session_key = getattr(request.session, "session_key", None) or presence.DEFAULT_DEVICE
    try:
        presence.logout(user.get_username(), session_key)
    except InvalidKeyPart:
        pass
    except redis.RedisError as exc:
        logger.warning("presence of %s not cleared on logout: %s", user.get_username(), exc)
