"""Operational figures and health problems of the components, read from Redis.

Import: ``from redisparts_app.services.figures import inventory, queue_figures``.

Figures are what the admin's queue page, the Prometheus collector (``metrics.py``) and the
django-health-check checks (``health.py``) show; problems are the sentences a failing
health check reports. Nothing here writes, and nothing needs django-health-check or
prometheus_client. What each figure means: docs/howto/monitoring.md.

- Queues (per group, two round trips on the group's server): ready tasks and the age of
  the task at the head of each queue (counted from its ``ready_at``), delayed, in flight,
  in flight past their lease, failed and quarantined tasks.
- Locks: held locks and those whose owner key has no TTL (never freed if the holder dies).
- Semaphores: live permits and the limit the last acquire enforced; chats and the
  messages some member has not fetched yet; counters' last complete bucket.
- Replication: each replica's lag in bytes and seconds and its link to its master; on a
  Redis Cluster, of every node.

Lock, semaphore, chat and queue-group names come from the components' registries
(``services.registry``), never from a SCAN, whatever the size of the keyspace.
"""

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from redis.cluster import RedisCluster

from ..checks import probe
from ..conf import app_settings
from ..connection import Client, resolve_client, slot_client
from ..keys import make_key
from . import config, counters, locks, registry, semaphores
from .persistence import node_statuses, server_status
from .tasks import TaskQueue, queue_groups

__all__ = [
    "GroupFigures",
    "LockFigures",
    "MemoryFigures",
    "QueueFigures",
    "ReplicaLag",
    "SemaphoreFigures",
    "backlog_problems",
    "chat_figures",
    "counter_figures",
    "group_figures",
    "inventory",
    "lease_problems",
    "lock_figures",
    "lock_problems",
    "memory_figures",
    "memory_problems",
    "overview",
    "queue_figures",
    "replica_lags",
    "replication_problems",
    "semaphore_figures",
    "unreachable",
]

# Keys read per pipeline when a walk found many names.
BATCH = 200
_T = TypeVar("_T")
# Names a problem sentence lists before "and N more".
SHOWN = 5
# What a full walk looks for: component -> roles of the key that names one item.
# The key that tells a registered name is in use, per component of the inventory.
INVENTORY = {
    "queue": ("queues",),
    "lock": ("owner",),
    "semaphore": ("holders",),
    "chat": ("members",),
}


@dataclass(frozen=True)
class QueueFigures:
    """One named queue: ready tasks, and seconds its head task has waited (None: empty)."""

    name: str
    ready: int
    oldest_age: float | None


@dataclass(frozen=True)
class GroupFigures:
    """One queue group: its queues and the sizes of its other task sets.

    ``expired`` counts in-flight tasks whose lease deadline passed; ``most_overdue`` is
    how many seconds past its deadline the earliest of them is (None: none expired).
    ``limits``: the permits and waiting tasks of its limited queues (``TaskQueue.limits``).
    """

    group: str
    queues: list[QueueFigures]
    delayed: int
    inflight: int
    expired: int
    most_overdue: float | None
    failed: int
    quarantined: int
    limits: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LockFigures:
    """Held locks, and the names of those whose owner key has no TTL."""

    held: int
    without_ttl: list[str]


@dataclass(frozen=True)
class SemaphoreFigures:
    """Live permits of one semaphore, and the limit its last acquire enforced (None: unknown)."""

    name: str
    holders: int
    limit: int | None


@dataclass(frozen=True)
class ReplicaLag:
    """One replica as seen from its master (``node`` is the master's address on a cluster)."""

    node: str | None
    replica: str
    state: str | None
    lag_bytes: int
    lag_seconds: int | None


# -- names ------------------------------------------------------------------------------


def inventory(
    components: Iterable[str] = INVENTORY, *, client: Client | None = None
) -> dict[str, set[str]]:
    """Return the names of the queue groups, locks, semaphores and chats in Redis.

    Each component's registered names whose key exists (``services.registry``): the cost
    follows the number of names in use, not the size of the keyspace; no SCAN.
    """
    client = resolve_client(client)
    return {
        name: set(registry.existing(name, _role_key(name, *INVENTORY[name]), client=client))
        for name in components
    }


