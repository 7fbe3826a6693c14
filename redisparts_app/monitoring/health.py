"""Health checks of the components for django-health-check (the ``monitoring`` extra).

Import: ``from redisparts_app.monitoring.health import HealthView, redisparts_checks``.

Optional: nothing else in the app imports this module. The checks (figures and messages
from ``services.figures``) read the ``connection`` alias (default: DEFAULT_CONNECTION):

- ``RedisReachable(alias)``: the connection answers PING (one per configured alias).
- ``QueueBacklog``: no queue's next task has waited more than HEALTH_QUEUE_MAX_AGE seconds.
- ``ExpiredLeases``: no in-flight task is more than HEALTH_LEASE_GRACE seconds past its lease.
- ``LocksWithoutTTL``: no lock's owner key lacks a TTL (such a lock is never freed).
- ``ReplicationLag``: every replica is online and within HEALTH_REPLICATION_MAX_LAG seconds
  (and HEALTH_REPLICATION_MAX_LAG_BYTES when set); on a cluster, of every node.
- ``MemoryNearLimit``: no server uses more than HEALTH_MEMORY_MAX_SHARE of its maxmemory.

Use them in django-health-check's own view
(``HealthCheckView.as_view(checks=[*redisparts_checks(), ...])``) or ``HealthView``
(``urls.py``), which answers only staff or the metrics token (``access.py``); see
docs/howto/monitoring.md.
"""

import dataclasses
from typing import Any

import redis
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils.decorators import method_decorator

from ..conf import app_settings
from ..connection import Client, get_redis
from ..exceptions import ConnectionNotConfigured
from ..services import figures
from ..services.persistence import node_statuses
from . import access

__all__ = [
    "ComponentCheck",
    "ExpiredLeases",
    "HealthView",
    "LocksWithoutTTL",
    "MemoryNearLimit",
    "QueueBacklog",
    "RedisReachable",
    "ReplicationLag",
    "redisparts_checks",
]

try:
    from health_check.base import HealthCheck
    from health_check.exceptions import ServiceUnavailable
    from health_check.views import HealthCheckView
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImproperlyConfigured(
        "redisparts_app.monitoring.health needs django-health-check: "
        "pip install 'redisparts[monitoring]'"
    ) from exc


@dataclasses.dataclass
class RedisReachable(HealthCheck):
    """The Redis connection ``alias`` answers PING."""

    alias: str = "default"

    def run(self) -> None:
        problem = figures.unreachable(self.alias)
        if problem:
            raise ServiceUnavailable(problem)


@dataclasses.dataclass(repr=False)
class ComponentCheck(HealthCheck):
    """A check of figures read through the connection ``connection`` (None: the default).

    Subclasses return the problems they find; any problem fails the check with them all.
    """

    connection: str | None = None

    def __repr__(self) -> str:
        # The check's name in reports: the alias only when one was chosen.
        name = type(self).__name__
        return name if self.connection is None else f"{name}(connection={self.connection!r})"

    def run(self) -> None:
        try:
            problems = self.problems(get_redis(self.connection))
        except ConnectionNotConfigured as exc:
            raise ServiceUnavailable(str(exc)) from exc
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            alias = self.connection or app_settings.DEFAULT_CONNECTION
            raise ServiceUnavailable(f"Redis connection {alias!r} is unreachable: {exc}") from exc
        if problems:
            raise ServiceUnavailable("; ".join(problems))

    def problems(self, client: Client) -> list[str]:
        raise NotImplementedError


@dataclasses.dataclass(repr=False)
class QueueBacklog(ComponentCheck):
    """No queue's next task has waited more than REDISPARTS["HEALTH_QUEUE_MAX_AGE"] seconds."""

    def problems(self, client: Client) -> list[str]:
        groups = figures.queue_figures(client=client)
        return figures.backlog_problems(groups, float(app_settings.HEALTH_QUEUE_MAX_AGE))


@dataclasses.dataclass(repr=False)
class ExpiredLeases(ComponentCheck):
    """No in-flight task is more than REDISPARTS["HEALTH_LEASE_GRACE"] seconds past its lease."""

    def problems(self, client: Client) -> list[str]:
        groups = figures.queue_figures(client=client)
        return figures.lease_problems(groups, float(app_settings.HEALTH_LEASE_GRACE))


@dataclasses.dataclass(repr=False)
class LocksWithoutTTL(ComponentCheck):
    """No lock's owner key lacks a TTL."""

    def problems(self, client: Client) -> list[str]:
        return figures.lock_problems(figures.lock_figures(client=client))


@dataclasses.dataclass(repr=False)
class ReplicationLag(ComponentCheck):
    """Every replica is online and recent (REDISPARTS["HEALTH_REPLICATION_MAX_LAG..."])."""

    def problems(self, client: Client) -> list[str]:
        return figures.replication_problems(
            node_statuses(client=client),
            float(app_settings.HEALTH_REPLICATION_MAX_LAG),
            app_settings.HEALTH_REPLICATION_MAX_LAG_BYTES,
        )


@dataclasses.dataclass(repr=False)
class MemoryNearLimit(ComponentCheck):
    """No server uses more than REDISPARTS["HEALTH_MEMORY_MAX_SHARE"] of its maxmemory."""

    def problems(self, client: Client) -> list[str]:
        return figures.memory_problems(
            figures.memory_figures(client=client), float(app_settings.HEALTH_MEMORY_MAX_SHARE)
        )


def redisparts_checks() -> list[tuple[type[HealthCheck], dict[str, Any]]]:
    """Return the checks, as HealthCheckView's ``checks`` takes them, for the current settings."""
    return [
        *((RedisReachable, {"alias": alias}) for alias in app_settings.CONNECTIONS),
        (QueueBacklog, {}),
        (ExpiredLeases, {}),
        (LocksWithoutTTL, {}),
        (ReplicationLag, {}),
        (MemoryNearLimit, {}),
    ]


class HealthView(HealthCheckView):
    """django-health-check's view over ``redisparts_checks()`` and ``extra_checks``.

    The checks are read from the settings at each request; only staff or the metrics
    token get an answer (``access.may_monitor``), since the messages name queues, locks
    and replica addresses. 200 when every check passes, 500 otherwise; ``?format=json``
    or ``text`` as django-health-check offers. Its HTML page needs ``"health_check"`` in
    INSTALLED_APPS (for the template).
    """

    extra_checks: tuple = ()

    @method_decorator(transaction.non_atomic_requests)
    async def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        # The session and user live in the database: read them outside the event loop.
        if not await sync_to_async(access.may_monitor)(request):
            # The 403 page may read the session's user: outside the event loop too.
            return await sync_to_async(access.denied)(request)
        return await super().dispatch(request, *args, **kwargs)

    def get_checks(self) -> Any:
        self.checks = [*redisparts_checks(), *self.extra_checks]
        return super().get_checks()
