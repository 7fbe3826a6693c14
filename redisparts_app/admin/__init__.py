"""The "Redis parts" admin: pages over the data the services keep in Redis.

The unmanaged ``RedisParts`` model (models.py) gives the app its entry in the admin index;
every page (``admin.views``, one module per topic) hangs off its ModelAdmin through
``get_urls()``, wrapped in ``admin_site.admin_view`` (active staff only; others go to the
login page). Viewing needs ``view_redisparts``, actions ``change_redisparts`` (superusers
have both).

Pages read through the services, a page at a time (ZRANGE/LRANGE offsets, registry cursors:
``admin.views.paging``). Actions that change Redis accept POST only (with CSRF), report
through ``messages`` and redirect. When Redis is unreachable a page answers 503 with a
message inside the admin layout instead of an error.
"""

import functools
from collections.abc import Callable
from typing import Any

import redis
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from ..models import RedisParts
from .views import NAVIGATION, ROUTES

__all__ = ["LIVE_SECONDS", "RedisPartsAdmin"]

LIVE_SECONDS = 5  # how often a live page (queues, tasks, locks...) refreshes its content


@admin.register(RedisParts)
class RedisPartsAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        # Only our pages: the default change and delete views would query a table that
        # does not exist.
        wrap = self.admin_site.admin_view
        return [
            path(route, wrap(self._guarded(view)), name=self._url_name(name).split(":")[1])
            for route, view, name in ROUTES
        ]

    def render(
        self,
        request: HttpRequest,
        template: str,
        context: dict[str, Any],
        status: int = 200,
        *,
        live: bool = False,
    ) -> TemplateResponse:
        """Render an admin page with the navigation every page shows; a ``live`` page
        refreshes its content every LIVE_SECONDS (static/redisparts_app/admin/admin.js)."""
        base = {
            **self.admin_site.each_context(request),
            "live_seconds": LIVE_SECONDS if live else 0,
            "opts": self.opts,
            "rp_pages": [(label, reverse(self._url_name(name))) for label, name in NAVIGATION],
            "can_change": self.has_change_permission(request),
        }
        return TemplateResponse(
            request, f"redisparts_app/admin/{template}", {**base, **context}, status=status
        )

    def require_change(self, request: HttpRequest) -> None:
        """Refuse (403) a user who may look but not act."""
        if not self.has_change_permission(request):
            raise PermissionDenied

    def _url_name(self, name: str) -> str:
        if name == "changelist":
            return f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist"
        return f"admin:redisparts_{name}"

    def _guarded(self, view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        """Check the view permission, and answer 503 in the admin layout when Redis is away."""

        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not self.has_view_permission(request):
                raise PermissionDenied
            try:
                response = view(self, request, *args, **kwargs)
                if isinstance(response, TemplateResponse):
                    response.render()  # so lazy reads fail here, not in the middleware
                return response
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                response = self.render(
                    request,
                    "unavailable.html",
                    {"title": "Redis is unreachable", "error": str(exc)},
                    status=503,
                )
                response["Retry-After"] = "5"
                return response.render()

        return wrapper
