"""Results of tasks: the record a worker writes when a task ends, the handle an enqueue
returns (``Result``: ``get``/``aget`` wait without polling, ``info``, ``cancel``), and
``progress()`` and ``aborted()`` for the running task.

Import: ``from redisparts_app.services.tasks import Result, progress, aborted``.

Keys, in the task's queue group (one hash tag with the queue's keys): ``result:<id>``
(the JSON, for QUEUE_RESULT_TTL seconds, in the shape the Django Tasks backend keeps
at the same key), ``done:<id>`` (one token once the task ended: a waiter's BLMOVE from
the list to itself returns it to every waiter, present and later) and ``abort:<id>``
(a cancel of a running task, read by its worker's heartbeat).

Guarantee: a task's end is recorded by the script that acknowledges it (done, failed,
expired, aborted) or cancels it before it ran: never an acknowledged task without its
result, nor a result of a task that will run again.
"""

import contextvars
import datetime as dt
import enum
import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from json.encoder import encode_basestring_ascii as _string
from typing import TYPE_CHECKING, Any

from ... import faces
from ...conf import app_settings
from ...connection import get_async_redis, socket_timeout
from ...exceptions import (
    InvalidTask,
    ResultTimeout,
    TaskCancelled,
    TaskExpired,
    TaskFailed,
)

if TYPE_CHECKING:  # a module name, so the docs do not see two TaskQueue to link to
    from . import queue as queue_module

__all__ = [
    "FINISHED",
    "Cancel",
    "Progress",
    "Result",
    "ResultInfo",
    "aborted",
    "aprogress",
    "check_expires",
    "progress",
]

# Django's TaskResultStatus values, and EXPIRED and CANCELLED; PENDING: nothing known (not
# sent yet, an unknown id, or its result expired).
PENDING, READY, RUNNING = "PENDING", "READY", "RUNNING"
SUCCESSFUL, FAILED, EXPIRED = "SUCCESSFUL", "FAILED", "EXPIRED"
CANCELLED = "CANCELLED"
FINISHED = frozenset({SUCCESSFUL, FAILED, EXPIRED, CANCELLED})


class Cancel(enum.StrEnum):
    """What a cancel did (``TaskQueue.cancel``, ``Result.cancel``, ``rp_queue cancel``)."""

    #: The task was ready, delayed or waiting for a retry: removed, recorded CANCELLED,
    #: its waiters woken. It never runs.
    CANCELLED = "cancelled"
    #: A worker runs it: marked for abort. ``aborted()`` turns True in the task within a
    #: heartbeat; QUEUE_CANCEL_GRACE seconds later its pool ends it. Recorded CANCELLED
    #: once it stops, unless it ended on its own first.
    ABORTING = "aborting"
    #: It ended already (its result says how), or it is failed or quarantined: nothing done.
    FINISHED = "finished"
    #: No such task (or it ended keeping no result): nothing done.
    UNKNOWN = "unknown"


# BLMOVE takes seconds to the millisecond; Redis 6.x truncates 0.001 s to 0 (forever).
SHORTEST_BLOCK = 0.002


@dataclass(frozen=True)
class Progress:
    """What a running task last reported with ``progress()``."""

    done: float
    total: float
    note: str = ""

    @property
    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 0.0


@dataclass(frozen=True)
class ResultInfo:
    """A task's result as read from Redis; times in seconds since the epoch; ``aborting``:
    it runs, and a cancel asked it to stop."""

    id: str
    state: str
    name: str | None = None
    return_value: Any = None
    error_type: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    enqueued_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    worker: str | None = None
    progress: Progress | None = None
    aborting: bool = False

    @property
    def finished(self) -> bool:
        return self.state in FINISHED


def check_expires(expires: object) -> float | None:
    """Return ``expires`` (seconds from now > 0, or an aware datetime) as a time in seconds
    since the epoch, or None; else raise InvalidTask."""
    if expires is None:
        return None
    if isinstance(expires, dt.datetime):
        if expires.tzinfo is None or expires.utcoffset() is None:
            raise InvalidTask(
                f"expires must be an aware datetime (with a time zone), got naive {expires}"
            )
        return expires.timestamp()
    if (
        isinstance(expires, bool)
        or not isinstance(expires, int | float)
        or not 0 < expires < math.inf
    ):
        raise InvalidTask(f"expires must be seconds > 0 or an aware datetime, got {expires!r}")
    return time.time() + expires


