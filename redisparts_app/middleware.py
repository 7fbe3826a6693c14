"""Request middleware of the app; add what you use to ``MIDDLEWARE``, in this order::

    MIDDLEWARE = [
        ...,  # after AuthenticationMiddleware
        "redisparts_app.middleware.RedisUnavailableMiddleware",
        "redisparts_app.middleware.MaintenanceMiddleware",
        "redisparts_app.middleware.PresenceMiddleware",
        "redisparts_app.middleware.ResponseTimeMiddleware",
    ]

- ``RedisUnavailableMiddleware``: a friendly 503 page instead of a traceback when a view
  cannot reach Redis or Redis cannot serve it right now (out of memory, read-only, loading).
- ``MaintenanceMiddleware``: the maintenance page while the maintenance flag is set.
- ``PresenceMiddleware``: records signed-in users' activity (who is online).
- ``ResponseTimeMiddleware``: each view's response time in the hourly statistics.

Each is sync and async capable: under ASGI with async views the chain stays async (the
flag is read with the async twin; the other Redis calls run in ``sync_to_async``).

Import: ``from redisparts_app.middleware import PresenceMiddleware``.
"""

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis
from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.template.response import TemplateResponse

from .conf import app_settings
from .exceptions import InvalidArgument
from .services.config import Maintenance, amaintenance_status, maintenance_status
from .services.presence import DEFAULT_DEVICE, arecord_activity, record_activity
from .services.stats import arecord_access_time, record_access_time, stats_context

__all__ = [
    "MaintenanceMiddleware",
    "PresenceMiddleware",
    "RedisUnavailableMiddleware",
    "ResponseTimeMiddleware",
    "redis_unavailable",
]

logger = logging.getLogger("redisparts")
stats_logger = logging.getLogger("redisparts.stats")

MAINTENANCE_TEMPLATES = ["maintenance.html", "redisparts_app/maintenance.html"]

# Error replies of a server that is up but cannot serve the command now: out of memory
# under noeviction, a replica or a master without enough replicas refusing writes, loading
# its data, a script running too long, a failed RDB save refusing writes, a cluster down.
UNAVAILABLE_REPLIES = (
    "OOM", "READONLY", "LOADING", "BUSY", "MISCONF", "MASTERDOWN", "NOREPLICAS",
    "CLUSTERDOWN", "TRYAGAIN",
)  # fmt: skip


