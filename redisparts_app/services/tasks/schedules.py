"""Periodic schedules: a registered task run on a cron expression or every N seconds,
exactly once per slot however many schedulers run::

    from redisparts_app.services.tasks import periodic, task

    @periodic(cron="30 2 * * *", tz="Europe/Paris")     # 02:30 Paris time, daily
    @task(name="shop.nightly_report")
    def nightly_report(): ...

Code declares the schedules; ``rp_scheduler`` fires them. Key, in the task's queue
group: ``<prefix>:queue:{<group>}:periodic:<name>``, a hash with ``last`` (the latest
slot claimed, ms), ``paused``, ``edit`` (a run-time expression), ``fired`` and ``run``.

Guarantee: ``periodic_fire.lua`` claims a slot (only if later than ``last``) and
enqueues its task in one script, so each slot is enqueued at most once, and, while one
scheduler runs, exactly once within a pass of its time, whatever kills happen; slots
use Redis server time. ``catch_up``: "latest" fires once for missed slots, "none" skips
them. DST follows Debian (Vixie) cron's rule as cronsim computes it (docs: schedules).
"""

import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ... import faces, lua
from ...conf import app_settings
from ...connection import on_slot, resolve_client
from ...exceptions import InvalidArgument, ScheduleNotFound
from ...keys import validate_key_part
from .. import registry
from .queue import COMPONENT, WAKE_CAP, TaskQueue, encode_arguments, new_task_id
from .registry import Task, task

__all__ = [
    "CATCH_UP",
    "CATCH_UP_GRACE",
    "MIN_EVERY",
    "Schedule",
    "ScheduleState",
    "Timing",
    "apause",
    "areset_timing",
    "aresume",
    "arun_now",
    "aserver_now",
    "aset_timing",
    "astate",
    "astates",
    "fire_due",
    "get_schedule",
    "pause",
    "periodic",
    "record_run",
    "reset_timing",
    "resume",
    "run_now",
    "schedule_names",
    "schedules",
    "server_now",
    "set_timing",
    "state",
    "states",
]

CATCH_UP = ("latest", "none")
# Seconds a slot may be late and still fire under catch_up="none" (a busy machine, a
# scheduler restart); later ones are skipped.
CATCH_UP_GRACE = 10.0
# The shortest interval, in seconds: shorter would keep a scheduler busy.
MIN_EVERY = 0.1

_schedules: dict[str, "Schedule"] = {}


@dataclass(frozen=True)
class Timing:
    """When a schedule fires: a cron expression in the time zone ``tz`` (5 fields, or 6
    with seconds first), or every ``every`` seconds."""

    cron: str | None = None
    every: float | None = None
    tz: str = "UTC"

    def checked(self) -> "Timing":
        """Return this timing if valid, else raise InvalidArgument (nothing written)."""
        if (self.cron is None) == (self.every is None):
            raise InvalidArgument("schedule", None, "give either cron= or every=", show_value=False)
        if self.every is not None:
            every = self.every
            if isinstance(every, bool) or not isinstance(every, int | float):
                raise InvalidArgument("every", every, "must be a number of seconds")
            if not math.isfinite(every) or every < MIN_EVERY:
                raise InvalidArgument("every", every, f"must be at least {MIN_EVERY} seconds")
            if self.tz != "UTC":
                raise InvalidArgument("tz", self.tz, "applies to cron= only")
            return replace(self, every=float(every))
        if not isinstance(self.cron, str):
            raise InvalidArgument("cron", self.cron, "must be a string")
        zone = _zone(self.tz)
        try:
            CronSim(self.cron, datetime.now(zone))
        except (CronSimError, ValueError, IndexError) as exc:
            raise InvalidArgument("cron", self.cron, f"not a cron expression ({exc})") from exc
        return self

    def latest(self, at: float) -> float | None:
        """The latest slot at or before ``at`` (seconds since the epoch), or None."""
        if self.every is not None:
            step = round(self.every * 1000)
            return math.floor(at * 1000 / step) * step / 1000
        assert self.cron is not None
        # Reverse iteration yields slots strictly before its start (whole seconds).
        start = datetime.fromtimestamp(math.floor(at) + 1, _zone(self.tz))
        return _first(CronSim(self.cron, start, reverse=True))

    def following(self, after: float, count: int = 1) -> list[float]:
        """The next ``count`` slots strictly after ``after`` (seconds since the epoch)."""
        if self.every is not None:
            step = round(self.every * 1000)
            first = math.floor(after * 1000 / step) + 1
            return [(first + n) * step / 1000 for n in range(count)]
        assert self.cron is not None
        slots = CronSim(self.cron, datetime.fromtimestamp(after, _zone(self.tz)))
        found = []
        for _ in range(count):
            slot = _first(slots)
            if slot is None:
                break
            found.append(slot)
        return found

    def describe(self) -> str:
        if self.every is not None:
            return f"every {self.every:g}s"
        return f"cron {self.cron}" + ("" if self.tz == "UTC" else f" ({self.tz})")

    def as_dict(self) -> dict[str, Any]:
        return {"cron": self.cron, "every": self.every, "tz": self.tz}