def encode(
    record: dict[str, Any],
    state: str,
    worker_id: str,
    *,
    started: float | None = None,
    finished: float | None = None,
    value_json: str = "null",
    error: dict[str, Any] | None = None,
    progress: Progress | None = None,
) -> str:
    """Return the result JSON of the task ``record`` (``value_json``: its return value as
    JSON; ``error``: with ``type``, ``message``, ``traceback``).

    Written as text around the parts that need encoding: a worker makes one per task,
    where json.dumps of the whole record would cost several times more.
    """
    errors = "[]"
    if error is not None:
        errors = json.dumps(
            [
                {
                    "exception_class_path": error.get("type", ""),
                    "message": error.get("message", ""),
                    "traceback": error.get("traceback", ""),
                }
            ]
        )
    shown = "null" if progress is None else json.dumps(progress.__dict__)
    workers = f"[{_string(worker_id)}]" if worker_id else "[]"  # none: cancelled unrun
    return (
        f'{{"id":{_string(record["id"])},"name":{_string(record["name"])},'
        f'"queue_name":{_string(record["queue"])},"status":"{state}","errors":{errors},'
        f'"worker_ids":{workers},"enqueued_at":{_time(record.get("enqueued_at"))},'
        f'"started_at":{_time(started)},"finished_at":{_time(finished)},"progress":{shown},'
        f'"return_value":{value_json}}}'
    )


def _time(seconds: float | None) -> str:
    """A time as JSON: seconds since the epoch, to the microsecond (an ISO 8601 string, as
    the Tasks backend writes, costs a worker several microseconds per task more)."""
    return "null" if seconds is None else f"{seconds:.6f}"


def _seconds(value: float | str | None) -> float | None:
    """A time of a result: seconds since the epoch, or the Tasks backend's ISO 8601."""
    if isinstance(value, str):
        return dt.datetime.fromisoformat(value).timestamp()
    return value


def decode(task_id: str, raw: bytes | str) -> ResultInfo:
    """Return the ResultInfo of a result JSON (ours, or the Django Tasks backend's)."""
    data = json.loads(raw)
    errors = data.get("errors") or [{}]
    error = errors[-1]
    path = error.get("exception_class_path")
    message = error.get("message")
    if message is None and error.get("traceback"):  # the Tasks backend keeps no message
        message = error["traceback"].rstrip().rpartition("\n")[2].partition(": ")[2]
    shown = data.get("progress")
    workers = data.get("worker_ids") or [None]
    return ResultInfo(
        id=task_id,
        state=data["status"],
        name=data.get("name") or data.get("module_path"),
        return_value=data.get("return_value"),
        error_type=path or None,
        error_message=message,
        traceback=error.get("traceback"),
        enqueued_at=_seconds(data.get("enqueued_at")),
        started_at=_seconds(data.get("started_at")),
        finished_at=_seconds(data.get("finished_at")),
        worker=workers[-1],
        progress=None if shown is None else Progress(**shown),
    )


def ttl_ms() -> int:
    """How long a result stays, in milliseconds (REDISPARTS["QUEUE_RESULT_TTL"])."""
    return max(1000, int(float(app_settings.QUEUE_RESULT_TTL) * 1000))


