"""Where a worker's tasks run: in the worker's own thread (``solo``), in threads
(``threads``) or in child processes (``prefork``), and how one task is run.

Import: ``Worker(pool=...)`` chooses one; ``run_task`` runs a task in any of them.

Every run sends ``task_started``/``task_finished`` (Django's ``close_old_connections``
is connected, as around a request), runs ``async def`` tasks on a loop of their own, and
turns an exception into a retry (QUEUE_RETRY_DELAY · 2^(retry - 1) s, capped at
QUEUE_RETRY_MAX_DELAY) or a failure with its traceback; a task past ``expires`` is not
run. The outcome carries the result JSON the worker records with the acknowledgement.

Time limits: the soft one raises ``SoftTimeLimitExceeded`` in the task; at the hard one
prefork kills the child (the task fails or retries with the reason), while solo and
threads stop renewing the lease, so the task goes back to the queue when it ends. A
cancel of a running task sets the flag ``aborted()`` reads; QUEUE_CANCEL_GRACE seconds
later the pool ends it as the hard limit does (``TaskAborted`` in solo and threads), and
it is recorded CANCELLED. A prefork child whose worker died exits within half a second.
"""

import asyncio
import concurrent.futures
import contextlib
import ctypes
import inspect
import json
import logging
import math
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from typing import Any

from django.db import close_old_connections, connections
from django.dispatch import Signal
from django.utils.module_loading import import_string

from ...conf import app_settings
from ...exceptions import SoftTimeLimitExceeded, TaskAborted
from . import results
from .registry import get_task

__all__ = [
    "POOLS",
    "Outcome",
    "Pool",
    "PreforkPool",
    "SoloPool",
    "ThreadPool",
    "run_task",
    "task_finished",
    "task_started",
]

logger = logging.getLogger("redisparts.tasks")

# Runners for task kinds other than registered @task callables.
KIND_RUNNERS = {"django": "redisparts_app.tasks_backend.run_task"}
# Sent around each task run, in the thread that runs it; ``record`` is the task record.
task_started = Signal(use_caching=True)
task_finished = Signal(use_caching=True)
task_started.connect(close_old_connections)
task_finished.connect(close_old_connections)

# How often a prefork child checks that its worker is still alive, in seconds.
ORPHAN_CHECK = 0.5


class UnknownTask(Exception):
    """The worker has no task registered under the task's name."""


@dataclass(frozen=True)
class Outcome:
    """How a run ended: ``done``, ``expired`` (not run), ``cancelled`` (aborted, or not
    started once a cancel marked it), ``retry`` (payload: the updated record, after
    ``delay`` seconds) or ``fail`` (payload: the error), how long it ran, and the result
    JSON to record with it (None: a retry, or no result kept); ``cancelled``: for a
    retry, the CANCELLED result to record instead if a cancel marked the task."""

    record: dict[str, Any]
    outcome: str
    payload: dict[str, Any] | None = None
    delay: float = 0.0
    seconds: float = 0.0
    result: str | None = None
    cancelled: str | None = None


def time_limits(record: dict[str, Any], soft: float | None, hard: float | None) -> tuple:
    """Return the (soft, hard) limits of a task: its @task's, else the worker's defaults."""
    registered = get_task(record["name"]) if record.get("kind", "task") == "task" else None
    if registered is not None:
        soft = registered.soft_time_limit if registered.soft_time_limit is not None else soft
        hard = registered.time_limit if registered.time_limit is not None else hard
    return soft, hard


def keeps_result(record: dict[str, Any]) -> bool:
    """Whether the worker records a result for this task: an @task's unless it says
    ``result=False`` (the Django Tasks backend keeps its own)."""
    if record.get("kind", "task") != "task":
        return False
    registered = get_task(record["name"])
    return registered is None or registered.result