def _zone(name: object) -> ZoneInfo:
    if not isinstance(name, str) or not name:
        raise InvalidArgument("tz", name, "must be an IANA time zone name such as Europe/Paris")
    try:
        return ZoneInfo(name)
    # OSError: a name the zone files cannot hold (too long, a folder such as "Europe").
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise InvalidArgument("tz", name, "unknown time zone (an IANA name such as UTC)") from exc


def _first(slots: Iterator[datetime]) -> float | None:
    try:
        return next(slots).timestamp()
    except StopIteration:  # no match within 50 years
        return None


@dataclass(frozen=True)
class Schedule:
    """A periodic run of the task ``task`` (a registered Task) as declared in code."""

    name: str
    task: Task
    timing: Timing
    catch_up: str = "latest"
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    pass_slot: bool = False

    @property
    def group(self) -> str:
        return str(app_settings.QUEUE_GROUP) if self.task.group is None else self.task.group

    def queue(self, client: Any = None) -> TaskQueue:
        return TaskQueue(self.group, client=client)

    def key(self, client: Any = None) -> str:
        return self.queue(client).key("periodic", self.name)


def periodic(
    *,
    cron: str | None = None,
    every: float | None = None,
    tz: str = "UTC",
    catch_up: str = "latest",
    name: str | None = None,
    args: tuple[Any, ...] | list[Any] = (),
    kwargs: dict[str, Any] | None = None,
    pass_slot: bool = False,
) -> Callable[[Any], Task]:
    """Declare a schedule for the decorated task (a ``@task``, or a function, which is
    registered as one); return the task.

    ``cron``: 5 fields (6 with seconds first) in time zone ``tz``; ``every``: seconds
    (≥ MIN_EVERY). ``catch_up``: "latest" or "none" (see the module). ``args`` /
    ``kwargs``: the task's arguments; ``pass_slot``: also pass ``slot=`` the slot's
    time (seconds since the epoch). ``name`` (default: the task's name) names the
    schedule in the admin and ``rp_schedule``; a task may have several schedules.
    Raise InvalidArgument for a bad expression, zone, interval or argument.
    """
    timing = Timing(cron, every, tz).checked()
    if catch_up not in CATCH_UP:
        raise InvalidArgument("catch_up", catch_up, f"must be one of {', '.join(CATCH_UP)}")

    def declare(func: Any) -> Task:
        registered = func if isinstance(func, Task) else task()(func)
        schedule_name = validate_key_part(name or registered.name, "schedule name")
        # Checked now, as an enqueue would (JSON, size), without reaching Redis: a
        # declaration runs at import time.
        checked = json.loads(f"{{{encode_arguments(args, kwargs)}}}")
        _schedules[schedule_name] = Schedule(
            schedule_name,
            registered,
            timing,
            catch_up,
            tuple(checked["args"]),
            checked["kwargs"],
            bool(pass_slot),
        )
        return registered

    return declare


