"""Request middleware: a friendly 503 page instead of a traceback when Redis is
unreachable, and presence recording for signed-in users."""

import logging

import redis
from django.template.response import TemplateResponse

from .exceptions import InvalidKeyPart
from .services.presence import DEFAULT_DEVICE, record_activity

logger = logging.getLogger("redisparts")


class RedisUnavailableMiddleware:
    """Turn a Redis connection failure raised by a view into a 503 response.

    Renders ``503.html`` (the project's, or the app's fallback) with a
    ``Retry-After`` header; other errors pass through untouched.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, redis.ConnectionError | redis.TimeoutError):
            return None
        logger.warning(
            "Redis unavailable during %s %s: %s", request.method, request.path, exception
        )
        response = TemplateResponse(request, ["503.html", "redisparts_app/503.html"], status=503)
        response["Retry-After"] = "5"
        return response.render()


class PresenceMiddleware:
    """Record each signed-in user's activity for the presence component (who is online).

    Add after ``AuthenticationMiddleware``. The user is the username, the device the
    session key, so one user's tabs and devices are one presence. One pipelined round
    trip per request of a signed-in user; a username that is not a valid key part is not
    recorded, and with Redis unreachable the request goes on (logged at WARNING).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            self.record(user.get_username(), getattr(request.session, "session_key", None))
        return self.get_response(request)

    def record(self, username: str, session_key: str | None) -> None:
        try:
            record_activity(username, session_key or DEFAULT_DEVICE)
        except InvalidKeyPart as exc:
            logger.debug("presence not recorded: %s", exc)
        except redis.RedisError as exc:
            logger.warning("presence of %s not recorded: %s", username, exc)
