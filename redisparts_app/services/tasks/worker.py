"""``Worker`` runs tasks from several queues in priority order; ``Scheduler`` moves due
delayed tasks and reaps expired leases.

Delivery is at least once: tasks move from their queue to the group's in-flight
set in one atomic step (a Lua script over queues of one hash tag), under a lease
the worker extends from a heartbeat thread until it records them. A worker claims
a batch of ready tasks in that one step: as many as its recent tasks suggest it
runs in ``batch_window`` seconds, at most ``batch`` (one at a time until a task
has run, and for tasks slower than the window); done tasks are acknowledged
together after the batch, retries and failures at once. A task delivered before
(its worker died, or a retry) is always claimed alone. When a worker dies, the
reaper (in every worker every ``maintenance_interval`` seconds, and in the
scheduler at each lease deadline) puts its tasks back at the head of their queue;
a task delivered QUEUE_MAX_DELIVERIES times whose worker died each time goes to
quarantine instead of looping. A task that raises is retried after
QUEUE_RETRY_DELAY · 2^(retry - 1) seconds (capped at QUEUE_RETRY_MAX_DELAY) up
to its ``max_retries``, then lands in the failed registry with its error and
traceback. A task may therefore run more than once (its worker died after the
work but before recording it, or its lease expired while it still ran): write
tasks to be idempotent.

Idle workers block on a wake-up list (BLPOP, at most ``block`` seconds), never
busy-poll; the scheduler blocks until the next due time or lease deadline (at
most ``max_wait`` seconds) and is woken early by an enqueue with a delay.
SIGTERM/SIGINT finish the current task, then stop and put the batch's unstarted
tasks back at the head of their queues; a second signal exits at once (the tasks
come back through the reaper). When Redis is unreachable both log it, back off
exponentially (0.5 s doubling to 30 s) and resume; a worker keeps retrying to
record the outcomes of the tasks it just ran until Redis is back.
"""

import logging
import os
import signal
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis
from django.utils.module_loading import import_string

from ...conf import app_settings
from ...exceptions import InvalidTask
from ...keys import validate_key_part
from .queue import BATCH, TaskQueue, validate_seconds
from .registry import get_task

logger = logging.getLogger("redisparts.tasks")

# Runners for task kinds other than registered @task callables.
KIND_RUNNERS = {"django": "redisparts_app.tasks_backend.run_task"}


class UnknownTask(Exception):
    """The worker has no task registered under the task's name."""


class Backoff:
    """Exponential back-off delays: ``first`` seconds doubling up to ``most``."""

    def __init__(self, first: float = 0.5, most: float = 30.0) -> None:
        self.first, self.most, self.failures = first, most, 0

    def next(self) -> float:
        self.failures += 1
        return min(self.most, self.first * 2 ** (self.failures - 1))

    def reset(self) -> None:
        self.failures = 0


class _Stoppable:
    """A stop flag set by SIGTERM/SIGINT while ``signals()`` is active."""

    def __init__(self) -> None:
        self._stop = threading.Event()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """Ask the loop to stop after the current step."""
        self._stop.set()

    @contextmanager
    def signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._stop.is_set():
            logger.warning("second %s: exiting now", signal.Signals(signum).name)
            raise SystemExit(1)
        logger.info("%s: stopping after the current step", signal.Signals(signum).name)
        self._stop.set()

    def _guarded(self, backoff: Backoff, step: Callable[[], Any]) -> Any:
        """Run ``step``; on a connection error log, wait the back-off delay and return None."""
        try:
            result = step()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            delay = backoff.next()
            logger.warning("Redis unreachable (%s); retrying in %.1fs", exc, delay)
            self._stop.wait(delay)
            return None
        backoff.reset()
        return result


