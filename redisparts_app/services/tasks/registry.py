"""Registered task callables: the ``@task`` decorator and the name → task registry.

A worker runs a task only by the name it was registered under; the payload in
Redis carries the name and JSON arguments, never code.
"""

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...exceptions import InvalidTask
from ...keys import validate_key_part
from . import queue as queue_module
from .queue import Limit, TaskQueue, check_count, limited_queue, validate_task_name
from .results import Result, check_expires

__all__ = [
    "Task",
    "get_task",
    "limited_queues",
    "registered_names",
    "task",
]

_registry: dict[str, "Task"] = {}


@dataclass(frozen=True)
class Task:
    """A registered callable with its queue options; call it to run it in-process."""

    func: Callable[..., Any]
    name: str
    queue: str
    group: str | None
    max_retries: int | None
    soft_time_limit: float | None = None
    time_limit: float | None = None
    result: bool = True
    expires: float | None = None
    concurrency: int | None = None
    rate_limit: str | None = None

    @property
    def limit(self) -> Limit | None:
        """The task's ``Limit``, None for a task without limits."""
        if self.concurrency is None and self.rate_limit is None:
            return None
        rate, window = parse_rate(self.rate_limit) if self.rate_limit else (0, 0.0)
        return Limit(self.concurrency or 0, rate, window)

    @property
    def limited(self) -> bool:
        """Whether the task has a limit: its runs go to its ``limited_queue``."""
        return self.concurrency is not None or self.rate_limit is not None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def enqueue(self, *args: Any, **kwargs: Any) -> Result:
        """Enqueue a run with these arguments now (on commit inside a transaction)."""
        return self.enqueue_with(args=args, kwargs=kwargs)

    def enqueue_in(self, delay: float, *args: Any, **kwargs: Any) -> Result:
        """Enqueue a run due ``delay`` seconds from now (Redis server time)."""
        return self.enqueue_with(args=args, kwargs=kwargs, delay=delay)

    async def aenqueue(self, *args: Any, **kwargs: Any) -> Result:
        """The async twin of ``enqueue`` (``TaskQueue.aenqueue``: pushed at once)."""
        return await self.aenqueue_with(args=args, kwargs=kwargs)

    async def aenqueue_in(self, delay: float, *args: Any, **kwargs: Any) -> Result:
        """The async twin of ``enqueue_in``."""
        return await self.aenqueue_with(args=args, kwargs=kwargs, delay=delay)

    async def aenqueue_with(
        self, *, args: Any = (), kwargs: dict[str, Any] | None = None, **options: Any
    ) -> Result:
        """The async twin of ``enqueue_with`` (``client``: a redis.asyncio client)."""
        client = options.pop("client", None)
        options.setdefault("expires", self.expires)
        return self._handle(
            await TaskQueue(self.group, client=client).aenqueue(
                self.name,
                args=args,
                kwargs=kwargs,
                queue=self.queue,
                max_retries=self.max_retries,
                **options,
            )
        )

    def enqueue_with(
        self, *, args: Any = (), kwargs: dict[str, Any] | None = None, **options: Any
    ) -> Result:
        """Enqueue with options of ``TaskQueue.enqueue`` (delay, dedup_key, on_commit,
        expires, client).

        Return its Result, the task id (for a duplicate, that of the task already queued).
        """
        client = options.pop("client", None)
        options.setdefault("expires", self.expires)
        return self._handle(
            TaskQueue(self.group, client=client).enqueue(
                self.name,
                args=args,
                kwargs=kwargs,
                queue=self.queue,
                max_retries=self.max_retries,
                **options,
            )
        )

    def _handle(self, result: Result) -> Result:
        # A task that keeps no result gets a handle that says so rather than wait.
        return result if self.result else Result(result, result.queue, keep=False)