def run_task(record: dict[str, Any], worker_id: str, queue: Any, abort: Any = None) -> Outcome:
    """Run one task record in this thread; never raises for the task's own errors.

    A task past its ``expires_at`` (host clock) is not run: its outcome is ``expired``.
    ``abort``: the task's abort flag (``is_set()``), already set for a task a cancel
    marked before it started, which is then not run.
    """
    keep = keeps_result(record)
    expires_at = record.get("expires_at")
    if expires_at is not None and (now := time.time()) >= expires_at:
        expired = results.encode(record, results.EXPIRED, worker_id, finished=now)
        return Outcome(record, "expired", result=expired if keep else None)
    start = time.perf_counter()
    run = results.Running(queue, record, worker_id, time.time(), keep, abort=abort)
    if run.aborted:
        return Outcome(record, "cancelled", result=cancelled_result(run, ran=False))
    task_started.send(sender=Outcome, record=record)
    try:
        with results.running(run):
            value = _call(run)
        # A value JSON cannot hold fails the task, as the Tasks backend's.
        value_json = _ENCODER.encode(value) if keep else "null"
    except UnknownTask:
        name = record["name"]
        error = _error(f"unknown task name {name!r}: not registered in this worker")
        outcome = Outcome(record, "fail", error, 0.0, time.perf_counter() - start)
        return _with_result(outcome, worker_id, run, f"{__name__}.UnknownTask")
    except Exception as exc:
        outcome = Outcome(
            record, *failure(record, f"{type(exc).__name__}: {exc}"), time.perf_counter() - start
        )
        path = f"{type(exc).__module__}.{type(exc).__qualname__}"
        return _with_result(outcome, worker_id, run, path, str(exc))
    finally:
        task_finished.send(sender=Outcome, record=record)
    seconds = time.perf_counter() - start
    if run.final is not None:  # another kind's run (the Tasks backend's) made its result
        return Outcome(record, "done", None, 0.0, seconds, run.final)
    if run.noticed:  # it saw the cancel, and stopped: whatever it returned, cancelled
        return Outcome(record, "cancelled", None, 0.0, seconds, cancelled_result(run, value_json))
    done = None
    if keep:
        done = results.encode(
            record, results.SUCCESSFUL, worker_id, started=run.started, finished=time.time(),
            value_json=value_json, progress=run.last,
        )  # fmt: skip
    return Outcome(record, "done", None, 0.0, seconds, done)


def cancelled_result(
    run: "results.Running",
    value_json: str = "null",
    error: dict[str, Any] | None = None,
    *,
    ran: bool = True,
) -> str | None:
    """The CANCELLED result of ``run`` (None when its task keeps no result); ``ran``
    False: it was never started."""
    if not run.keep:
        return None
    return results.encode(
        run.record, results.CANCELLED, run.worker_id, started=run.started if ran else None,
        finished=time.time(), value_json=value_json, error=error, progress=run.last,
    )  # fmt: skip


# Return values as the result keeps them: compact, and no NaN (not JSON).
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def _with_result(
    outcome: Outcome,
    worker_id: str,
    run: "results.Running",
    error_type: str,
    message: str | None = None,
) -> Outcome:
    """``outcome`` with its FAILED result when it is a failure for good of a task that
    keeps results (``message``: the error's, else what follows the type in the reason).

    A task that failed once cancelled (it saw the cancel, or its flag was set) is
    cancelled instead, the error in its result, and not retried; a retry carries the
    CANCELLED result the settle script records if a cancel came meanwhile.
    """
    payload = outcome.payload or {}
    if message is None:  # a retry's payload is the record, with the error's reason
        reason = payload.get("reason") or payload.get("last_error") or ""
        message = reason.partition(": ")[2] or reason
    error = {"type": error_type, "message": message, "traceback": payload.get("traceback", "")}
    if run.aborted or error_type.endswith("TaskAborted"):
        return replace(
            outcome, outcome="cancelled", payload=None, delay=0.0,
            result=cancelled_result(run, error=error),
        )  # fmt: skip
    if outcome.outcome == "retry":
        return replace(outcome, cancelled=cancelled_result(run, error=error))
    if outcome.outcome == "fail" and run.final is not None:  # the Tasks backend's FAILED
        return replace(outcome, result=run.final)
    if outcome.outcome != "fail" or not run.keep:
        return outcome
    failed = results.encode(
        outcome.record, results.FAILED, worker_id, started=run.started, finished=time.time(),
        error=error, progress=run.last,
    )  # fmt: skip
    return replace(outcome, result=failed)