class Worker(_Stoppable):
    """Run tasks from ``queues`` (highest priority first) of one group.

    ``batch``: the most tasks claimed at once (1: one at a time, up to 500); ``batch_window``:
    the seconds of work a claim aims at, judged from the recent tasks' run times.
    """

    def __init__(
        self,
        queues: Sequence[str],
        *,
        group: str | None = None,
        client: Any = None,
        lease: float | None = None,
        block: float = 1.0,
        maintenance_interval: float = 2.0,
        max_deliveries: int | None = None,
        worker_id: str | None = None,
        batch: int = 100,
        batch_window: float = 0.05,
    ) -> None:
        super().__init__()
        if isinstance(queues, str) or not queues:
            raise InvalidTask("a worker needs a non-empty list of queue names")
        self.queues = [validate_key_part(queue, "queue") for queue in queues]
        if len(set(self.queues)) != len(self.queues):
            raise InvalidTask(f"queue names repeat: {self.queues}")
        self.queue = TaskQueue(group, client=client)
        self.lease = validate_seconds(
            app_settings.QUEUE_LEASE if lease is None else lease, "lease", allow_zero=False
        )
        self.block = validate_seconds(block, "block", allow_zero=False)
        self.maintenance_interval = validate_seconds(
            maintenance_interval, "maintenance_interval", allow_zero=False
        )
        self.max_deliveries = max_deliveries
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= BATCH:
            raise InvalidTask(f"batch must be a whole number from 1 to {BATCH}, got {batch!r}")
        self.batch = batch
        self.batch_window = validate_seconds(batch_window, "batch_window")
        # Recent seconds per task (moving average); None until a task has run.
        self._task_seconds: float | None = None
        self.worker_id = worker_id or (
            f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        )
        # Called with the outcome (done, retry, fail, lost) after each task.
        self.on_finished: Callable[[str], None] | None = None
        self._next_maintenance = 0.0
        # Ids of the tasks this worker holds (claimed, not recorded): the heartbeat's work.
        self._held: set[str] = set()
        self._beating = False

    def run(self, *, burst: bool = False, max_tasks: int | None = None) -> int:
        """Run tasks until stopped; return how many were run.

        ``burst``: stop once every queue is empty. ``max_tasks``: stop after that many.
        """
        backoff = Backoff()
        done = 0
        logger.info("worker %s listening on %s", self.worker_id, ", ".join(self.queues))
        with self.signals(), self._heartbeat():
            while not self.stopping and (max_tasks is None or done < max_tasks):
                wanted = self._batch_size(None if max_tasks is None else max_tasks - done)
                jobs = self._guarded(backoff, lambda n=wanted: self._next_jobs(n))
                if not jobs:
                    if burst and backoff.failures == 0:
                        break
                    if backoff.failures == 0:
                        self._guarded(backoff, lambda: self.queue.wait_for_work(self._idle()))
                    continue
                done += len(self.perform_all(jobs))
        logger.info("worker %s stopped after %d task(s)", self.worker_id, done)
        return done

    def _batch_size(self, left: int | None) -> int:
        """How many tasks to claim: those the recent ones suggest run in ``batch_window``.

        One at a time until a task has run, and for tasks slower than the window, so slow
        tasks spread over workers and a claimed task never waits long for its turn.
        """
        size = 1
        if self._task_seconds is not None:
            size = int(self.batch_window / max(self._task_seconds, 1e-6))
        size = max(1, min(self.batch, size))
        return size if left is None else min(size, left)

    def _next_jobs(self, count: int) -> list[tuple[dict[str, Any], int]]:
        if time.monotonic() >= self._next_maintenance:
            self.maintain()
        return self.queue.claim(self.queues, self.worker_id, self.lease, count)

    def _idle(self) -> float:
        return max(0.01, min(self.block, self._next_maintenance - time.monotonic()))

    def maintain(self) -> None:
        """Reap expired leases and move due delayed tasks (the scheduler's job, as a backstop)."""
        self._next_maintenance = time.monotonic() + self.maintenance_interval
        requeued, quarantined, _ = self.queue.reap(self.max_deliveries)
        if requeued or quarantined:
            logger.warning("reaped %d task(s), quarantined %d", requeued, quarantined)
        self.queue.schedule()

    def perform_all(self, jobs: Sequence[tuple[dict[str, Any], int]]) -> list[str]:
        """Run claimed tasks in turn and record their outcomes; return those of the tasks run.

        Done tasks are acknowledged together at the end (one round trip), retries and
        failures at once. When the worker is asked to stop, the tasks not yet started go
        back to the head of their queues for another worker.
        """
        if not self._beating:  # called outside run(): a heartbeat for these tasks only
            with self._heartbeat():
                return self.perform_all(jobs)
        held = self._held
        held.update(record["id"] for record, _ in jobs)
        outcomes: dict[str, str] = {}  # task id -> outcome, in the order run
        started = 0
        try:
            for record, deliveries in jobs:
                if self.stopping and started:  # the first one is the current task
                    break
                started += 1
                clock = time.perf_counter()
                outcome, payload, delay = self._execute(record)
                self._time_task(time.perf_counter() - clock)
                if outcome != "done":
                    held.discard(record["id"])
                    outcome = self._record(record, deliveries, outcome, payload, delay)
                    self._report(outcome)
                outcomes[record["id"]] = outcome
        finally:
            # Out of the heartbeat's hands first, so it never sees them acknowledged.
            held.difference_update(record["id"] for record, _ in jobs)
            finished = [task_id for task_id, outcome in outcomes.items() if outcome == "done"]
            lost = self._acknowledge(finished)
            self._release([record for record, _ in jobs[started:]])
        for task_id in finished:
            if task_id in lost:
                logger.warning("task %s: lease lost before recording done", task_id)
                outcomes[task_id] = "lost"
            self._report(outcomes[task_id])
        return list(outcomes.values())

    @contextmanager
    def _heartbeat(self) -> Iterator[None]:
        """Extend the leases of the held tasks from a thread while inside this block."""
        heartbeat = _Heartbeat(self.queue, self._held, self.worker_id, self.lease)
        heartbeat.start()
        self._beating = True
        try:
            yield
        finally:
            self._beating = False
            heartbeat.stop()

    def _time_task(self, seconds: float) -> None:
        previous = self._task_seconds
        self._task_seconds = seconds if previous is None else 0.8 * previous + 0.2 * seconds

    def _execute(self, record: dict[str, Any]) -> tuple[str, dict[str, Any] | None, float]:
        """Run a task; return its outcome (done, retry or fail), payload and retry delay."""
        try:
            self._call(record)
        except UnknownTask:
            name = record["name"]
            return "fail", _error(f"unknown task name {name!r}: not registered in this worker"), 0.0
        except Exception as exc:
            return self._failure(record, exc)
        return "done", None, 0.0

    def _record(
        self,
        record: dict[str, Any],
        deliveries: int,
        outcome: str,
        payload: dict[str, Any] | None,
        delay: float,
    ) -> str:
        task_id, name = record["id"], record["name"]
        if not self._settle(task_id, outcome, payload, delay):
            logger.warning("task %s (%s): lease lost before recording %s", task_id, name, outcome)
            return "lost"
        logger.warning("task %s (%s) delivery %d: %s", task_id, name, deliveries, outcome)
        return outcome

    def _report(self, outcome: str) -> None:
        if self.on_finished is not None:
            self.on_finished(outcome)

    def _call(self, record: dict[str, Any]) -> None:
        kind = record.get("kind", "task")
        if kind != "task":
            runner = import_string(KIND_RUNNERS[kind])
            runner(record, self.worker_id, self.queue)
            return
        registered = get_task(record["name"])
        if registered is None:
            raise UnknownTask(record["name"])
        registered.func(*record["args"], **record["kwargs"])

    def _failure(self, record: dict[str, Any], exc: Exception) -> tuple[str, dict[str, Any], float]:
        error = _error(f"{type(exc).__name__}: {exc}", traceback.format_exc())
        if record.get("retries", 0) >= record.get("max_retries", 0):
            return "fail", error, 0.0
        retries = record.get("retries", 0) + 1
        delay = min(
            float(app_settings.QUEUE_RETRY_MAX_DELAY),
            float(app_settings.QUEUE_RETRY_DELAY) * 2 ** (retries - 1),
        )
        ready_at = time.time() + delay
        update = {"retries": retries, "last_error": error["reason"], "ready_at": ready_at}
        return "retry", {**record, **update}, delay

    def _settle(
        self, task_id: str, outcome: str, payload: dict[str, Any] | None, delay: float
    ) -> bool:
        settled = self._until_recorded(
            lambda: self.queue.settle(task_id, self.worker_id, outcome, payload, delay),
            f"task {task_id}",
        )
        return bool(settled)

    def _acknowledge(self, task_ids: list[str]) -> set[str]:
        """Record tasks as done; return the ids whose lease was lost (or all, if stopping
        while Redis is away: they run again, at least once)."""
        if not task_ids:
            return set()
        lost = self._until_recorded(
            lambda: self.queue.acknowledge(task_ids, self.worker_id), f"{len(task_ids)} task(s)"
        )
        return set(task_ids if lost is None else lost)

    def _release(self, records: list[dict[str, Any]]) -> None:
        if records:  # if Redis is away, the reaper puts them back once their lease ends
            self._until_recorded(
                lambda: self.queue.release(records, self.worker_id), "unstarted tasks"
            )

    def _until_recorded(self, step: Callable[[], Any], what: str) -> Any:
        """Run ``step``, retrying while Redis is unreachable; None if asked to stop meanwhile.

        The work is done: keep trying to record it while Redis is away, unless stopping
        (then the lease expires and the task runs again: at least once).
        """
        backoff = Backoff()
        while True:
            try:
                return step()
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                if self.stopping:
                    return None
                wait = backoff.next()
                logger.warning(
                    "Redis unreachable recording %s (%s); retrying in %.1fs", what, exc, wait
                )
                self._stop.wait(wait)


