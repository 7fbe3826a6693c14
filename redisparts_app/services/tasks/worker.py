"""``Worker`` runs tasks from several queues in priority order; ``Scheduler`` moves due
delayed tasks, reaps the tasks of expired leases and dead workers, and fires schedules.

Import: ``from redisparts_app.services.tasks import Scheduler, Worker``.

Guarantee: at least once, each task acknowledged as it ends. One script records the
task that just ended (with its result) and moves the next ready ones in flight under
the worker's lease; a worker claims no more than its free slots (plus ``prefetch``), so
a SIGKILL re-runs at most ``concurrency`` tasks. A worker silent for
QUEUE_WORKER_TIMEOUT seconds has its tasks put back by the reaper (within about five
seconds of its death with the defaults); a task whose worker died on each of its
QUEUE_MAX_DELIVERIES deliveries goes to quarantine. Write tasks to be idempotent.

Idle workers block on a wake-up list (BLPOP) and never poll; the scheduler blocks until
the next due time. SIGTERM/SIGINT stop claiming, let running tasks finish and put the
prefetched ones back; with Redis unreachable both back off (0.5 s doubling to 30 s)
and resume. Pools and time limits: ``pool.py``.
"""

import collections
import functools
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis

from ...conf import app_settings
from ...connection import slot_is_moving
from ...exceptions import InvalidArgument, InvalidTask
from ...keys import validate_key_part
from . import schedules
from .pool import POOLS, Outcome, Pool
from .queue import BATCH, Limit, TaskQueue, validate_seconds
from .registry import check_limit, limited_queues

__all__ = [
    "Backoff",
    "Scheduler",
    "Worker",
]

logger = logging.getLogger("redisparts.tasks")
# Seconds a BLPOP may time out late (the server checks timeouts every 1/hz s; hz is 10
# by default), so a scheduler sleeps the last stretch before a slot itself.
BLOCK_PRECISION = 0.12


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
        """Run ``step``; when Redis is unreachable or the slot is being moved (a Cluster
        resharding), log, wait the back-off delay and return None."""
        try:
            result = step()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            delay = backoff.next()
            logger.warning("Redis unreachable (%s); retrying in %.1fs", exc, delay)
            self._stop.wait(delay)
            return None
        except redis.RedisError as exc:
            if not slot_is_moving(exc):
                raise
            delay = min(backoff.next(), 0.5)  # a slot moves in milliseconds
            logger.warning("a slot is being moved (%s); retrying in %.1fs", exc, delay)
            self._stop.wait(delay)
            return None
        backoff.reset()
        return result