class Result(str):
    """The handle of an enqueued task: its id (a str, usable wherever the id was), and
    ``info()``, ``state``, ``progress``, ``get()`` and their async twins.

    ``keep`` False: the task keeps no result (``@task(result=False)``), so ``get()``
    raises at once rather than wait for a result that never comes.
    """

    queue: "queue_module.TaskQueue"
    keep: bool

    def __new__(
        cls, task_id: str, queue: "queue_module.TaskQueue", *, keep: bool = True
    ) -> "Result":
        self = super().__new__(cls, task_id)
        self.queue, self.keep = queue, keep
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (to another process, a cache) as the plain id: a client does not travel.
        return (str, (str(self),))

    @property
    def id(self) -> str:
        return str(self)

    def _keys(self) -> tuple[str, str]:
        return self.queue.result_key(self), self.queue.done_key(self)

    # -- reading ------------------------------------------------------------------

    def _info(self) -> faces.Steps[ResultInfo]:
        queue = self.queue
        raw, body, owner, abort = yield faces.pipeline(
            [
                faces.command("get", self._keys()[0]),
                faces.command("hget", queue.key("tasks"), self),
                faces.command("hget", queue.key("owners"), self),
                faces.command("exists", queue.abort_key(self)),
            ],
            key=queue.key("tasks"),
        )
        aborting = bool(abort) and owner is not None
        if raw is not None:
            info = decode(self, raw)
            return replace(info, aborting=True) if aborting and not info.finished else info
        # No result yet: where the task is tells its state.
        if owner is not None:
            return ResultInfo(self, RUNNING, worker=owner.decode(), aborting=aborting)
        if body is not None:
            record = json.loads(body)
            return ResultInfo(self, READY, record["name"], enqueued_at=record.get("enqueued_at"))
        return ResultInfo(self, PENDING)

    def info(self) -> ResultInfo:
        """Read the task's result now, or its state if it has none yet (no waiting)."""
        return faces.run(self._info(), self.queue.client)

    async def ainfo(self) -> ResultInfo:
        """The async twin of ``info``."""
        return await faces.arun(self._info(), self.queue.aclient)

    @property
    def state(self) -> str:
        """PENDING, READY, RUNNING, SUCCESSFUL, FAILED, EXPIRED or CANCELLED (one read)."""
        return self.info().state

    @property
    def progress(self) -> Progress | None:
        """What the running task last reported with ``progress()`` (one read)."""
        return self.info().progress

    # -- cancelling ---------------------------------------------------------------

    def cancel(self) -> Cancel:
        """Cancel the task (``TaskQueue.cancel``): a ``Cancel`` says what was done."""
        return self.queue.cancel(self)

    async def acancel(self) -> Cancel:
        """The async twin of ``cancel``."""
        return await self.queue.acancel(self)

    # -- waiting ------------------------------------------------------------------

    def _wait(self, timeout: float | None) -> faces.Steps[Any]:
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout < math.inf
        ):
            raise InvalidTask(f"timeout must be None or seconds > 0, got {timeout!r}")
        if not self.keep:
            raise InvalidTask(f"task {self} keeps no result (@task(result=False))")
        result_key, done_key = self._keys()
        deadline = None if timeout is None else time.monotonic() + timeout
        limit = socket_timeout((yield faces.CLIENT))
        # A block must end before the socket gives up on the reply: a long wait is a few.
        longest = max(SHORTEST_BLOCK, limit / 2) if limit else math.inf
        while True:
            left = math.inf if deadline is None else deadline - time.monotonic()
            block = min(left, longest)
            # BLMOVE from the list to itself: the token stays for every other waiter.
            wait = faces.command(
                "blmove",
                done_key,
                done_key,
                0 if block == math.inf else max(SHORTEST_BLOCK, round(block, 3)),
                "LEFT",
                "RIGHT",
            )
            _token, raw = yield faces.pipeline(
                [wait, faces.command("get", result_key)], key=result_key
            )
            info = decode(self, raw) if raw is not None else None
            if info is not None and info.finished:
                return _outcome(info)
            if deadline is not None and time.monotonic() >= deadline:
                raise ResultTimeout(self, timeout or 0.0, info.state if info else None)
            if _token is not None:
                # A token with no finished result should not be (each run's is deleted
                # before it can end again); rather than spin on it, wait a little.
                yield faces.sleep(min(0.1, left))

    def get(self, timeout: float | None = None) -> Any:
        """Wait up to ``timeout`` seconds (None: as long as it takes) for the task to end;
        return its return value.

        Raise TaskFailed (its error's type, message and traceback) if it failed for
        good, TaskExpired if it expired before it started, TaskCancelled if it was
        cancelled (before it ran, or aborted), ResultTimeout if it has not ended in
        time. The wait is a blocking read on ``done:<id>``, never a poll.
        """
        return faces.run(self._wait(timeout), self.queue.client)

    async def aget(self, timeout: float | None = None) -> Any:
        """The async twin of ``get``: a connection of its own per waiting coroutine (the
        queue's redis.asyncio client if one was given, else get_async_redis(blocking=True))."""
        client = self.queue.aclient
        if client is None:
            client = get_async_redis(blocking=True)
        return await faces.arun(self._wait(timeout), client)