def _call(run: "results.Running") -> Any:
    record = run.record
    kind = record.get("kind", "task")
    if kind != "task":
        # The runner returns the result JSON to record with the acknowledgement.
        run.final, error = import_string(KIND_RUNNERS[kind])(record, run.worker_id, run.queue)
        if error is not None:
            raise error
        return None
    registered = get_task(record["name"])
    if registered is None:
        raise UnknownTask(record["name"])
    result = registered.func(*record["args"], **record["kwargs"])
    if inspect.isawaitable(result):
        return asyncio.run(_awaited(result))
    return result


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def failure(record: dict[str, Any], reason: str) -> tuple[str, dict[str, Any], float]:
    """Return (outcome, payload, delay) of a run that failed for ``reason``: a retry with
    back-off while the task has retries left, else a failure with the traceback."""
    error = _error(reason, traceback.format_exc())
    if record.get("retries", 0) >= record.get("max_retries", 0):
        return "fail", error, 0.0
    retries = record.get("retries", 0) + 1
    delay = min(
        float(app_settings.QUEUE_RETRY_MAX_DELAY),
        float(app_settings.QUEUE_RETRY_DELAY) * 2 ** (retries - 1),
    )
    update = {"retries": retries, "last_error": error["reason"], "ready_at": time.time() + delay}
    return "retry", {**record, **update}, delay


def _error(reason: str, trace: str = "") -> dict[str, Any]:
    if trace.strip() == "NoneType: None":  # no exception being handled
        trace = ""
    return {"reason": reason, "traceback": trace, "at": time.time()}


def _raise_soft_limit(signum: int, frame: Any) -> None:
    raise SoftTimeLimitExceeded()