class Worker(_Stoppable):
    """Run tasks from ``queues`` (highest priority first) of one group.

    ``concurrency``: tasks run at once, in a ``pool``: "solo" (this thread, one task),
    "threads" or "prefork" (child processes; see pool.py). ``prefetch``: tasks claimed
    beyond the free slots, ready for the next free one (0 by default: a worker never
    holds a task it has not started while another worker idles). ``soft_time_limit`` /
    ``time_limit``: default limits in seconds (default QUEUE_SOFT_TIME_LIMIT /
    QUEUE_TIME_LIMIT); a task's own win.
    """

    def __init__(
        self,
        queues: Sequence[str],
        *,
        group: str | None = None,
        client: Any = None,
        lease: float | None = None,
        block: float = 1.0,
        maintenance_interval: float = 1.0,
        max_deliveries: int | None = None,
        worker_id: str | None = None,
        concurrency: int = 1,
        pool: str = "solo",
        prefetch: int = 0,
        soft_time_limit: float | None = None,
        time_limit: float | None = None,
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
        if pool not in POOLS:
            raise InvalidTask(f"pool must be one of {', '.join(POOLS)}, got {pool!r}")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise InvalidTask(f"concurrency must be a whole number ≥ 1, got {concurrency!r}")
        if pool == "solo" and concurrency != 1:
            raise InvalidTask("the solo pool runs one task at a time: use threads or prefork")
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise InvalidTask(f"prefetch must be a whole number ≥ 0, got {prefetch!r}")
        if prefetch > BATCH:
            raise InvalidTask(f"prefetch must be at most {BATCH}, got {prefetch}")
        self.concurrency, self.pool_name, self.prefetch = concurrency, pool, prefetch
        if soft_time_limit is None:
            soft_time_limit = app_settings.QUEUE_SOFT_TIME_LIMIT
        if time_limit is None:
            time_limit = app_settings.QUEUE_TIME_LIMIT
        self.soft_time_limit = check_limit(soft_time_limit, "soft_time_limit")
        self.time_limit = check_limit(time_limit, "time_limit")
        self.worker_id = worker_id or (
            f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        )
        # Called with the outcome (done, retry, fail, lost) after each task.
        self.on_finished: Callable[[str], None] | None = None
        self._next_maintenance = 0.0
        # Ids of the tasks this worker holds (claimed, not recorded): the heartbeat's work.
        self._held: set[str] = set()
        # Task id -> its delivery count, for the log line of a retry or failure.
        self._deliveries: dict[str, int] = {}
        self._pool: Pool | None = None
        # Done task id -> its result JSON, until recorded with the task's acknowledgement.
        self._results: dict[str, str] = {}
        # The queues claimed from and the limited ones' permits (``limited_queues``).
        self._served: list[str] = list(self.queues)
        self._limits: dict[str, Limit] = {}

    def run(self, *, burst: bool = False, max_tasks: int | None = None) -> int:
        """Run tasks until stopped; return how many ended.

        ``burst``: stop once every queue is empty. ``max_tasks``: stop after that many.
        Each task is recorded as soon as it ends: a done task in the same call that
        claims the next one. A worker killed with SIGKILL re-runs at most
        ``concurrency`` tasks (running, or ended and not yet recorded); they and its
        unstarted prefetched tasks go to other workers within QUEUE_WORKER_TIMEOUT
        seconds plus a reaper pass.
        """
        backoff = Backoff()
        claimed = ended = 0
        waiting: collections.deque[tuple[dict[str, Any], int]] = collections.deque()
        done: list[dict[str, Any]] = []
        pool = self._pool = POOLS[self.pool_name](
            self.concurrency, self.worker_id, self.queue, self.soft_time_limit, self.time_limit
        )
        # Each limited task's queue is served just before the queue it was registered on.
        self._served, self._limits = limited_queues(self.queues)
        logger.info("worker %s listening on %s", self.worker_id, ", ".join(self._served))
        empty = False
        wait = 0.0  # seconds the next claim first waits for a wake-up token
        with self.signals():  # before the pool forks: Ctrl-C is the worker's
            pool.start()
            try:
                with self._heartbeat():
                    while True:
                        left = None if max_tasks is None else max_tasks - claimed
                        wanted = 0 if self.stopping else pool.free() + self.prefetch - len(waiting)
                        if left is not None:
                            wanted = min(wanted, left)
                        if wanted > 0 or done:
                            result = self._guarded(
                                backoff, functools.partial(self._claim, max(0, wanted), done, wait)
                            )
                            wait = 0.0
                            if result is not None:
                                jobs, lost = result
                                self._report_done(done, lost)
                                ended += len(done)
                                done = []
                                claimed += len(jobs)
                                waiting.extend(jobs)
                                empty = wanted > 0 and not jobs
                        while waiting and pool.free() > 0 and not self.stopping:
                            record, deliveries = waiting.popleft()
                            self._deliveries[record["id"]] = deliveries
                            pool.submit(record)
                            if pool.runs_inline:  # ended already: record it before the next
                                break
                        # While some slots are busy, wait for one to end (looking for new work
                        # now and then while a slot is free); the solo pool has already ended.
                        timeout = 0.0
                        if pool.busy:
                            timeout = 0.05 if pool.free() > 0 and not self.stopping else self.block
                        for outcome in pool.wait(timeout):
                            self._held.discard(outcome.record["id"])
                            if "schedule" in outcome.record:
                                self._record_periodic(outcome)
                            if outcome.outcome == "done":
                                done.append(outcome.record)
                                if outcome.result is not None:
                                    self._results[outcome.record["id"]] = outcome.result
                            else:
                                ended += 1
                                self._report(self._record(outcome))
                        if pool.busy or done:
                            continue
                        if self.stopping or (left is not None and left <= 0):
                            break
                        if burst and empty and backoff.failures == 0:
                            break
                        if empty and backoff.failures == 0 and not waiting:
                            wait = self._idle()  # the next claim waits for work first
                    if done:
                        lost = set(self._acknowledge(done))
                        self._report_done(done, lost)
                        ended += len(done)
                    self._release([record for record, _ in waiting])
                    if not self._held:
                        self._guarded(backoff, lambda: self.queue.retire(self.worker_id))
            finally:
                pool.close(kill=bool(pool.busy))
                self._pool = None
        logger.info("worker %s stopped after %d task(s)", self.worker_id, ended)
        return ended

    def _claim(
        self, count: int, done: list[dict[str, Any]], wait: float = 0.0
    ) -> tuple[list[tuple[dict[str, Any], int]], list[str]]:
        if time.monotonic() >= self._next_maintenance:
            self.maintain()
            if wait:  # it was cut short for the maintenance just done
                wait = self._idle()
        jobs, lost = self.queue.claim_next(
            self._served, self.worker_id, self.lease, count, done,
            wait=wait, results=self._results, limits=self._limits,
        )  # fmt: skip
        self._held.update(record["id"] for record, _ in jobs)
        # A task delivered again may have been cancelled while its last worker ran it:
        # not run again (such tasks are rare, and claimed alone).
        again = [record["id"] for record, deliveries in jobs if deliveries > 1]
        if again and self._pool is not None:
            for task_id in self.queue.marked(again):
                self._pool.abort(task_id)
        return jobs, lost

    def _idle(self) -> float:
        return max(0.01, min(self.block, self._next_maintenance - time.monotonic()))

    def maintain(self) -> None:
        """Reap expired leases and dead workers' tasks, move due delayed tasks (the
        scheduler's job, as a backstop)."""
        self._next_maintenance = time.monotonic() + self.maintenance_interval
        requeued, quarantined, _ = self.queue.reap(self.max_deliveries)
        if requeued or quarantined:
            logger.warning("reaped %d task(s), quarantined %d", requeued, quarantined)
        self.queue.schedule()

    @contextmanager
    def _heartbeat(self) -> Iterator[None]:
        """Beat (and extend the held tasks' leases) from a thread while inside this block."""
        heartbeat = _Heartbeat(self)
        self.queue.beat(self.worker_id, [], self.lease)  # known alive before the first claim
        heartbeat.start()
        try:
            yield
        finally:
            heartbeat.stop()

    def _report_done(self, done: list[dict[str, Any]], lost: Sequence[str] | set[str]) -> None:
        for record in done:
            self._deliveries.pop(record["id"], None)
            self._results.pop(record["id"], None)
            if record["id"] in lost:
                logger.warning("task %s: lease lost before recording done", record["id"])
                self._report("lost")
            else:
                self._report("done")

    def _record(self, outcome: Outcome) -> str:
        record = outcome.record
        task_id, name = record["id"], record["name"]
        deliveries = self._deliveries.pop(task_id, 1)
        settled = self._until_recorded(
            lambda: self.queue.settle(
                task_id,
                self.worker_id,
                outcome.outcome,
                outcome.payload,
                outcome.delay,
                dedup_key=record.get("dedup"),
                result=outcome.result,
                cancelled=outcome.cancelled,
            ),
            f"task {task_id}",
        )
        if not settled:
            logger.warning(
                "task %s (%s): lease lost before recording %s", task_id, name, outcome.outcome
            )
            return "lost"
        logger.warning("task %s (%s) delivery %d: %s", task_id, name, deliveries, outcome.outcome)
        return outcome.outcome

    def _record_periodic(self, outcome: Outcome) -> None:
        """Note a schedule's last run (what the admin shows); a failure only logs: the
        task's own outcome is recorded apart."""
        try:
            schedules.record_run(
                self.queue.client, self.queue.group, outcome.record, outcome.outcome,
                outcome.seconds,
            )  # fmt: skip
        except (redis.RedisError, InvalidArgument) as exc:  # Redis away, or a bad record
            logger.warning(
                "task %s: its schedule's last run not noted (%s)", outcome.record["id"], exc
            )

    def _report(self, outcome: str) -> None:
        if self.on_finished is not None:
            self.on_finished(outcome)

    def _acknowledge(self, records: list[dict[str, Any]]) -> list[str]:
        """Record tasks as done; return the ids whose lease was lost (or all, if stopping
        while Redis is away: they run again, at least once)."""
        ids = [record["id"] for record in records]
        lost = self._until_recorded(
            lambda: self.queue.acknowledge(
                ids, self.worker_id, records=records, results=self._results
            ),
            f"{len(ids)} task(s)",
        )
        return ids if lost is None else lost

    def _release(self, records: list[dict[str, Any]]) -> None:
        if records:  # if Redis is away, the reaper puts them back once the worker is dead
            self._held.difference_update(record["id"] for record in records)
            self._until_recorded(
                lambda: self.queue.release(records, self.worker_id), "unstarted tasks"
            )

    def _until_recorded(self, step: Callable[[], Any], what: str) -> Any:
        """Run ``step``, retrying while Redis is unreachable; None if asked to stop meanwhile.

        The work is done: keep trying to record it while Redis is away, unless stopping
        (then the task is reaped and runs again: at least once).
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
    """Move due delayed tasks of one group to their queues, fire its periodic schedules
    (schedules.py) and reap expired leases.

    Several schedulers may run at once: each move is one script (ZRANGEBYSCORE,
    ZREM, RPUSH), and so is each slot's claim and enqueue, so every task and slot is
    enqueued exactly once. ``clock``: seconds since the epoch for the schedules'
    slots (default: Redis server time; tests pass their own).
    """

    def __init__(
        self,
        group: str | None = None,
        *,
        client: Any = None,
        max_wait: float = 1.0,
        reap: bool = True,
        max_deliveries: int | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__()
        self.queue = TaskQueue(group, client=client)
        self.max_wait = validate_seconds(max_wait, "max_wait", allow_zero=False)
        self.reap = reap
        self.max_deliveries = max_deliveries
        self.clock = clock
        self.moved = self.requeued = self.quarantined = self.fired = 0
        self._slot_next = False  # whether the wait run_once returned ends at a slot

    def run_once(self) -> float:
        """Do one pass; return the seconds to wait before the next one."""
        moved, next_due = self.queue.schedule()
        self.moved += moved
        waits = [self.max_wait]
        if next_due is not None:
            waits.append(next_due)
        now = None if self.clock is None else self.clock()
        fired, next_slot = schedules.fire_due(self.queue.group, client=self.queue.client, now=now)
        self.fired += fired
        if next_slot is not None:
            waits.append(next_slot)
        if self.reap:
            requeued, quarantined, next_deadline = self.queue.reap(self.max_deliveries)
            self.requeued += requeued
            self.quarantined += quarantined
            if next_deadline is not None:
                waits.append(next_deadline)
            if requeued or quarantined:
                logger.warning("reaped %d task(s), quarantined %d", requeued, quarantined)
        self._slot_next = False
        if moved >= BATCH:
            return 0.0
        wait = min(waits)
        if wait == next_slot:
            self._slot_next = True
            return max(0.001, wait)
        # A due task whose queue is not yet known would otherwise spin the loop.
        return max(0.05, wait)

    def run(self, *, burst: bool = False) -> int:
        """Run until stopped (``burst``: one pass); return how many tasks were moved."""
        backoff = Backoff()
        with self.signals():
            while not self.stopping:
                wait = self._guarded(backoff, self.run_once)
                if burst:
                    break
                if wait and self._slot_next and wait <= BLOCK_PRECISION:
                    self._stop.wait(wait)  # a slot is waited for to the millisecond
                elif wait:
                    # A BLPOP times out up to 1/hz late (100 ms by default): the last stretch
                    # to a slot is slept here, after the next pass.
                    if self._slot_next:
                        wait -= BLOCK_PRECISION
                    self._guarded(backoff, functools.partial(self.queue.wait_for_schedule, wait))
        return self.moved


class _Heartbeat(threading.Thread):
    """Beat every QUEUE_HEARTBEAT seconds (every third of the lease if that is shorter):
    record the worker alive and extend the leases of the tasks it holds, except those
    past their hard time limit; pass the cancels of its tasks to the pool (which
    flags them, and ends those past their grace)."""

    def __init__(self, worker: Worker) -> None:
        super().__init__(daemon=True, name=f"heartbeat-{worker.worker_id}")
        self.worker = worker
        self.interval = min(float(app_settings.QUEUE_HEARTBEAT), worker.lease / 3)
        self._done = threading.Event()
        self._overdue_logged: set[str] = set()

    def run(self) -> None:
        worker = self.worker
        while not self._done.wait(self.interval):
            pool = worker._pool
            overdue = pool.overdue() if pool is not None else set()
            for task_id in overdue - self._overdue_logged:
                logger.error("task %s: past its hard time limit; its lease is not renewed", task_id)
            self._overdue_logged = overdue
            task_ids = [task_id for task_id in list(worker._held) if task_id not in overdue]
            try:
                lost, aborting = worker.queue.beat(worker.worker_id, task_ids, worker.lease)
            except redis.RedisError as exc:
                logger.warning("heartbeat failed (%s)", exc)
                continue
            if pool is not None:
                for task_id in aborting:
                    pool.abort(task_id)
                pool.end_aborted()
            for task_id in lost:
                if task_id in worker._held:  # still the worker's: really lost
                    logger.warning("task %s: lease lost while running", task_id)
                    worker._held.discard(task_id)

    def stop(self) -> None:
        self._done.set()
        self.join()