def schedules(group: str | None = None) -> list[Schedule]:
    """The declared schedules (of queue group ``group`` if given), by name."""
    found = sorted(_schedules.values(), key=lambda schedule: schedule.name)
    return found if group is None else [s for s in found if s.group == group]


def schedule_names() -> list[str]:
    return sorted(_schedules)


def get_schedule(name: str) -> Schedule:
    """The schedule declared as ``name``; raise ScheduleNotFound."""
    found = _schedules.get(name)
    if found is None:
        raise ScheduleNotFound(name, schedule_names())
    return found


# -- state --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScheduleState:
    """A schedule as it runs: its timing now (the code's or the one set at run time),
    paused, the last slot claimed and the last fire and run (times: seconds since the
    epoch)."""

    name: str
    task: str
    group: str
    timing: Timing
    edited: bool
    catch_up: str
    paused: bool
    last_slot: float | None
    fired: dict[str, Any] | None
    run: dict[str, Any] | None

    def next_slots(self, now: float, count: int = 5) -> list[float]:
        """The next ``count`` fire times after ``now`` (none while paused)."""
        if self.paused:
            return []
        return self.timing.following(max(now, self.last_slot or now), count)


def _decode(schedule: Schedule, fields: dict[bytes, bytes]) -> ScheduleState:
    values = {key.decode(): value.decode() for key, value in fields.items()}
    timing, edited = schedule.timing, False
    if "edit" in values:
        edit = json.loads(values["edit"])
        # An edit made over another code expression lapses: the code changed since.
        if edit.get("code") == schedule.timing.as_dict():
            timing, edited = Timing(edit["cron"], edit["every"], edit["tz"]), True
    last = values.get("last")
    return ScheduleState(
        name=schedule.name,
        task=schedule.task.name,
        group=schedule.group,
        timing=timing,
        edited=edited,
        catch_up=schedule.catch_up,
        paused=values.get("paused") == "1",
        last_slot=int(last) / 1000 if last is not None else None,
        fired=json.loads(values["fired"]) if "fired" in values else None,
        run=json.loads(values["run"]) if "run" in values else None,
    )


def state(name: str, *, client: Any = None) -> ScheduleState:
    """The run-time state of schedule ``name`` (ScheduleNotFound if not declared)."""
    return faces.run(_state(name), resolve_client(client))


async def astate(name: str, *, client: Any = None) -> ScheduleState:
    """The async twin of ``state``."""
    return await faces.arun(_state(name), client)


def _state(name: str) -> faces.Steps[ScheduleState]:
    schedule = get_schedule(name)
    fields = yield faces.command("hgetall", schedule.key())
    return _decode(schedule, fields)


def states(*, client: Any = None) -> list[ScheduleState]:
    """The state of every declared schedule, in one pipeline."""
    return faces.run(_states(), resolve_client(client))


async def astates(*, client: Any = None) -> list[ScheduleState]:
    """The async twin of ``states``."""
    return await faces.arun(_states(), client)


def _states() -> faces.Steps[list[ScheduleState]]:
    found = schedules()
    if not found:
        return []
    replies = yield faces.pipeline([faces.command("hgetall", s.key()) for s in found])
    return [_decode(s, fields) for s, fields in zip(found, replies, strict=True)]


def server_now(client: Any = None) -> float:
    """Redis server time, seconds since the epoch: every host agrees on the slots."""
    return faces.run(_server_now(None), resolve_client(client))


async def aserver_now(client: Any = None) -> float:
    """The async twin of ``server_now``."""
    return await faces.arun(_server_now(None), client)


def _server_now(now: float | None) -> faces.Steps[float]:
    """``now`` when given, else the server's time."""
    if now is None:
        seconds, micros = yield faces.command("time")
        now = int(seconds) + int(micros) / 1e6
    return now


# -- run-time changes (admin, rp_schedule) ------------------------------------------------


def pause(name: str, *, client: Any = None) -> None:
    """Stop firing ``name`` until ``resume``; a run already enqueued still runs."""
    faces.run(_pause(name), resolve_client(client))