def _role_key(component: str, *roles: str) -> Callable[[str], str]:
    return lambda name: make_key(component, name, *roles)


def overview(*, client: Client | None = None) -> dict[str, Any]:
    """What the admin's dashboard shows: task counts per queue group, held locks,
    semaphores in use, counters, the maintenance flag and the server's state. A few round
    trips per queue group and per hundred lock and semaphore names; no SCAN."""
    client = resolve_client(client)
    groups = []
    for group in queue_groups(client=client, with_default=True):
        counts = TaskQueue(group, client=client).counts()
        groups.append({"name": group, "ready": sum(counts["queues"].values()), **counts})
    return {
        "groups": groups,
        "locks": len(locks.held_locks(client)),
        "semaphores": len(semaphores.semaphore_names(client=client)),
        "maintenance": config.maintenance_status(client=client),
        "server": server_status(client=client),
        "counters": counters.index_size(client=client),
    }


# -- queues -----------------------------------------------------------------------------


def group_figures(group: str, *, client: Client | None = None) -> GroupFigures:
    """Return the figures of one queue group, read on the server holding the group."""
    queue = TaskQueue(group, client=client)
    # Every key of a group shares its hash tag: one server, plain pipelines.
    server = slot_client(queue.client, queue.key("tasks"))
    names = sorted(name.decode() for name in server.smembers(queue.key("queues")))
    pipe = server.pipeline(transaction=False)
    pipe.time()
    for name in names:
        pipe.llen(queue.queue_key(name)).lindex(queue.queue_key(name), 0)
    for role in ("delayed", "inflight", "failed", "quarantine"):
        pipe.zcard(queue.key(role))
    pipe.zrange(queue.key("inflight"), 0, 0, withscores=True)
    (seconds, micros), *replies = pipe.execute()
    now_ms = seconds * 1000 + micros // 1000
    lengths, heads = replies[0 : 2 * len(names) : 2], replies[1 : 2 * len(names) : 2]
    delayed, inflight, failed, quarantined, earliest = replies[2 * len(names) :]
    pipe = server.pipeline(transaction=False)
    pipe.zcount(queue.key("inflight"), "-inf", now_ms)
    head_ids = [head for head in heads if head is not None]
    if head_ids:
        pipe.hmget(queue.key("tasks"), head_ids)
    expired, *bodies = pipe.execute()
    records = dict(zip(head_ids, bodies[0] if bodies else [], strict=True))
    now = time.time()
    queues = [
        QueueFigures(name, int(length), _waited(records.get(head), now))
        for name, length, head in zip(names, lengths, heads, strict=True)
    ]
    overdue = (now_ms - earliest[0][1]) / 1000 if earliest and earliest[0][1] <= now_ms else None
    return GroupFigures(
        group=queue.group,
        queues=queues,
        delayed=int(delayed),
        inflight=int(inflight),
        expired=int(expired),
        most_overdue=overdue,
        failed=int(failed),
        quarantined=int(quarantined),
        limits=queue.limits(names),
    )


def _waited(body: bytes | None, now: float) -> float | None:
    """Seconds since a ready task became ready; None without a record (deleted meanwhile)."""
    if body is None:
        return None
    record = json.loads(body)
    since = record.get("ready_at", record.get("enqueued_at"))
    return max(0.0, now - since) if since is not None else None


def queue_figures(
    *, groups: Iterable[str] | None = None, client: Client | None = None
) -> list[GroupFigures]:
    """Return the figures of ``groups`` (default: every group with queues), sorted by name."""
    client = resolve_client(client)
    if groups is None:
        groups = queue_groups(client=client, with_default=True)
    return [group_figures(group, client=client) for group in sorted(groups)]


def backlog_problems(groups: Iterable[GroupFigures], max_age: float) -> list[str]:
    """Describe every queue whose head task has waited more than ``max_age`` seconds."""
    return [
        f"queue {queue.name!r} of group {group.group!r}: the next task has waited "
        f"{queue.oldest_age:.0f}s (limit {max_age:g}s, {queue.ready} ready); are workers "
        "running for it?"
        for group in groups
        for queue in group.queues
        if queue.oldest_age is not None and queue.oldest_age > max_age
    ]


