"""Prometheus metrics of the components, read from Redis at scrape time (``monitoring`` extra).

Import: ``from redisparts_app.monitoring.metrics import RedispartsCollector, metrics_view``.

``RedispartsCollector`` is a prometheus_client collector: every ``collect()`` reads the
figures afresh (``services.figures``), so nothing is kept between scrapes and every web
process answers the same. ``metrics_view`` serves it in the text format (OpenMetrics when
the scraper asks for it) to staff or the bearer token (``access.py``). To add the figures
to a registry of your own instead: ``REGISTRY.register(RedispartsCollector())``.

Series (gauges, listed in docs/howto/monitoring.md): ``redisparts_redis_up{connection}``,
``redisparts_queue_*`` per ``group``/``queue``, ``redisparts_locks_*``,
``redisparts_semaphore_*``, ``redisparts_chat*``, ``redisparts_counter_events`` and
``redisparts_replica_lag_*``.

Guarantee: when Redis is unreachable only ``redisparts_redis_up`` is served (0), with
status 200, so the scrape itself succeeds and alerts can fire on it.
"""

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import redis
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from ..conf import app_settings
from ..connection import Client, get_redis
from ..services import figures
from .access import monitoring_only

__all__ = [
    "RedispartsCollector",
    "metrics_view",
]

try:
    from prometheus_client.core import GaugeMetricFamily, Metric
    from prometheus_client.exposition import choose_encoder
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImproperlyConfigured(
        "redisparts_app.monitoring.metrics needs prometheus_client: "
        "pip install 'redisparts[monitoring]'"
    ) from exc

logger = logging.getLogger("redisparts")


def _gauge(
    name: str, documentation: str, labels: Iterable[str], rows: Iterable[Sequence[Any]]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=list(labels))
    for *values, value in rows:
        family.add_metric([str(v) for v in values], value)
    return family


class RedispartsCollector:
    """Collect the figures of the Redis connection ``connection`` (default: the default)."""

    def __init__(self, connection: str | None = None) -> None:
        self.connection = connection

    def collect(self) -> Iterator[Metric]:
        aliases = list(app_settings.CONNECTIONS)
        reachable = {alias: figures.unreachable(alias) is None for alias in aliases}
        yield _gauge(
            "redisparts_redis_up",
            "1 when the Redis connection answers PING.",
            ["connection"],
            [(alias, int(up)) for alias, up in reachable.items()],
        )
        alias = self.connection or app_settings.DEFAULT_CONNECTION
        if not reachable.get(alias):
            return
        try:
            # Read everything before yielding, so a failure leaves no half-written page.
            families = list(self._figures(get_redis(alias)))
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            logger.warning("metrics: Redis connection %r failed during the scrape: %s", alias, exc)
            return
        yield from families

    def _figures(self, client: Client) -> Iterator[Metric]:
        names = figures.inventory(client=client)
        # The default group too, like the admin: its zeros before its first task.
        group_names = names["queue"] | {str(app_settings.QUEUE_GROUP)}
        groups = figures.queue_figures(groups=group_names, client=client)
        queues = [(g.group, q.name, q) for g in groups for q in g.queues]
        yield _gauge(
            "redisparts_queue_ready_tasks",
            "Tasks waiting in a queue.",
            ["group", "queue"],
            [(group, name, q.ready) for group, name, q in queues],
        )
        yield _gauge(
            "redisparts_queue_oldest_ready_age_seconds",
            "Seconds the next task of a queue has waited since it became ready (0: empty).",
            ["group", "queue"],
            [(group, name, q.oldest_age or 0.0) for group, name, q in queues],
        )
        for field, what in (
            ("delayed", "Delayed tasks and retries waiting for their due time."),
            ("inflight", "Tasks being run by a worker."),
            ("expired", "In-flight tasks past their lease deadline, not yet reaped."),
            ("failed", "Tasks in the failed registry."),
            ("quarantined", "Tasks quarantined after too many deliveries."),
        ):
            name = "expired_lease" if field == "expired" else field
            yield _gauge(
                f"redisparts_queue_{name}_tasks",
                what,
                ["group"],
                [(g.group, getattr(g, field)) for g in groups],
            )
        locks = figures.lock_figures(names["lock"], client=client)
        yield _gauge("redisparts_locks_held", "Locks held.", [], [(locks.held,)])
        yield _gauge(
            "redisparts_locks_without_ttl",
            "Held locks whose owner key has no TTL (never freed if the holder dies).",
            [],
            [(len(locks.without_ttl),)],
        )
        semaphores = figures.semaphore_figures(names["semaphore"], client=client)
        yield _gauge(
            "redisparts_semaphore_holders",
            "Live permits of a semaphore.",
            ["semaphore"],
            [(s.name, s.holders) for s in semaphores],
        )
        yield _gauge(
            "redisparts_semaphore_limit",
            "Permits the last acquire of a semaphore allowed.",
            ["semaphore"],
            [(s.name, s.limit) for s in semaphores if s.limit is not None],
        )
        chats, messages = figures.chat_figures(names["chat"], client=client)
        yield _gauge("redisparts_chats", "Group chats.", [], [(chats,)])
        yield _gauge(
            "redisparts_chat_messages",
            "Chat messages held: those some member has not fetched, and until the chat's"
            " next send or leave those every member has.",
            [],
            [(messages,)],
        )
        yield _gauge(
            "redisparts_counter_events",
            "Events a counter recorded in its last complete bucket of the precision.",
            ["counter", "precision_seconds"],
            figures.counter_figures(client=client),
        )
        lags = figures.replica_lags(client=client)
        yield _gauge(
            "redisparts_replica_lag_bytes",
            "Bytes a replica is behind its master's replication offset.",
            ["node", "replica"],
            [(lag.node or "", lag.replica, lag.lag_bytes) for lag in lags],
        )
        yield _gauge(
            "redisparts_replica_lag_seconds",
            "Seconds since a replica last acknowledged its master's stream.",
            ["node", "replica"],
            [
                (lag.node or "", lag.replica, lag.lag_seconds)
                for lag in lags
                if lag.lag_seconds is not None
            ],
        )


@require_GET
@monitoring_only
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Serve the collector's figures to staff or the bearer token (403 otherwise)."""
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    body = encoder(RedispartsCollector())
    response = HttpResponse(body, content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response