class Scheduler(_Stoppable):
    """Move due delayed tasks of one group to their queues and reap expired leases.

    Several schedulers may run at once: each move is one script (ZRANGEBYSCORE,
    ZREM, RPUSH), so every task is enqueued exactly once.
    """

    def __init__(
        self,
        group: str | None = None,
        *,
        client: Any = None,
        max_wait: float = 1.0,
        reap: bool = True,
        max_deliveries: int | None = None,
    ) -> None:
        super().__init__()
        self.queue = TaskQueue(group, client=client)
        self.max_wait = validate_seconds(max_wait, "max_wait", allow_zero=False)
        self.reap = reap
        self.max_deliveries = max_deliveries
        self.moved = self.requeued = self.quarantined = 0

    def run_once(self) -> float:
        """Do one pass; return the seconds to wait before the next one."""
        moved, next_due = self.queue.schedule()
        self.moved += moved
        waits = [self.max_wait]
        if next_due is not None:
            waits.append(next_due)
        if self.reap:
            requeued, quarantined, next_deadline = self.queue.reap(self.max_deliveries)
            self.requeued += requeued
            self.quarantined += quarantined
            if next_deadline is not None:
                waits.append(next_deadline)
            if requeued or quarantined:
                logger.warning("reaped %d task(s), quarantined %d", requeued, quarantined)
        if moved >= BATCH:
            return 0.0
        # A due task whose queue is not yet known would otherwise spin the loop.
        return max(0.05, min(waits))

    def run(self, *, burst: bool = False) -> int:
        """Run until stopped (``burst``: one pass); return how many tasks were moved."""
        backoff = Backoff()
        with self.signals():
            while not self.stopping:
                wait = self._guarded(backoff, self.run_once)
                if burst:
                    break
                if wait:
                    self._guarded(backoff, lambda w=wait: self.queue.wait_for_schedule(w))
        return self.moved


class _Heartbeat(threading.Thread):
    """Extend the leases of the tasks a worker holds every third of the lease.

    ``held`` is the worker's set of the ids of the tasks it holds, kept up to date by the
    worker: ids it has settled or is about to acknowledge are no longer in it.
    """

    def __init__(self, queue: TaskQueue, held: set[str], worker_id: str, lease: float) -> None:
        super().__init__(daemon=True, name=f"heartbeat-{worker_id}")
        self.queue, self.held, self.worker_id, self.lease = queue, held, worker_id, lease
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.lease / 3):
            task_ids = list(self.held)
            if not task_ids:
                continue
            try:
                lost = self.queue.extend_all(task_ids, self.worker_id, self.lease)
            except redis.RedisError as exc:
                logger.warning("cannot extend the lease of %d task(s) (%s)", len(task_ids), exc)
                continue
            for task_id in lost:
                if task_id in self.held:  # still the worker's: really lost
                    logger.warning("task %s: lease lost while running", task_id)
                    self.held.discard(task_id)

    def stop(self) -> None:
        self._done.set()
        self.join()


def _error(reason: str, trace: str = "") -> dict[str, Any]:
    return {"reason": reason, "traceback": trace, "at": time.time()}
