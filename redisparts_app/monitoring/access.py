"""Who may read the operations endpoints (metrics and health, ``urls.py``).

Import: ``from redisparts_app.monitoring.access import monitoring_only``.

An active staff user with the ``redisparts_app.view_redisparts`` permission (the
admin's, which superusers have), or a request carrying ``Authorization: Bearer
<REDISPARTS["METRICS_TOKEN"]>``. With no token configured only staff sessions get in.
Everyone else gets 403: a scraper without credentials should fail loudly, not
follow a redirect to a login page. The 403 is a line of text, or the project's 403 page
(Django's ``permission_denied``, its "403.html") for a browser: a request whose Accept
header names text/html, which scrapers and probes do not send.
"""

import functools
import hmac
from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.views.defaults import permission_denied

from ..conf import app_settings

__all__ = [
    "PERMISSION",
    "denied",
    "may_monitor",
    "monitoring_only",
]

PERMISSION = "redisparts_app.view_redisparts"
DENIED = (
    "403 Forbidden: sign in as staff with the view_redisparts permission, or send "
    "'Authorization: Bearer <token>' with REDISPARTS['METRICS_TOKEN'].\n"
)
DENIED_PAGE = "This page is for staff who may see the Redis parts: sign in with such an account."


def _has_token(request: HttpRequest) -> bool:
    """Whether the request carries the configured bearer token (never, if none is set)."""
    token = app_settings.METRICS_TOKEN
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if not token or scheme.lower() != "bearer" or not given:
        return False
    # Constant time, so the comparison does not reveal how much of a guess was right.
    return hmac.compare_digest(given.strip().encode(), str(token).encode())


def may_monitor(request: HttpRequest) -> bool:
    """Whether the request may read the operations endpoints (see the module docstring)."""
    if _has_token(request):
        return True
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_active and user.is_staff and user.has_perm(PERMISSION))


def denied(request: HttpRequest) -> HttpResponse:
    """The 403 answer: the project's 403 page for a browser, else a line of text."""
    if "text/html" in request.headers.get("Accept", ""):
        return permission_denied(request, PermissionDenied(DENIED_PAGE))
    return HttpResponseForbidden(DENIED, content_type="text/plain; charset=utf-8")


def monitoring_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Let ``view`` answer only requests that ``may_monitor``; others get 403."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not may_monitor(request):
            return denied(request)
        return view(request, *args, **kwargs)

    return wrapper
