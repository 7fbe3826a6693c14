"""Answer a friendly 503 page instead of a traceback when Redis is unreachable."""

import logging

import redis
from django.template.response import TemplateResponse

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