def _outcome(info: ResultInfo) -> Any:
    if info.state == FAILED:
        raise TaskFailed(info)
    if info.state == EXPIRED:
        raise TaskExpired(info)
    if info.state == CANCELLED:
        raise TaskCancelled(info)
    return info.return_value


# -- progress -------------------------------------------------------------------------


@dataclass
class Running:
    """The task a worker runs in this context: what ``progress()`` writes to."""

    queue: "queue_module.TaskQueue"
    record: dict[str, Any]
    worker_id: str
    started: float
    keep: bool
    last: Progress | None = None
    # Set when a cancel asks the task to stop (the pool's flag, with ``is_set()``);
    # ``noticed`` once ``aborted()`` said so.
    abort: Any = None
    noticed: bool = False
    # The result JSON a run of another kind made (the Django Tasks backend's), recorded
    # with the acknowledgement as an @task's is.
    final: str | None = None

    @property
    def aborted(self) -> bool:
        """Whether the run stops because of a cancel: it saw the request, or was asked
        to while the abort flag says so (the pool's view, without ``aborted()``)."""
        return self.noticed or (self.abort is not None and self.abort.is_set())


_running: contextvars.ContextVar[Running | None] = contextvars.ContextVar(
    "redisparts_task", default=None
)


@contextmanager
def running(run: Running) -> Iterator[Running]:
    """Make ``run`` the task of this context (the worker's, around the task's call); an
    ``async def`` task's event loop inherits it."""
    token = _running.set(run)
    try:
        yield run
    finally:
        _running.reset(token)


def _progress(done: float, total: float, note: str) -> faces.Steps[bool]:
    run = _running.get()
    if run is None:
        raise InvalidTask("progress() is called inside a task a worker runs, not outside one")
    for value, what in ((done, "done"), (total, "total")):
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise InvalidTask(f"progress {what} must be a number, got {value!r}")
    if not 0 <= done <= total or total <= 0:
        raise InvalidTask(f"progress needs 0 ≤ done ≤ total and total > 0, got {done}/{total}")
    if not isinstance(note, str) or len(note) > 200:
        raise InvalidTask("progress note must be a string of at most 200 characters")
    run.last = Progress(done, total, note)
    if not run.keep:  # no result to show it in
        return False
    queue, task_id = run.queue, run.record["id"]
    body = encode(run.record, RUNNING, run.worker_id, started=run.started, progress=run.last)
    written = yield faces.script(
        "result_progress",
        [queue.key("owners"), queue.result_key(task_id)],
        [task_id, run.worker_id, body, ttl_ms()],
    )
    return bool(written)


def progress(done: float, total: float, note: str = "") -> bool:
    """Report the running task's progress (``done`` of ``total``, a short ``note``) in its
    result, where ``Result.progress`` and the admin read it.

    Return False when not written: the task keeps no result, or its worker no longer
    holds it. InvalidTask outside a task a worker runs.
    """
    core = _progress(done, total, note)
    run = _running.get()
    return faces.run(core, run.queue.client if run is not None else None)


async def aprogress(done: float, total: float, note: str = "") -> bool:
    """The async twin of ``progress``, for ``async def`` tasks."""
    return await faces.arun(_progress(done, total, note), None)


def aborted() -> bool:
    """Whether the running task was cancelled: True once its worker's heartbeat saw the
    cancel (within QUEUE_HEARTBEAT seconds). A task that checks it and stops (returns or
    raises) is recorded CANCELLED; QUEUE_CANCEL_GRACE seconds after the cancel its pool
    ends it anyway. A memory read, no Redis call: ask it as often as you like (the same
    inside ``async def`` tasks). InvalidTask outside a task a worker runs.
    """
    run = _running.get()
    if run is None:
        raise InvalidTask("aborted() is called inside a task a worker runs, not outside one")
    if run.abort is not None and run.abort.is_set():
        run.noticed = True
    return run.noticed