class _Middleware:
    """Sync and async capable: ``__call__`` runs ``before`` (which may answer instead of the
    view), the rest of the chain, then ``after``. In the async chain ``abefore`` runs
    instead of ``before``; a subclass that defines only the sync hooks has them run in
    Django's thread for sync code (``sync_to_async``), since they may talk to Redis and
    read ``request.user`` from the database."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self._async:
            return self._acall(request)
        state = self.before(request)
        if isinstance(state, HttpResponseBase):
            return state
        response = self.get_response(request)
        self.after(request, state)
        return response

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        state = await self.abefore(request)
        if isinstance(state, HttpResponseBase):
            return state
        response = await self.get_response(request)
        if type(self).after is not _Middleware.after:
            await sync_to_async(self.after)(request, state)
        return response

    def before(self, request: HttpRequest) -> Any:
        """Work before the view: a response to answer with, or a state for ``after``."""
        return None

    async def abefore(self, request: HttpRequest) -> Any:
        """``before`` in the async chain: in a worker thread, unless a subclass awaits its
        Redis calls itself."""
        if type(self).before is _Middleware.before:
            return None
        return await sync_to_async(self.before)(request)

    def after(self, request: HttpRequest, state: Any) -> None:
        """Work once the response is ready."""


def redis_unavailable(exc: BaseException) -> bool:
    """Tell whether ``exc`` says Redis cannot serve now (a 503), not that the code is wrong.

    True for connection failures and timeouts (``BusyLoadingError`` among them) and for
    the error replies of ``UNAVAILABLE_REPLIES``, also when a Lua script or a
    transaction relays them (``OutOfMemoryError``, ``ReadOnlyError``, "BUSY Redis is busy
    running a script"...).
    """
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return True
    if isinstance(exc, redis.OutOfMemoryError | redis.ReadOnlyError):
        return True
    if not isinstance(exc, redis.ResponseError):
        return False
    text = str(exc)
    if text.startswith(UNAVAILABLE_REPLIES):
        return True
    # A reply relayed by a script: "... @user_script:3: -OOM command not allowed ..."
    return any(f"-{reply} " in text or f" {reply} " in text for reply in ("OOM", "READONLY"))


class RedisUnavailableMiddleware(_Middleware):
    """Turn a Redis failure raised by a view into a 503 response.

    A failure is what ``redis_unavailable`` says: unreachable, timed out, or refusing
    the command for now (out of memory, read-only replica, loading, busy script).
    Renders ``503.html`` (the project's, or the app's fallback) with a
    ``Retry-After`` header; other errors pass through untouched.
    """

    def process_exception(
        self, request: HttpRequest, exception: Exception
    ) -> HttpResponseBase | None:
        if not redis_unavailable(exception):
            return None
        logger.warning(
            "Redis unavailable during %s %s: %s", request.method, request.path, exception
        )
        response = TemplateResponse(request, ["503.html", "redisparts_app/503.html"], status=503)
        response["Retry-After"] = "5"
        return response.render()


class PresenceMiddleware(_Middleware):
    """Record each signed-in user's activity for the presence component (who is online).

    Add after ``AuthenticationMiddleware``. The user is the username, the device the
    session key, so one user's tabs and devices are one presence. One pipelined round
    trip per request of a signed-in user; a username that is not a valid key part is not
    recorded, and with Redis unreachable the request goes on (logged at WARNING).
    """

    def before(self, request: HttpRequest) -> None:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            with _not_recorded(logger, "presence of", user.get_username()):
                record_activity(user.get_username(), _device(request))

    async def abefore(self, request: HttpRequest) -> None:
        # The user from the database through Django's async auth, the activity in the
        # event loop: no thread.
        auser = getattr(request, "auser", None)
        user = await auser() if auser is not None else None
        if user is not None and user.is_authenticated:
            with _not_recorded(logger, "presence of", user.get_username()):
                await arecord_activity(user.get_username(), _device(request))


def _device(request: HttpRequest) -> str:
    """The session's key: one user's tabs and devices are one presence."""
    return getattr(getattr(request, "session", None), "session_key", None) or DEFAULT_DEVICE


@contextmanager
def _not_recorded(log: logging.Logger, what: str, name: str) -> Iterator[None]:
    """Let the request go on when a figure cannot be recorded: bad input (a name that is
    no key part) at DEBUG, Redis unreachable at WARNING."""
    try:
        yield
    except InvalidArgument as exc:
        log.debug("%s %s not recorded: %s", what, name, exc)
    except redis.RedisError as exc:
        log.warning("%s %s not recorded: %s", what, name, exc)


class MaintenanceMiddleware(_Middleware):
    """Answer everyone but staff with the maintenance page while the flag is set.

    Add ``redisparts_app.middleware.MaintenanceMiddleware`` after Django's
    ``AuthenticationMiddleware``. Staff users and paths starting with one of
    ``REDISPARTS["MAINTENANCE_EXEMPT_PATHS"]`` (the admin by default, so staff can
    log in and clear the flag) get the normal page. The flag is read through
    ``services.config.maintenance_status`` (in an async chain its twin
    ``amaintenance_status``, in the event loop), so Redis sees at most one read a second
    per process. If Redis cannot be reached the request goes on: the flag cannot be
    read, and a view that needs Redis answers the 503 of RedisUnavailableMiddleware.
    A staff member let through finds the status in ``request.redisparts_maintenance``
    (None when the flag is off), for a banner saying visitors see the maintenance page.
    """

    def before(self, request: HttpRequest) -> HttpResponseBase | None:
        if _exempt(request):
            return None
        try:
            status = maintenance_status()
        except redis.RedisError as exc:
            _unreadable(exc)
            status = None
        return self._answer(request, status)

    async def abefore(self, request: HttpRequest) -> HttpResponseBase | None:
        # The flag is read in the event loop; only a page to answer (the user from the
        # database, the template) goes to a thread.
        if _exempt(request):
            return None
        try:
            status = await amaintenance_status()
        except redis.RedisError as exc:
            _unreadable(exc)
            status = None
        if status is None:
            return self._answer(request, None)
        return await sync_to_async(self._answer)(request, status)

    def _answer(self, request: HttpRequest, status: Maintenance | None) -> HttpResponseBase | None:
        """The maintenance page for ``request``, or None to let it through (staff)."""
        request.redisparts_maintenance = status  # type: ignore[attr-defined]
        if status is None or getattr(getattr(request, "user", None), "is_staff", False):
            return None
        response = TemplateResponse(
            request, MAINTENANCE_TEMPLATES, {"maintenance": status}, status=503
        )
        response["Retry-After"] = str(status.retry_after)
        return response.render()


def _exempt(request: HttpRequest) -> bool:
    return request.path.startswith(tuple(app_settings.MAINTENANCE_EXEMPT_PATHS))


def _unreadable(exc: redis.RedisError) -> None:
    """Go on serving when Redis cannot tell the flag (the view may answer the 503)."""
    if not redis_unavailable(exc):
        raise exc
    logger.warning("maintenance flag unreadable, serving normally: %s", exc)


class ResponseTimeMiddleware(_Middleware):
    """Time each resolved request and record it per view; never turns a response into an error.

    Add after the middleware that may answer early, so the time covers the view::

        MIDDLEWARE = [..., "redisparts_app.middleware.RedisUnavailableMiddleware",
                      "redisparts_app.middleware.ResponseTimeMiddleware"]

    The view name is ``request.resolver_match.view_name`` (``"shop:cart"``, or the dotted path
    of an unnamed view) with ``:`` written as ``.``; requests that resolve to no view (404s
    from the URL resolver) are not recorded. Times are seconds, measured with
    ``time.perf_counter`` around the rest of the middleware chain and the view, and stored by
    ``services.stats.record_access_time`` (keys rp:stats:{<view>}:access_time and
    rp:stats_rank:{access_time}:slowest). A Redis failure while recording is logged at
    WARNING and the response goes out unchanged; with Redis unreachable each request waits at
    most the client's connect timeout.
    """

    # Seconds from an arbitrary origin; a subclass may swap it (tests step it by hand).
    timer = staticmethod(time.perf_counter)

    def __call__(self, request: HttpRequest) -> Any:
        if self._async:
            return self._acall(request)
        start = self.timer()
        response = self.get_response(request)
        self.after(request, self.timer() - start)
        return response

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        # Timed and recorded in the event loop.
        start = self.timer()
        response = await self.get_response(request)
        view = _view_name(request)
        if view is not None:
            with _not_recorded(stats_logger, "response time of", view):
                await arecord_access_time(stats_context(view), self.timer() - start)
        return response

    def after(self, request: HttpRequest, elapsed: float) -> None:
        view = _view_name(request)
        if view is not None:
            with _not_recorded(stats_logger, "response time of", view):
                record_access_time(stats_context(view), elapsed)


def _view_name(request: HttpRequest) -> str | None:
    """The resolved view's name with ``:`` as ``.``; None for a request no view took."""
    match = getattr(request, "resolver_match", None)
    return None if match is None else match.view_name.replace(":", ".")
