"""A backend for Django's Tasks API (``django.tasks`` on Django 6, the ``django-tasks``
backport on 5.2) that runs tasks through redisparts' task queues::

    TASKS = {
        "default": {
            "BACKEND": "redisparts_app.tasks_backend.RedisTaskBackend",
            "QUEUES": ["default", "email"],
            "OPTIONS": {"GROUP": "default", "CONNECTION": "default", "ENQUEUE_ON_COMMIT": True},
        }
    }

A ``@task`` function's ``queue_name`` is the redisparts queue; ``rp_worker`` listening on it
runs it (``run_after``: the delayed set; a priority above the default: the head of its
queue). Keys: the queue's own, and the result in ``<prefix>:queue:{<group>}:result:<id>``
(JSON, for ``QUEUE_RESULT_TTL`` seconds after its last update), read with ``get_result(id)``
from any process. Guarantee: the finished result is written by the worker's acknowledgement,
in the same script; a task that raises is FAILED, not retried, and listed in the failed
registry. With ``ENQUEUE_ON_COMMIT`` an enqueue inside a transaction happens when it commits.
Semantics in docs/components/tasks.md.
"""

import json
import traceback
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from .connection import get_redis
from .services.tasks import TaskQueue
from .services.tasks.queue import new_task_id
from .services.tasks.results import ttl_ms

__all__ = [
    "RedisTaskBackend",
]