def lease_problems(groups: Iterable[GroupFigures], grace: float) -> list[str]:
    """Describe every group with in-flight tasks more than ``grace`` seconds past their lease."""
    return [
        f"group {group.group!r}: {group.expired} in-flight task(s) past their lease, the "
        f"earliest by {group.most_overdue:.0f}s (limit {grace:g}s); their workers died and "
        "no reaper ran: is rp_scheduler (or any rp_worker) running?"
        for group in groups
        if group.most_overdue is not None and group.most_overdue > grace
    ]


# -- locks, semaphores, chats, counters -------------------------------------------------


def lock_figures(
    names: Iterable[str] | None = None, *, client: Client | None = None
) -> LockFigures:
    """Return the held locks among ``names`` (default: every registered lock)."""
    client = resolve_client(client)
    if names is None:
        names = inventory(["lock"], client=client)["lock"]
    names = sorted(names)
    ttls = _pipelined(client, names, lambda pipe, name: pipe.pttl(make_key("lock", name, "owner")))
    # PTTL: -2 the key is gone (released meanwhile), -1 it has no TTL.
    held = sum(ttl != -2 for ttl in ttls)
    without = [name for name, ttl in zip(names, ttls, strict=True) if ttl == -1]
    return LockFigures(held=held, without_ttl=without)


def lock_problems(figures: LockFigures) -> list[str]:
    """Describe the locks that can never expire."""
    if not figures.without_ttl:
        return []
    return [
        f"{len(figures.without_ttl)} lock(s) without a TTL, never freed if their holder "
        f"dies: {_listed(figures.without_ttl)}; release them or set a TTL (PEXPIRE)"
    ]


def semaphore_figures(
    names: Iterable[str], *, client: Client | None = None
) -> list[SemaphoreFigures]:
    """Return live permits (deadline after now, on this host's clock) and recorded limits."""
    client = resolve_client(client)
    names = sorted(names)
    now_ms = time.time() * 1000

    def read(pipe: Client, name: str) -> None:
        pipe.zcount(make_key("semaphore", name, "holders"), f"({now_ms}", "+inf")
        pipe.hget(make_key("semaphore", name, "info"), "limit")

    replies = _pipelined(client, names, read)
    return [
        SemaphoreFigures(name, int(live), int(limit) if limit is not None else None)
        for name, live, limit in zip(names, replies[::2], replies[1::2], strict=True)
    ]


def chat_figures(chats: Iterable[str], *, client: Client | None = None) -> tuple[int, int]:
    """Return (chats, messages held): a chat keeps a message until its first send or leave
    after every member fetched it."""
    client = resolve_client(client)
    chats = sorted(chats)
    held = _pipelined(client, chats, lambda pipe, chat: pipe.zcard(make_key("chat", chat, "msgs")))
    return len(chats), sum(int(count) for count in held)