def task(
    name: str | None = None,
    *,
    queue: str = "default",
    group: str | None = None,
    max_retries: int | None = None,
    soft_time_limit: float | None = None,
    time_limit: float | None = None,
    result: bool = True,
    expires: float | None = None,
    concurrency: int | None = None,
    rate_limit: str | None = None,
) -> Callable[[Callable[..., Any]], Task]:
    """Register the decorated function (plain or ``async def``) as a task; return its ``Task``.

    ``name`` defaults to ``module.qualname``; ``max_retries`` to
    REDISPARTS["QUEUE_MAX_RETRIES"]; ``group`` to REDISPARTS["QUEUE_GROUP"].
    ``soft_time_limit`` / ``time_limit``: seconds, overriding the worker's defaults
    (see ``pool.py``). ``result=False``: fire and forget, no result is recorded.
    ``expires``: seconds after each enqueue past which a run not started is dropped
    (recorded EXPIRED); an enqueue's own ``expires=`` wins. Registering another function
    under a taken name raises InvalidTask.
    ``concurrency``: at most that many runs of the task at once across every worker of
    its group (a permit per run in flight, returned when it ends or is reaped).
    ``rate_limit``: "<count>/<s|m|h>", at most that many runs started in any second,
    minute or hour across every worker of its group. Runs over a limit wait in the
    task's own queue (``limited_queue``), which the workers of ``queue`` serve just
    before it.
    """
    validate_key_part(queue, "queue")
    if group is not None:
        validate_key_part(group, "queue group")
    if max_retries is not None:
        check_count(max_retries, "max_retries")
    soft_time_limit = check_limit(soft_time_limit, "soft_time_limit")
    time_limit = check_limit(time_limit, "time_limit")
    if not isinstance(result, bool):
        raise InvalidTask(f"result must be True or False, got {result!r}")
    if expires is not None:
        if not isinstance(expires, int | float) or isinstance(expires, bool):
            raise InvalidTask(f"@task expires must be seconds > 0, got {expires!r}")
        check_expires(expires)
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise InvalidTask(f"concurrency must be None or a whole number ≥ 1, got {concurrency!r}")
    if rate_limit is not None:
        parse_rate(rate_limit)

    def register(func: Callable[..., Any]) -> Task:
        task_name = validate_task_name(name or f"{func.__module__}.{func.__qualname__}")
        existing = _registry.get(task_name)
        if existing is not None and _path(existing.func) != _path(func):
            raise InvalidTask(
                f"task name {task_name!r} is already registered for {_path(existing.func)}"
            )
        if concurrency is not None or rate_limit is not None:
            validate_key_part(limited_queue(task_name), "queue of a limited task")
        registered = Task(
            func, task_name, queue, group, max_retries, soft_time_limit, time_limit,
            result, None if expires is None else float(expires), concurrency, rate_limit,
        )  # fmt: skip
        _registry[task_name] = registered
        queue_module._names.clear()  # an enqueue may have found the name unregistered
        return registered

    return register


def get_task(name: str) -> Task | None:
    """Return the task registered under ``name``, or None."""
    return _registry.get(name)


def limited_queues(queues: Sequence[str]) -> tuple[list[str], dict[str, Limit]]:
    """The queues a worker of ``queues`` claims from, each registered task with limits
    served by ``queue`` having its limited queue just before it, and limited queue ->
    its ``Limit`` (a limited queue named in ``queues`` keeps its limits too)."""
    limits = {
        limited_queue(name): limit
        for name, registered in sorted(_registry.items())
        if (registered.queue in queues or limited_queue(name) in queues)
        and (limit := registered.limit) is not None
    }
    if not limits:
        return list(queues), {}
    served: list[str] = []
    for queue in queues:
        served += [
            limited_queue(name)
            for name, registered in sorted(_registry.items())
            if registered.limited and registered.queue == queue
            and limited_queue(name) not in queues
        ]  # fmt: skip
        served.append(queue)
    return served, limits


def registered_names() -> list[str]:
    """Return the registered task names, sorted."""
    return sorted(_registry)


_RATE_RE = re.compile(r"^([1-9][0-9]*)/([smh])$")
_WINDOWS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_rate(text: object) -> tuple[int, float]:
    """Return (runs, window in seconds) of a rate limit such as "100/m"; else raise."""
    found = _RATE_RE.match(text) if isinstance(text, str) else None
    if found is None:
        raise InvalidTask(
            f'rate_limit must be "<count>/s", "/m" or "/h" (e.g. "100/m"), got {text!r}'
        )
    return int(found[1]), _WINDOWS[found[2]]


def check_limit(value: object, what: str) -> float | None:
    """Return a time limit: None, or a finite number of seconds > 0; else raise InvalidTask."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value < float("inf")
    ):
        raise InvalidTask(f"{what} must be None or a number of seconds > 0, got {value!r}")
    return float(value)


def _path(func: Callable[..., Any]) -> str:
    return f"{func.__module__}.{func.__qualname__}"