async def apause(name: str, *, client: Any = None) -> None:
    """The async twin of ``pause``."""
    await faces.arun(_pause(name), client)


def _pause(name: str) -> faces.Op:
    return faces.command("hset", get_schedule(name).key(), "paused", "1")


def resume(name: str, *, client: Any = None, now: float | None = None) -> None:
    """Fire ``name`` again from its next slot after now; the slots missed while paused
    are not caught up."""
    faces.run(_resume(name, now), resolve_client(client))


async def aresume(name: str, *, client: Any = None, now: float | None = None) -> None:
    """The async twin of ``resume``."""
    await faces.arun(_resume(name, now), client)


def _resume(name: str, now: float | None) -> faces.Steps[None]:
    schedule = get_schedule(name)
    now = yield from _server_now(now)
    mapping = {"paused": "0", "last": int(now * 1000)}
    yield faces.pipeline([faces.command("hset", schedule.key(), mapping=mapping), *_wake(schedule)])


def set_timing(
    name: str,
    *,
    cron: str | None = None,
    every: float | None = None,
    tz: str = "UTC",
    client: Any = None,
    now: float | None = None,
) -> Timing:
    """Replace the timing of ``name`` at run time (until the code's own changes); fire
    from its next slot after now. Raise InvalidArgument (nothing written) when invalid."""
    return faces.run(_set_timing(name, Timing(cron, every, tz), now), resolve_client(client))


async def aset_timing(
    name: str,
    *,
    cron: str | None = None,
    every: float | None = None,
    tz: str = "UTC",
    client: Any = None,
    now: float | None = None,
) -> Timing:
    """The async twin of ``set_timing``."""
    return await faces.arun(_set_timing(name, Timing(cron, every, tz), now), client)


def _set_timing(name: str, timing: Timing, now: float | None) -> faces.Steps[Timing]:
    schedule = get_schedule(name)
    timing = timing.checked()
    now = yield from _server_now(now)
    edit = {**timing.as_dict(), "code": schedule.timing.as_dict()}
    mapping = {"edit": json.dumps(edit), "last": int(now * 1000)}
    yield faces.pipeline([faces.command("hset", schedule.key(), mapping=mapping), *_wake(schedule)])
    return timing


def reset_timing(name: str, *, client: Any = None, now: float | None = None) -> None:
    """Go back to the timing declared in code, from its next slot after now."""
    faces.run(_reset_timing(name, now), resolve_client(client))


async def areset_timing(name: str, *, client: Any = None, now: float | None = None) -> None:
    """The async twin of ``reset_timing``."""
    await faces.arun(_reset_timing(name, now), client)


def _reset_timing(name: str, now: float | None) -> faces.Steps[None]:
    schedule = get_schedule(name)
    now = yield from _server_now(now)
    key = schedule.key()
    # In this order, no transaction needed: a pass between the two sees no slot after now.
    last = faces.command("hset", key, "last", int(now * 1000))
    yield faces.pipeline([last, faces.command("hdel", key, "edit"), *_wake(schedule)])


def run_now(name: str, *, client: Any = None) -> str:
    """Enqueue a run of ``name`` now, besides its slots (paused or not); return its id."""
    return faces.run(_run_now(name), resolve_client(client))


async def arun_now(name: str, *, client: Any = None) -> str:
    """The async twin of ``run_now``."""
    return await faces.arun(_run_now(name), client)


def _run_now(name: str) -> faces.Steps[str]:
    schedule = get_schedule(name)
    now = yield from _server_now(None)
    queue = schedule.queue()
    task_id, keys, argv = _fire_record(schedule, queue, now, now=True)
    yield faces.pipeline(
        [
            faces.script("queue_enqueue", keys[1:], argv[2:6]),
            faces.command("hset", schedule.key(), "fired", argv[6]),
        ]
    )
    yield from registry.noting(COMPONENT, queue.group)  # as an enqueue does
    return task_id


