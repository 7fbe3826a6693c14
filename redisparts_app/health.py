"""Health checks of the components for django-health-check (the ``monitoring`` extra).

Optional: nothing else in the app imports this module, so the app works without
django-health-check installed. The checks (figures and messages come from
``services.health``):

- ``RedisReachable(alias)``: the connection answers PING (one per configured alias).
- ``QueueBacklog``: no queue's next task has waited more than HEALTH_QUEUE_MAX_AGE seconds.
- ``ExpiredLeases``: no in-flight task is more than HEALTH_LEASE_GRACE seconds past its
  lease (a worker died and no reaper runs).
- ``LocksWithoutTTL``: no lock's owner key lacks a TTL (such a lock is never freed).
- ``ReplicationLag``: every replica is online and within HEALTH_REPLICATION_MAX_LAG
  seconds (and HEALTH_REPLICATION_MAX_LAG_BYTES when set); on a cluster, of every node.

Use them in django-health-check's own view, e.g. a public probe::

    checks = [*redisparts_checks(), "health_check.checks.Database"]
    path("ht/", HealthCheckView.as_view(checks=checks))

or ``HealthView`` (``urls.py``), which reads the connection aliases at each request and
answers only staff or the metrics token (``access.py``). The component checks read the
``connection`` alias (default: REDISPARTS["DEFAULT_CONNECTION"]).
"""

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils.decorators import method_decorator

from . import access
from .conf import app_settings
from .connection import get_redis
from .exceptions import ConnectionNotConfigured
from .services import health
from .services.persistence import node_statuses

try:
    from health_check.base import HealthCheck
    from health_check.exceptions import ServiceUnavailable
    from health_check.views import HealthCheckView
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImproperlyConfigured(
        "redisparts_app.health needs django-health-check: pip install 'redisparts[monitoring]'"
    ) from exc


@contextmanager
def _reading(alias: str | None) -> Iterator[Any]:
    """Yield the client of ``alias``; an unreachable server fails the check with its reason."""
    try:
        yield get_redis(alias)
    except ConnectionNotConfigured as exc:
        raise ServiceUnavailable(str(exc)) from exc
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        shown = alias or app_settings.DEFAULT_CONNECTION
        raise ServiceUnavailable(f"Redis connection {shown!r} is unreachable: {exc}") from exc


def _report(problems: list[str]) -> None:
    if problems:
        raise ServiceUnavailable("; ".join(problems))


@dataclasses.dataclass
class RedisReachable(HealthCheck):
    """The Redis connection ``alias`` answers PING."""

    alias: str = "default"

    def run(self) -> None:
        problem = health.unreachable(self.alias)
        if problem:
            raise ServiceUnavailable(problem)


@dataclasses.dataclass
class QueueBacklog(HealthCheck):
    """No queue's next task has waited more than REDISPARTS["HEALTH_QUEUE_MAX_AGE"] seconds."""

    connection: str | None = None

    def run(self) -> None:
        with _reading(self.connection) as client:
            groups = health.queue_figures(client=client)
        _report(health.backlog_problems(groups, float(app_settings.HEALTH_QUEUE_MAX_AGE)))


@dataclasses.dataclass
class ExpiredLeases(HealthCheck):
    """No in-flight task is more than REDISPARTS["HEALTH_LEASE_GRACE"] seconds past its lease."""

    connection: str | None = None

    def run(self) -> None:
        with _reading(self.connection) as client:
            groups = health.queue_figures(client=client)
        _report(health.lease_problems(groups, float(app_settings.HEALTH_LEASE_GRACE)))


@dataclasses.dataclass
class LocksWithoutTTL(HealthCheck):
    """No lock's owner key lacks a TTL."""

    connection: str | None = None

    def run(self) -> None:
        with _reading(self.connection) as client:
            figures = health.lock_figures(client=client)
        _report(health.lock_problems(figures))


@dataclasses.dataclass
class ReplicationLag(HealthCheck):
    """Every replica is online and recent (REDISPARTS["HEALTH_REPLICATION_MAX_LAG..."])."""

    connection: str | None = None

    def run(self) -> None:
        with _reading(self.connection) as client:
            statuses = node_statuses(client=client)
        _report(
            health.replication_problems(
                statuses,
                float(app_settings.HEALTH_REPLICATION_MAX_LAG),
                app_settings.HEALTH_REPLICATION_MAX_LAG_BYTES,
            )
        )


def redisparts_checks() -> list[tuple[type[HealthCheck], dict[str, Any]]]:
    """Return the checks, as HealthCheckView's ``checks`` takes them, for the current settings."""
    return [
        *((RedisReachable, {"alias": alias}) for alias in app_settings.CONNECTIONS),
        (QueueBacklog, {}),
        (ExpiredLeases, {}),
        (LocksWithoutTTL, {}),
        (ReplicationLag, {}),
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
    async def dispatch(self, request, *args, **kwargs):
        # The session and user live in the database: read them outside the event loop.
        if not await sync_to_async(access.may_monitor)(request):
            return access.denied()
        return await super().dispatch(request, *args, **kwargs)

    def get_checks(self):
        self.checks = [*redisparts_checks(), *self.extra_checks]
        return super().get_checks()