def run_with_alarm(
    record: dict[str, Any], worker_id: str, queue: Any, soft: float | None, abort: Any = None
) -> Outcome:
    """``run_task`` with the soft limit as SIGALRM (the main thread of a process only)."""
    if not soft:
        return run_task(record, worker_id, queue, abort)
    previous = signal.signal(signal.SIGALRM, _raise_soft_limit)
    signal.setitimer(signal.ITIMER_REAL, soft)
    try:
        return run_task(record, worker_id, queue, abort)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Pool:
    """Runs up to ``size`` tasks at once; ``submit`` one, ``wait`` for those that ended."""

    # True when ``submit`` runs the task to its end before returning.
    runs_inline = False

    def __init__(
        self, size: int, worker_id: str, queue: Any, soft: float | None, hard: float | None
    ) -> None:
        self.size, self.worker_id, self.queue = size, worker_id, queue
        self.soft, self.hard = soft, hard
        # Task id -> monotonic hard deadline, for the heartbeat (no renewal past it).
        self.deadlines: dict[str, float] = {}
        # Task id -> monotonic end of its grace, for the tasks a cancel asked to stop.
        self.aborts: dict[str, float] = {}
        self.grace = float(app_settings.QUEUE_CANCEL_GRACE)
        # For the pools that run tasks in this process: task id -> its abort flag and
        # the thread running it; the ids TaskAborted was raised in. Under _lock.
        self._lock = threading.Lock()
        self._flags: dict[str, _Flag] = {}
        self._threads: dict[str, int] = {}
        self._raised: set[str] = set()

    @property
    def busy(self) -> int:
        raise NotImplementedError

    def free(self) -> int:
        return self.size - self.busy

    def start(self) -> None:
        """Get ready to run tasks."""

    def submit(self, record: dict[str, Any]) -> None:
        raise NotImplementedError

    def wait(self, timeout: float) -> list[Outcome]:
        """Return the runs that ended, waiting up to ``timeout`` seconds for one."""
        raise NotImplementedError

    def close(self, *, kill: bool = False) -> None:
        """Stop the pool once its tasks ended (``kill``: at once)."""

    def _limits(self, record: dict[str, Any]) -> tuple[float | None, float | None]:
        soft, hard = time_limits(record, self.soft, self.hard)
        if hard:
            self.deadlines[record["id"]] = time.monotonic() + hard
        return soft, hard

    def _ended(self, outcome: Outcome) -> Outcome:
        self.deadlines.pop(outcome.record["id"], None)
        self.aborts.pop(outcome.record["id"], None)
        return outcome

    def abort(self, task_id: str) -> None:
        """Ask a task of this worker to stop (a cancel; called by the heartbeat): its
        flag now (or as it starts), its end once QUEUE_CANCEL_GRACE seconds passed."""
        with self._lock:
            if task_id in self.aborts:
                return
            self.aborts[task_id] = time.monotonic() + self.grace
            flag = self._flags.get(task_id)
        if flag is not None:
            flag.set()

    def end_aborted(self) -> None:
        """Raise TaskAborted in the threads running a task past its grace (called by
        the heartbeat; the prefork pool kills its children in ``wait`` instead)."""
        now = time.monotonic()
        with self._lock:
            for task_id, thread_id in self._threads.items():
                if self.aborts.get(task_id, math.inf) <= now and task_id not in self._raised:
                    self._raised.add(task_id)
                    logger.error("task %s: cancelled, and its grace ended: aborting it", task_id)
                    _async_raise(thread_id, TaskAborted)

    def _run_here(self, record: dict[str, Any], run: Callable[[Any], Outcome]) -> Outcome:
        """``run(abort flag)`` in this thread, where ``end_aborted`` may raise TaskAborted."""
        task_id, thread_id, flag = record["id"], threading.get_ident(), _Flag()
        with self._lock:
            self._flags[task_id], self._threads[task_id] = flag, thread_id
            if task_id in self.aborts:
                flag.set()
        try:
            return run(flag)
        except TaskAborted:  # raised between the task's end and here: it stopped
            cancelled = results.Running(self.queue, record, self.worker_id, time.time(),
                                        keeps_result(record), abort=flag)  # fmt: skip
            return Outcome(record, "cancelled", result=cancelled_result(cancelled))
        finally:
            while True:  # a TaskAborted raised too late lands here, or is dropped
                try:
                    with self._lock:
                        self._flags.pop(task_id, None)
                        self._threads.pop(task_id, None)
                        if task_id in self._raised:
                            self._raised.discard(task_id)
                            _async_raise(thread_id, None)
                    break
                except TaskAborted:
                    continue

    def overdue(self) -> set[str]:
        """Ids of the running tasks past their hard limit."""
        now = time.monotonic()
        # A copy: the heartbeat thread asks while the worker's thread changes the dict.
        return {task_id for task_id, deadline in list(self.deadlines.items()) if deadline <= now}


class _Flag:
    """A task's abort flag in this process: one attribute (a threading.Event costs a
    task several times more to make, and no one waits on it)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False

    def set(self) -> None:
        self.on = True

    def is_set(self) -> bool:
        return self.on


class SoloPool(Pool):
    """Run each task in the worker's own thread, as ``submit`` is called."""

    runs_inline = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._ended_runs: list[Outcome] = []
        self._running = 0

    @property
    def busy(self) -> int:
        return self._running

    def submit(self, record: dict[str, Any]) -> None:
        soft, _ = self._limits(record)
        self._running = 1
        main = threading.current_thread() is threading.main_thread()
        try:
            outcome = self._run_here(
                record,
                lambda abort: (
                    run_with_alarm(record, self.worker_id, self.queue, soft, abort)
                    if main
                    else run_task(record, self.worker_id, self.queue, abort)
                ),
            )
        finally:
            self._running = 0
        self._ended_runs.append(self._ended(outcome))

    def wait(self, timeout: float) -> list[Outcome]:
        ended, self._ended_runs = self._ended_runs, []
        return ended