def _wake(schedule: Schedule) -> list[faces.Op]:
    """The commands that wake the schedulers, so they read a change now rather than at
    their next slot."""
    key = schedule.queue().key("sched_wake")
    return [faces.command("lpush", key, 1), faces.command("ltrim", key, 0, 0)]


# -- the scheduler's pass -----------------------------------------------------------------


def _fire_record(
    schedule: Schedule, queue: TaskQueue, slot: float, *, now: bool = False
) -> tuple[str, list[str], list[Any]]:
    """KEYS and ARGV of periodic_fire.lua for ``slot``: the task record as an enqueue
    builds it, marked with the schedule (so its worker records the run) and the slot."""
    task_id = new_task_id()
    kwargs = dict(schedule.kwargs)
    if schedule.pass_slot:
        kwargs["slot"] = slot
    prepared = queue._prepare(
        schedule.task.name, schedule.args, kwargs, schedule.task.queue, 0.0,
        schedule.task.max_retries, None, None, task_id, None, None, "task", False,
    )  # fmt: skip
    record = json.loads(prepared.argv[1])
    record.update(schedule=schedule.name, slot=slot)
    fired = {"slot": None if now else slot, "task_id": task_id, "at": time.time()}
    keys = [schedule.key(queue.client), *prepared.keys]
    argv = [
        round(slot * 1000),  # the slot as computed, not a millisecond below it
        1,
        task_id,
        json.dumps(record, separators=(",", ":")),
        prepared.argv[2],
        WAKE_CAP,
        json.dumps(fired),
    ]
    return task_id, keys, argv


def fire_due(
    group: str | None = None, *, client: Any = None, now: float | None = None
) -> tuple[int, float | None]:
    """Fire the due slot of each schedule of ``group``; return (fired, seconds until the
    next slot or None). ``now``: seconds since the epoch (default: Redis server time)."""
    queue = TaskQueue(group, client=client)
    found = schedules(queue.group)
    if not found:
        return 0, None
    # The group's keys share a slot: one pipeline to its node, with that node's TIME (a
    # cluster client would not pipeline TIME).
    with on_slot(queue.client, queue.key("tasks")) as server:
        pipe = server.pipeline(transaction=False)
        pipe.time()
        for schedule in found:
            pipe.hgetall(schedule.key(queue.client))
        replies = pipe.execute()
    seconds, micros = replies[0]
    if now is None:
        now = int(seconds) + int(micros) / 1e6
    fired, waits = 0, []
    for schedule, fields in zip(found, replies[1:], strict=True):
        current = _decode(schedule, fields)
        if current.paused:
            continue
        fired += _fire_one(schedule, current, queue, now)
        following = current.timing.following(now)
        if following:
            waits.append(following[0] - now)
    if fired:
        registry.note(COMPONENT, queue.group, client=queue.client)  # as an enqueue does
    return fired, min(waits) if waits else None


def _fire_one(schedule: Schedule, current: ScheduleState, queue: TaskQueue, now: float) -> int:
    due = current.timing.latest(now)
    if due is None or (current.last_slot is not None and due <= current.last_slot):
        return 0
    # A new schedule starts from now; a slot too late for catch_up="none" is skipped.
    enqueue = current.last_slot is not None and (
        schedule.catch_up == "latest" or now - due <= CATCH_UP_GRACE
    )
    _task_id, keys, argv = _fire_record(schedule, queue, due)
    argv[1] = 1 if enqueue else 0
    claimed = lua.call(queue.client, "periodic_fire", keys, argv)
    return 1 if claimed and enqueue else 0


def record_run(
    client: Any, group: str, record: dict[str, Any], outcome: str, seconds: float
) -> None:
    """Note the outcome (done, retry, fail, lost) of a run of a schedule's task: what
    the admin shows as its last result."""
    name = validate_key_part(record["schedule"], "schedule name")
    run = {"task_id": record["id"], "outcome": outcome, "at": time.time(), "seconds": seconds}
    client.hset(TaskQueue(group, client=client).key("periodic", name), "run", json.dumps(run))