try:  # Django 6 ships the API; Django 5.2 uses the backport.
    from django.tasks.backends.base import BaseTaskBackend  # type: ignore[import-untyped]
    from django.tasks.base import (  # type: ignore[import-untyped]
        DEFAULT_TASK_PRIORITY,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django.tasks.exceptions import TaskResultDoesNotExist  # type: ignore[import-untyped]
    from django.tasks.signals import task_enqueued, task_finished, task_started  # type: ignore[import-untyped]
except ImportError:
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import (
        DEFAULT_TASK_PRIORITY,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started

_DATES = ("enqueued_at", "started_at", "finished_at", "last_attempted_at")


class RedisTaskBackend(BaseTaskBackend):
    """Enqueue Django tasks on redisparts queues; results in Redis with a TTL."""

    supports_defer = True
    supports_get_result = True
    supports_priority = True
    supports_async_task = True

    def __init__(self, alias: str, params: dict) -> None:
        super().__init__(alias, params)
        self.group = self.options.get("GROUP")
        self.connection = self.options.get("CONNECTION")
        self.enqueue_on_commit = bool(self.options.get("ENQUEUE_ON_COMMIT", True))

    def task_queue(self) -> TaskQueue:
        return TaskQueue(self.group, client=get_redis(self.connection))

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> TaskResult:
        self.validate_task(task)
        queue = self.task_queue()
        # Check names and arguments now, before anything is deferred or written.
        _, args, kwargs, _ = queue.validate(task.module_path, args, kwargs, task.queue_name)
        result = TaskResult(
            task=task,
            id=new_task_id(),
            status=TaskResultStatus.READY,
            enqueued_at=timezone.now(),
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        delay = 0.0
        if task.run_after is not None:
            delay = max(0.0, (task.run_after - timezone.now()).total_seconds())

        def push() -> None:
            # The result first: a worker that takes the task at once finds it.
            save_result(queue, result)
            queue._enqueue(
                task.module_path,
                result.args,
                result.kwargs,
                task.queue_name,
                delay=delay,
                max_retries=0,  # the Tasks API has no retries
                dedup_key=None,
                dedup_ttl=None,
                on_commit=False,  # handled here
                using=None,
                task_id=result.id,
                wait_replicas=None,
                wait_timeout=None,
                kind="django",
                front=task.priority > DEFAULT_TASK_PRIORITY,
            )
            task_enqueued.send(type(self), task_result=result)

        if self.enqueue_on_commit and transaction.get_connection().in_atomic_block:
            transaction.on_commit(push)
        else:
            push()
        return result

    def get_result(self, result_id: str) -> TaskResult:
        queue = self.task_queue()
        try:
            raw = queue.client.get(queue.result_key(result_id))
        except ValueError:  # not a possible id (InvalidKeyPart)
            raw = None
        if raw is None:
            raise TaskResultDoesNotExist(result_id)
        return load_result(json.loads(raw))


def save_result(queue: TaskQueue, result: TaskResult) -> None:
    """Store ``result`` as JSON under its id for QUEUE_RESULT_TTL seconds (a result not
    finished yet: a finished one is written by the worker's acknowledgement, with the
    token of its done list that the queue's ``Result.get()`` waits on)."""
    queue.client.set(queue.result_key(result.id), result_json(result), px=ttl_ms())


def result_json(result: TaskResult) -> str:
    """``result`` as the JSON the store keeps."""
    data = {
        "module_path": result.task.module_path,
        "queue_name": result.task.queue_name,
        "priority": result.task.priority,
        "id": result.id,
        "status": str(result.status),
        "args": result.args,
        "kwargs": result.kwargs,
        "backend": result.backend,
        "errors": [
            {"exception_class_path": e.exception_class_path, "traceback": e.traceback}
            for e in result.errors
        ],
        "worker_ids": result.worker_ids,
        "return_value": result._return_value,
    }
    for name in _DATES:
        value: datetime | None = getattr(result, name)
        data[name] = value.isoformat() if value else None
    return json.dumps(data)


def load_result(data: dict[str, Any]) -> TaskResult:
    """Rebuild a TaskResult from ``save_result``'s JSON."""
    task = import_string(data["module_path"]).using(
        queue_name=data["queue_name"], backend=data["backend"]
    )
    result = TaskResult(
        task=task,
        id=data["id"],
        status=TaskResultStatus(data["status"]),
        args=data["args"],
        kwargs=data["kwargs"],
        backend=data["backend"],
        errors=[TaskError(**error) for error in data["errors"]],
        worker_ids=data["worker_ids"],
        **{name: datetime.fromisoformat(data[name]) if data[name] else None for name in _DATES},
    )
    object.__setattr__(result, "_return_value", data["return_value"])
    return result


def run_task(
    record: dict[str, Any], worker_id: str, queue: TaskQueue
) -> tuple[str, Exception | None]:
    """Run a task enqueued through RedisTaskBackend (called by the worker).

    Record RUNNING; return the final result's JSON (SUCCESSFUL with the return value, or
    FAILED with the error) and the error, which the worker raises so the queue lists
    the task as failed. The worker writes that result with the task's acknowledgement,
    in one script, as it does an ``@task``'s: never a finished result of a task that will
    run again. ``task_finished`` is sent with the final result just before.
    """
    raw = queue.client.get(queue.result_key(record["id"]))
    if raw is None:  # expired while queued: start a fresh result under the same id
        task = import_string(record["name"])
        result = TaskResult(
            task=task.using(queue_name=record["queue"]),
            id=record["id"],
            status=TaskResultStatus.READY,
            enqueued_at=None,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=record["args"],
            kwargs=record["kwargs"],
            backend=task.backend,
            errors=[],
            worker_ids=[],
        )
    else:
        result = load_result(json.loads(raw))
    sender = type(result.task.get_backend())
    now = timezone.now()
    _set(result, status=TaskResultStatus.RUNNING, started_at=now, last_attempted_at=now)
    result.worker_ids.append(worker_id)
    save_result(queue, result)
    task_started.send(sender=sender, task_result=result)
    error: Exception | None = None
    try:
        if result.task.takes_context:
            value = result.task.call(TaskContext(task_result=result), *result.args, **result.kwargs)
        else:
            value = result.task.call(*result.args, **result.kwargs)
        # Store what a reader gets back; a value JSON cannot hold fails the task.
        value = json.loads(json.dumps(value))
    except Exception as exc:
        error = exc
        result.errors.append(
            TaskError(
                exception_class_path=f"{type(exc).__module__}.{type(exc).__qualname__}",
                traceback="".join(traceback.format_exception(exc)),
            )
        )
        _set(result, status=TaskResultStatus.FAILED, finished_at=timezone.now())
    else:
        _set(result, status=TaskResultStatus.SUCCESSFUL, finished_at=timezone.now())
        object.__setattr__(result, "_return_value", value)
    task_finished.send(sender=sender, task_result=result)
    return result_json(result), error


def _set(result: TaskResult, **changes: Any) -> None:
    # TaskResult is a frozen dataclass; backends update it in place like this.
    for name, value in changes.items():
        object.__setattr__(result, name, value)