def counter_figures(*, client: Client | None = None) -> list[tuple[str, int, int]]:
    """Return (counter, precision, count of its last complete bucket) per indexed counter."""
    client = resolve_client(client)
    pairs = [
        (name, precision)
        for name, found in counters.known_counters(client=client).items()
        for precision in found
    ]
    now = time.time()

    def read(pipe: Client, pair: tuple[str, int]) -> None:
        name, precision = pair
        last = int(now // precision) * precision - precision
        pipe.hget(counters.counter_key(name, precision), last)

    values = _pipelined(client, pairs, read)
    return [
        (name, precision, int(value or 0))
        for (name, precision), value in zip(pairs, values, strict=True)
    ]


# -- replication and reachability -------------------------------------------------------


def replica_lags(*, client: Client | None = None) -> list[ReplicaLag]:
    """Return every replica of every master behind ``client`` (each node of a cluster)."""
    return [
        ReplicaLag(
            node=status["node"],
            replica=replica["address"],
            state=replica["state"],
            lag_bytes=int(replica["lag_bytes"]),
            lag_seconds=replica["lag_seconds"],
        )
        for status in node_statuses(client=client)
        for replica in status.get("replicas", [])
    ]


def replication_problems(
    statuses: Iterable[dict[str, Any]], max_lag: float, max_bytes: int | None
) -> list[str]:
    """Describe lagging or disconnected replicas in ``node_statuses()``.

    A master's replica lags when its last acknowledgement is more than ``max_lag``
    seconds old or (``max_bytes`` not None) its offset is more than ``max_bytes`` behind
    ``master_repl_offset``; a replica node (on a cluster) when its link is down or it
    heard nothing from its master for more than ``max_lag`` seconds.
    """
    problems = []
    for status in statuses:
        where = f"node {status['node']}: " if status["node"] else ""
        for replica in status.get("replicas", []):
            lag, behind = replica["lag_seconds"], replica["lag_bytes"]
            if replica["state"] != "online":
                problems.append(f"{where}replica {replica['address']} is {replica['state']}")
            elif lag is not None and lag > max_lag:
                problems.append(
                    f"{where}replica {replica['address']} last acknowledged {lag}s ago "
                    f"(limit {max_lag:g}s), {behind} bytes behind"
                )
            elif max_bytes is not None and behind > max_bytes:
                problems.append(
                    f"{where}replica {replica['address']} is {behind} bytes behind its master "
                    f"(limit {max_bytes})"
                )
        if status["role"] != "master":
            link, silent = status.get("master_link_status"), status.get("seconds_since_master_io")
            if link != "up":
                problems.append(f"{where}link to master {status['master']} is {link}")
            elif silent is not None and silent > max_lag:
                problems.append(
                    f"{where}nothing heard from master {status['master']} for {silent}s "
                    f"(limit {max_lag:g}s)"
                )
    return problems


# -- memory -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryFigures:
    """Bytes a server uses and its maxmemory (0: none set); ``node`` None off a Cluster."""

    node: str | None
    used: int
    maxmemory: int


def memory_figures(*, client: Client | None = None) -> list[MemoryFigures]:
    """Return the memory in use and maxmemory of every server behind ``client``."""
    return [
        MemoryFigures(node, int(info["used_memory"]), int(info.get("maxmemory", 0)))
        for node, info in _each_node(resolve_client(client), lambda c: c.info("memory"))
    ]


def memory_problems(figures: Iterable[MemoryFigures], max_share: float) -> list[str]:
    """Describe servers using more than ``max_share`` of their maxmemory: near it, writes
    are refused (noeviction) or keys evicted, locks and queued tasks among them."""
    problems = []
    for found in figures:
        if found.maxmemory and found.used > max_share * found.maxmemory:
            where = f"node {found.node}: " if found.node else ""
            problems.append(
                f"{where}{found.used / found.maxmemory:.0%} of maxmemory in use "
                f"({found.used} of {found.maxmemory} bytes; limit {max_share:.0%})"
            )
    return problems


def _each_node(client: Client, read: Callable[[Any], _T]) -> list[tuple[str | None, _T]]:
    """``read`` of every server behind ``client``: each node of a Cluster (by address),
    else the one server (node None)."""
    if not isinstance(client, RedisCluster):
        return [(None, read(client))]
    nodes = sorted(client.get_nodes(), key=lambda node: node.name)
    return [(node.name, read(node.redis_connection)) for node in nodes]


def unreachable(alias: str) -> str | None:
    """Return why the connection ``alias`` does not answer PING, or None when it does.

    Waits at most REDISPARTS["CHECK_TIMEOUT"] seconds (the system check's probe), so an
    unroutable host cannot hold a scrape or a health probe for a TCP connect timeout.
    """
    error = probe(alias, float(app_settings.CHECK_TIMEOUT)).error
    return None if error is None else f"Redis connection {alias!r} is unreachable: {error}"


# -- helpers ----------------------------------------------------------------------------


def _pipelined(
    client: Client, items: Sequence[_T], queue_reads: Callable[[Client, _T], object]
) -> list[Any]:
    """Run ``queue_reads(pipe, item)`` for every item, ``BATCH`` items per pipeline."""
    replies: list[Any] = []
    for start in range(0, len(items), BATCH):
        pipe = client.pipeline(transaction=False)
        for item in items[start : start + BATCH]:
            queue_reads(pipe, item)
        replies.extend(pipe.execute())
    return replies


def _listed(names: list[str]) -> str:
    shown = ", ".join(repr(name) for name in names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