class ThreadPool(Pool):
    """Run tasks in ``size`` threads: for tasks that wait on I/O."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._executor = concurrent.futures.ThreadPoolExecutor(self.size, "rp-task")
        self._futures: set[concurrent.futures.Future] = set()

    @property
    def busy(self) -> int:
        return len(self._futures)

    def submit(self, record: dict[str, Any]) -> None:
        soft, _ = self._limits(record)
        self._futures.add(self._executor.submit(self._run, record, soft))

    def _run(self, record: dict[str, Any], soft: float | None) -> Outcome:
        timer = None
        if soft:
            thread_id = threading.get_ident()
            timer = threading.Timer(soft, _async_raise, (thread_id, SoftTimeLimitExceeded))
            timer.daemon = True
            timer.start()
        try:
            return self._run_here(
                record, lambda abort: run_task(record, self.worker_id, self.queue, abort)
            )
        finally:
            if timer is not None:
                timer.cancel()

    def wait(self, timeout: float) -> list[Outcome]:
        if not self._futures:
            return []
        ended, _ = concurrent.futures.wait(
            self._futures, timeout, return_when=concurrent.futures.FIRST_COMPLETED
        )
        self._futures -= ended
        return [self._ended(future.result()) for future in ended]

    def close(self, *, kill: bool = False) -> None:
        self._executor.shutdown(wait=not kill, cancel_futures=True)


def _async_raise(thread_id: int, exception: type[BaseException] | None) -> None:
    """Raise ``exception`` in the thread ``thread_id`` at its next bytecode (None: drop
    one raised that has not landed yet)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), None if exception is None else ctypes.py_object(exception)
    )


class _Child:
    """One prefork child and the task it runs."""

    def __init__(self, context: Any, target: Callable[..., None], args: tuple) -> None:
        self.connection, child_end = context.Pipe()
        # The running task's abort flag: a byte shared with the child, written by the
        # worker's main thread only (which alone knows which task the child runs).
        self.abort = context.RawValue("b", 0)
        self.process = context.Process(
            target=target, args=(child_end, self.abort, *args), daemon=True
        )
        self.process.start()
        child_end.close()
        self.record: dict[str, Any] | None = None
        self.started = 0.0


