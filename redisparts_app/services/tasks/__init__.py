"""Task queues: named FIFO queues of JSON tasks, priority, delayed tasks, retries,
a failed registry and quarantine, with at-least-once delivery.

    from redisparts_app.services.tasks import task

    @task(name="shop.send_sold_email", queue="email", max_retries=5)
    def send_sold_email(seller_id, item, price, buyer_id): ...

    send_sold_email.enqueue(7, "sword", 120, 9)       # on commit inside a transaction
    send_sold_email.enqueue_in(30, 7, "sword", 120, 9)  # due in 30 s
    await send_sold_email.aenqueue(7, "sword", 120, 9)  # on asyncio: pushed at once
    send_sold_email.enqueue(7, "sword", 120, 9).get(timeout=10)  # a Result; see results.py
    cancel(task_id)  # Cancel.CANCELLED: it never runs; ABORTING: see aborted()

Run ``manage.py rp_worker email default`` (queues in priority order; ``--concurrency``,
``--pool``, ``--time-limit``) and ``manage.py rp_scheduler``. ``TaskQueue`` (queue.py)
holds the keys and the operations, including the admin's listing, requeue and delete;
``Worker`` and ``Scheduler`` (worker.py) the loops and their guarantees; ``@periodic``
schedules (cron or intervals, fired by the scheduler) are in schedules.py; the pools,
time limits and how one task runs are in pool.py.
"""

from typing import Any

from .queue import Limit, TaskInfo, TaskQueue, queue_groups
from .registry import Task, get_task, limited_queues, registered_names, task
from .results import Cancel, Progress, Result, ResultInfo, aborted, aprogress, progress
from .schedules import periodic
from .worker import Scheduler, Worker

__all__ = [
    "Cancel",
    "Limit",
    "Progress",
    "Result",
    "ResultInfo",
    "Scheduler",
    "Task",
    "TaskInfo",
    "TaskQueue",
    "Worker",
    "aborted",
    "acancel",
    "aenqueue",
    "aprogress",
    "cancel",
    "enqueue",
    "get_task",
    "limited_queues",
    "periodic",
    "progress",
    "queue_groups",
    "registered_names",
    "task",
]


def enqueue(name: str, *, group: str | None = None, client: Any = None, **options: Any) -> Result:
    """Enqueue a run of the task ``name`` in ``group``; ``options`` as ``TaskQueue.enqueue``."""
    return TaskQueue(group, client=client).enqueue(name, **options)


async def aenqueue(
    name: str, *, group: str | None = None, client: Any = None, **options: Any
) -> Result:
    """The async twin of ``enqueue`` (``TaskQueue.aenqueue``: pushed at once)."""
    return await TaskQueue(group, client=client).aenqueue(name, **options)


def cancel(task_id: str, *, group: str | None = None, client: Any = None) -> Cancel:
    """Cancel the task ``task_id`` of ``group`` (``TaskQueue.cancel``); return a ``Cancel``."""
    return TaskQueue(group, client=client).cancel(task_id)


async def acancel(task_id: str, *, group: str | None = None, client: Any = None) -> Cancel:
    """The async twin of ``cancel``."""
    return await TaskQueue(group, client=client).acancel(task_id)
