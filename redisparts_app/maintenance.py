"""Show a maintenance page (503 with Retry-After) while the maintenance flag is set.

Add ``redisparts_app.maintenance.MaintenanceMiddleware`` after Django's
``AuthenticationMiddleware``. Staff users and paths starting with one of
``REDISPARTS["MAINTENANCE_EXEMPT_PATHS"]`` (the admin by default, so staff can
log in and clear the flag) get the normal page. The flag is read through
``services.config.maintenance_status``, so Redis sees at most one read a second
per process. If Redis cannot be reached the request goes on: the flag cannot be
read, and a view that needs Redis answers the 503 of RedisUnavailableMiddleware.
"""

import logging

import redis
from django.template.response import TemplateResponse

from .conf import app_settings
from .services.config import maintenance_status

logger = logging.getLogger("redisparts")

TEMPLATES = ["maintenance.html", "redisparts_app/maintenance.html"]


class MaintenanceMiddleware:
    """Answer everyone but staff with the maintenance page while the flag is set."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.path.startswith(tuple(app_settings.MAINTENANCE_EXEMPT_PATHS)):
            try:
                status = maintenance_status()
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                logger.warning("maintenance flag unreadable, serving normally: %s", exc)
                status = None
            user = getattr(request, "user", None)
            if status is not None and not getattr(user, "is_staff", False):
                response = TemplateResponse(request, TEMPLATES, {"maintenance": status}, status=503)
                response["Retry-After"] = str(status.retry_after)
                return response.render()
        return self.get_response(request)