class PreforkPool(Pool):
    """Run tasks in ``size`` child processes forked from the worker, one task each at a time.

    Each child has its own Redis and database connections (the worker closes its
    database connections before forking). The worker (this process) does all the queue
    bookkeeping; a child only runs tasks and sends back how they ended.
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._context = multiprocessing.get_context("fork")
        self._children: list[_Child] = []

    @property
    def busy(self) -> int:
        return sum(child.record is not None for child in self._children)

    def start(self) -> None:
        connections.close_all()
        self._children = [self._spawn() for _ in range(self.size)]

    def _spawn(self) -> _Child:
        # The worker's queue goes over as it is: forked, not pickled; its client's pools
        # open new connections in the child.
        return _Child(self._context, _child_main, (os.getpid(), self.worker_id, self.queue))

    def submit(self, record: dict[str, Any]) -> None:
        child = next(child for child in self._children if child.record is None)
        soft, _ = self._limits(record)
        child.record, child.started = record, time.monotonic()
        child.abort.value = 1 if record["id"] in self.aborts else 0
        child.connection.send((record, soft))

    def _ending(self) -> set[str]:
        """Ids past their hard limit or their cancel's grace; flags the cancelled."""
        now = time.monotonic()
        ending = self.overdue()
        for child in self._children:
            if child.record is not None and child.record["id"] in self.aborts:
                child.abort.value = 1
                if self.aborts[child.record["id"]] <= now:
                    ending.add(child.record["id"])
        return ending

    def wait(self, timeout: float) -> list[Outcome]:
        busy = {child.connection: child for child in self._children if child.record is not None}
        if not busy:
            return []
        overdue = self._ending()
        # The graces of the running tasks only (a task a cancel marked may wait its turn).
        running = [child.record["id"] for child in busy.values() if child.record is not None]
        graces = [self.aborts[task_id] for task_id in running if task_id in self.aborts]
        deadlines = list(self.deadlines.values()) + graces
        if deadlines:
            timeout = max(0.0, min(timeout, min(deadlines) - time.monotonic()))
        ended: list[Outcome] = []
        if not overdue:
            for ready in wait(list(busy), timeout):
                child = busy[ready]  # one of the connections given
                try:
                    outcome: Outcome = child.connection.recv()
                except (EOFError, OSError):
                    ended.append(self._replace(child, self._died(child)))
                    continue
                child.record = None
                ended.append(self._ended(outcome))
        overdue = self._ending()
        for child in self._children:
            if child.record is not None and child.record["id"] in overdue:
                ended.append(self._replace(child, self._killed(child)))
        return ended

    def _killed(self, child: _Child) -> str:
        assert child.record is not None
        _, hard = time_limits(child.record, self.soft, self.hard)
        child.process.kill()
        if child.record["id"] in self.aborts:
            return (
                f"TaskAborted: cancelled, and its grace ({self.grace:g} s) ended; "
                "the process was killed"
            )
        return f"TimeLimitExceeded: hard time limit ({hard:g} s) exceeded; the process was killed"

    def _died(self, child: _Child) -> str:
        child.process.join(1)
        code = child.process.exitcode
        return f"WorkerLostError: the process running the task died (exit code {code})"

    def _replace(self, child: _Child, reason: str) -> Outcome:
        record = child.record
        assert record is not None
        child.process.join(5)
        child.connection.close()
        index = self._children.index(child)
        self._children[index] = self._spawn()
        logger.error("task %s (%s): %s", record["id"], record["name"], reason)
        outcome = Outcome(record, *failure(record, reason), time.monotonic() - child.started)
        started = time.time() - outcome.seconds
        run = results.Running(
            self.queue, record, self.worker_id, started, keeps_result(record),
            abort=_SharedFlag(child.abort),
        )  # fmt: skip
        # No exception class: the reason's first word names what happened.
        error_type = reason.partition(":")[0]
        return self._ended(_with_result(outcome, self.worker_id, run, error_type))

    def close(self, *, kill: bool = False) -> None:
        for child in self._children:
            if kill:
                child.process.kill()
            else:
                with contextlib.suppress(OSError):
                    child.connection.send(None)
        for child in self._children:
            child.process.join(5)
            if child.process.is_alive():
                child.process.kill()
                child.process.join()
            child.connection.close()
        self._children = []


class _SharedFlag:
    """A prefork child's view of its abort flag, as ``aborted()`` asks it."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def is_set(self) -> bool:
        return bool(self.value.value)


def _child_main(
    connection: Connection, abort: Any, parent: int, worker_id: str, queue: Any
) -> None:
    """A prefork child: run the tasks the worker sends until told to stop or orphaned."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the worker's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            break
        if message is None:
            break
        record, soft = message
        connection.send(run_with_alarm(record, worker_id, queue, soft, _SharedFlag(abort)))
    connection.close()


def _exit_when_orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(ORPHAN_CHECK)
    os._exit(1)


POOLS: dict[str, type[Pool]] = {"solo": SoloPool, "threads": ThreadPool, "prefork": PreforkPool}
