"""Periodic schedules in one process: DST days and catch-up with an injected clock,
pause, resume, run now and run-time edits, the last run a worker records, bad input.

Multi-process exactly-once firing (several schedulers, SIGKILLs) is in
test_periodic_processes.py.
"""

import io
import itertools
import json
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.urls import reverse

from redisparts_app.exceptions import InvalidArgument, ScheduleNotFound
from redisparts_app.services.tasks import (
    Scheduler,
    TaskQueue,
    Worker,
    periodic,
    queue_groups,
    task,
)
from redisparts_app.services.tasks import schedules as periodic_module
from tests.periodic_tasks import QUEUE, append_slot, boom, declared, noop, slots_run


@pytest.fixture(autouse=True)
def _schedules():
    with declared():
        yield


class Clock:
    """A clock the test moves: seconds since the epoch."""

    def __init__(self, at: datetime) -> None:
        self.now = at.timestamp()

    def __call__(self) -> float:
        return self.now


def fired_slots(queue: TaskQueue) -> list[float]:
    """Slots of the runs enqueued so far, in queue order."""
    return [info.kwargs.get("slot", -1.0) for info in queue.peek(QUEUE, 0, 1000)]


def walk(scheduler: Scheduler, clock: Clock, until: datetime, step: float) -> None:
    """Run a scheduler pass every ``step`` seconds of the clock until ``until``."""
    end = until.timestamp()
    while clock.now <= end:
        scheduler.run_once()
        clock.now += step


def fire_first_slot() -> None:
    """Two passes a second apart: the first sees the schedule, the second fires a slot."""
    clock = Clock(datetime.fromtimestamp(utc(2026, 1, 1)))
    scheduler = Scheduler(clock=clock, reap=False)
    scheduler.run_once()
    clock.now += 1
    scheduler.run_once()


def local(zone: str, *fields: int) -> datetime:
    return datetime(*fields, tzinfo=ZoneInfo(zone))


def utc(*fields: int) -> float:
    return datetime(*fields, tzinfo=ZoneInfo("UTC")).timestamp()


# Daily at 02:30 local time, walked over the DST day in one-minute steps: one run a day,
# at 03:00 when 02:30 is skipped (spring forward), at the first 02:30 when it repeats.
DST_DAYS = [
    ("Europe/Paris", "30 2 * * *", (2026, 3, 29), utc(2026, 3, 29, 1, 0)),  # 03:00 CEST
    ("Europe/Paris", "30 2 * * *", (2026, 10, 25), utc(2026, 10, 25, 0, 30)),  # 02:30 CEST
    ("America/New_York", "30 2 * * *", (2026, 3, 8), utc(2026, 3, 8, 7, 0)),  # 03:00 EDT
    ("America/New_York", "30 2 * * *", (2026, 11, 1), utc(2026, 11, 1, 7, 30)),  # 02:30 EST
    # New York repeats 01:00-02:00 (not 02:30): a 01:30 job runs at the first 01:30 only.
    ("America/New_York", "30 1 * * *", (2026, 11, 1), utc(2026, 11, 1, 5, 30)),  # 01:30 EDT
]


@pytest.mark.parametrize(("zone", "cron", "day", "expected"), DST_DAYS)
def test_daily_job_runs_once_on_dst_days(redis_client, zone, cron, day, expected):
    periodic(cron=cron, tz=zone, pass_slot=True, name="daily")(append_slot)
    clock = Clock(local(zone, *day, 0, 0))
    clock.now -= 3600  # from 23:00 the day before
    scheduler = Scheduler(clock=clock, reap=False)
    walk(scheduler, clock, local(zone, *day, 12, 0), step=60)
    assert fired_slots(TaskQueue()) == [expected]


def test_hourly_job_runs_in_both_repeated_hours_on_fall_back_day(redis_client):
    # Jobs firing every hour or more often are not adjusted (Debian cron's rule):
    # 01:00 EDT and 01:00 EST are two slots an hour apart.
    periodic(cron="0 * * * *", tz="America/New_York", pass_slot=True)(append_slot)
    clock = Clock(local("America/New_York", 2026, 11, 1, 0, 30))
    end = local("America/New_York", 2026, 11, 1, 3, 0)
    walk(Scheduler(clock=clock, reap=False), clock, end, 60)
    assert fired_slots(TaskQueue()) == [
        utc(2026, 11, 1, 5, 0), utc(2026, 11, 1, 6, 0), utc(2026, 11, 1, 7, 0),
        utc(2026, 11, 1, 8, 0),
    ]  # fmt: skip


def test_new_schedule_starts_at_its_next_slot(redis_client):
    periodic(every=60, pass_slot=True)(append_slot)
    clock = Clock(datetime.fromtimestamp(utc(2026, 1, 1, 0, 0, 30)))
    scheduler = Scheduler(clock=clock, reap=False)
    scheduler.run_once()  # first sight: the slot at 00:00 came before the schedule
    assert fired_slots(TaskQueue()) == []
    clock.now = utc(2026, 1, 1, 0, 1, 0)
    scheduler.run_once()
    scheduler.run_once()
    assert fired_slots(TaskQueue()) == [utc(2026, 1, 1, 0, 1)]


@pytest.mark.parametrize(("catch_up", "expected"), [("latest", 1), ("none", 0)])
def test_downtime_fires_once_or_not_at_all_never_a_burst(redis_client, catch_up, expected):
    periodic(every=60, catch_up=catch_up, pass_slot=True)(append_slot)
    clock = Clock(datetime.fromtimestamp(utc(2026, 1, 1, 0, 0, 30)))
    scheduler = Scheduler(clock=clock, reap=False)
    scheduler.run_once()
    clock.now = utc(2026, 1, 1, 3, 0, 20)  # 180 slots missed
    scheduler.run_once()
    scheduler.run_once()
    assert fired_slots(TaskQueue()) == [utc(2026, 1, 1, 3, 0)] * expected
    clock.now = utc(2026, 1, 1, 3, 1, 0, 5)
    scheduler.run_once()  # the next slot fires on time either way
    assert fired_slots(TaskQueue())[-1] == utc(2026, 1, 1, 3, 1)


def test_catch_up_none_still_fires_a_slot_within_the_grace(redis_client):
    periodic(every=60, catch_up="none", pass_slot=True)(append_slot)
    clock = Clock(datetime.fromtimestamp(utc(2026, 1, 1, 0, 0, 30)))
    scheduler = Scheduler(clock=clock, reap=False)
    scheduler.run_once()
    clock.now = utc(2026, 1, 1, 0, 1, 0) + periodic_module.CATCH_UP_GRACE - 1
    scheduler.run_once()
    assert fired_slots(TaskQueue()) == [utc(2026, 1, 1, 0, 1)]


@pytest.mark.parametrize("every", [1, 0.3, 0.1])
def test_two_schedulers_in_the_same_pass_fire_a_slot_once(redis_client, every):
    periodic(every=every, pass_slot=True)(append_slot)
    clock = Clock(datetime.fromtimestamp(utc(2026, 1, 1, 0, 0, 0, 50_000)))
    first, second = Scheduler(clock=clock, reap=False), Scheduler(clock=clock, reap=False)
    for _ in range(20):
        clock.now += every / 2
        first.run_once()
        second.run_once()
    slots = fired_slots(TaskQueue())
    assert len(slots) == len(set(slots)) == first.fired + second.fired
    assert len(slots) >= 9
    steps = [round((b - a) / every, 3) for a, b in itertools.pairwise(slots)]
    assert steps == [1.0] * len(steps)


def test_pause_stops_firing_and_resume_skips_what_was_missed(redis_client, face):
    schedules = face(periodic_module)
    periodic(every=0.1, pass_slot=True, name="tick")(append_slot)
    clock = Clock(datetime.fromtimestamp(utc(2026, 1, 1)))  # no pass comes late
    scheduler = Scheduler(clock=clock, reap=False)
    for _ in range(3):
        scheduler.run_once()
        clock.now += 0.1
    schedules.pause("tick")
    before = len(fired_slots(TaskQueue()))
    assert before >= 1
    clock.now += 0.35
    scheduler.run_once()
    assert len(fired_slots(TaskQueue())) == before
    assert schedules.state("tick").paused
    assert schedules.state("tick").next_slots(clock.now) == []
    schedules.resume("tick", now=clock.now)
    scheduler.run_once()  # the slots of the pause are not caught up
    assert len(fired_slots(TaskQueue())) == before
    clock.now += 0.15
    scheduler.run_once()
    assert len(fired_slots(TaskQueue())) == before + 1


def test_run_now_enqueues_a_run_even_when_paused(redis_client, tmp_path, face):
    schedules = face(periodic_module)
    periodic(every=3600, name="hourly", args=[str(tmp_path / "runs"), 0.0])(append_slot)
    schedules.pause("hourly")
    task_id = schedules.run_now("hourly")
    assert TaskQueue().length(QUEUE) == 1
    Worker([QUEUE]).run(burst=True)
    assert slots_run(str(tmp_path / "runs")) == [0.0]
    state = schedules.state("hourly")
    assert state.run["task_id"] == task_id
    assert state.run["outcome"] == "done"
    assert state.fired["task_id"] == task_id


def test_worker_records_the_outcome_of_the_last_run(redis_client):
    periodic(every=3600, name="failing")(boom)
    periodic(every=3600, name="fine")(noop)
    periodic_module.run_now("failing")
    periodic_module.run_now("fine")
    Worker([QUEUE]).run(burst=True)
    assert periodic_module.state("failing").run["outcome"] == "fail"
    assert periodic_module.state("fine").run["outcome"] == "done"
    assert periodic_module.state("fine").run["at"] > 0


def test_edit_at_run_time_fires_the_new_expression_from_now_on(redis_client, face):
    schedules = face(periodic_module)
    periodic(every=60, pass_slot=True, name="edited")(append_slot)
    schedules.set_timing("edited", cron="*/5 * * * *", tz="Europe/Paris")
    state = schedules.state("edited")
    assert state.edited
    assert state.timing.cron == "*/5 * * * *"
    assert all(int(slot) % 300 == 0 for slot in state.next_slots(state.last_slot, 5))
    schedules.reset_timing("edited")
    assert schedules.state("edited").timing.every == 60


def test_edit_lapses_when_the_code_changes_its_expression(redis_client):
    periodic(every=60, name="coded")(noop)
    periodic_module.set_timing("coded", every=5)
    assert periodic_module.state("coded").timing.every == 5
    periodic(every=120, name="coded")(noop)  # a new release declares another one
    state = periodic_module.state("coded")
    assert state.timing.every == 120
    assert not state.edited


def test_next_five_slots_of_a_cron_schedule(redis_client):
    periodic(cron="0 9 * * MON-FRI", tz="Europe/Paris", name="weekdays")(noop)
    state = periodic_module.state("weekdays")
    friday = local("Europe/Paris", 2026, 11, 27, 10, 0).timestamp()
    slots = [datetime.fromtimestamp(s, ZoneInfo("Europe/Paris")) for s in state.next_slots(friday)]
    assert [(s.day, s.hour) for s in slots] == [(30, 9), (1, 9), (2, 9), (3, 9), (4, 9)]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cron": "61 * * * *"}, "not a cron expression"),
        ({"cron": "* * *"}, "not a cron expression"),
        ({"cron": ""}, "not a cron expression"),
        ({"cron": 5}, "must be a string"),
        ({"cron": "* * * * *", "tz": "Mars/Olympus"}, "unknown time zone"),
        ({"cron": "* * * * *", "tz": "../etc/passwd"}, "unknown time zone"),
        ({"cron": "* * * * *", "tz": "y" * 100_000}, "unknown time zone"),
        ({"cron": "* * * * *", "tz": "Europe"}, "unknown time zone"),
        ({"cron": "* * * * *", "tz": "Europe/\x00"}, "unknown time zone"),
        ({"every": 0}, "at least"),
        ({"every": -5}, "at least"),
        ({"every": float("inf")}, "at least"),
        ({"every": True}, "number of seconds"),
        ({"every": "5"}, "number of seconds"),
        ({"every": 5, "tz": "Europe/Paris"}, "cron= only"),
        ({}, "either cron= or every="),
        ({"cron": "* * * * *", "every": 5}, "either cron= or every="),
        ({"every": 5, "catch_up": "all"}, "must be one of"),
    ],
)
def test_bad_schedule_is_refused_with_a_message(redis_client, options, message):
    with pytest.raises(InvalidArgument, match=message):
        periodic(**options)(noop)
    assert periodic_module.schedule_names() == [] or "tests.periodic.noop" not in (
        periodic_module.schedule_names()
    )
    assert redis_client.dbsize() == 0


def test_bad_edit_writes_nothing(redis_client):
    periodic(every=60, name="kept")(noop)
    with pytest.raises(InvalidArgument, match="not a cron expression"):
        periodic_module.set_timing("kept", cron="every day")
    with pytest.raises(InvalidArgument, match="unknown time zone"):
        periodic_module.set_timing("kept", cron="* * * * *", tz="Nowhere/Land")
    with pytest.raises(ScheduleNotFound, match="declared: kept"):
        periodic_module.pause("missing")
    assert redis_client.dbsize() == 0


def test_schedule_name_and_arguments_are_checked(redis_client):
    with pytest.raises(InvalidArgument, match="schedule name"):
        periodic(every=60, name="a:{b}")(noop)
    with pytest.raises(Exception, match="JSON"):
        periodic(every=60, name="bad-args", args=[object()])(noop)
    assert periodic_module.schedule_names() == []


def test_schedule_keys_share_the_groups_hash_slot(redis_client):
    from redis.crc import key_slot

    periodic(every=60, name="slotted")(noop)
    schedule = periodic_module.get_schedule("slotted")
    queue = schedule.queue()
    keys = [schedule.key(), queue.key("tasks"), queue.queue_key(QUEUE), queue.key("wake")]
    assert len({key_slot(key.encode()) for key in keys}) == 1


def test_fired_record_names_its_schedule_and_slot(redis_client):
    periodic(every=1, name="marked")(noop)
    fire_first_slot()
    (task_id,) = [i.decode() for i in redis_client.lrange(TaskQueue().queue_key(QUEUE), 0, -1)]
    record = json.loads(redis_client.hget(TaskQueue().key("tasks"), task_id))
    assert record["schedule"] == "marked"
    assert record["slot"] == utc(2026, 1, 1, 0, 0, 1)


# -- rp_schedule ---------------------------------------------------------------------------


def rp_schedule(*args: str) -> str:
    out = io.StringIO()
    call_command("rp_schedule", *args, stdout=out)
    return out.getvalue()


def test_command_lists_pauses_resumes_and_runs_a_schedule(redis_client):
    periodic(cron="*/5 * * * *", tz="Europe/Paris", name="five")(noop)
    listed = json.loads(rp_schedule("list", "--json"))
    assert [row["name"] for row in listed] == ["five"]
    assert listed[0]["timing"] == {"cron": "*/5 * * * *", "every": None, "tz": "Europe/Paris"}
    assert len(listed[0]["next"]) == 5
    assert "Paused five." in rp_schedule("pause", "five")
    assert json.loads(rp_schedule("list", "--json"))[0]["paused"] is True
    assert "Resumed five" in rp_schedule("resume", "five")
    ran = json.loads(rp_schedule("run", "five", "--json"))
    assert ran["paused"] is False
    assert TaskQueue().length(QUEUE) == 1
    Worker([QUEUE]).run(burst=True)
    assert "last run done" in rp_schedule("list")
    assert "every 30s (edited)" in rp_schedule("set", "five", "--every", "30") + rp_schedule("list")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["pause", "nope"], "no schedule of that name; declared: five"),
        (["run", "nope"], "no schedule of that name"),
        (["resume"], "needs a schedule name"),
        (["list", "five"], "takes no name"),
        (["set", "five", "--cron", "99 * * * *"], "not a cron expression"),
        (["set", "five", "--cron", "* * * * *", "--tz", "Nowhere/Land"], "unknown time zone"),
        (["set", "five", "--every", "0"], "at least"),
        (["pause", "five", "--every", "5"], "go with set only"),
    ],
)
def test_command_refuses_bad_input_with_exit_2_and_writes_nothing(redis_client, args, message):
    periodic(cron="*/5 * * * *", name="five")(noop)
    with pytest.raises(CommandError, match=message) as raised:
        rp_schedule(*args)
    assert raised.value.returncode == 2
    assert redis_client.dbsize() == 0


# -- admin ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_admin_shows_timing_last_run_and_next_five_fire_times(admin_client):
    periodic(cron="30 2 * * *", tz="Europe/Paris", name="nightly")(noop)
    periodic_module.run_now("nightly")
    Worker([QUEUE]).run(burst=True)
    page = admin_client.get(reverse("admin:redisparts_schedules")).content.decode()
    assert "nightly" in page
    assert "cron 30 2 * * * (Europe/Paris)" in page
    assert page.count("02:30") + page.count("01:30") + page.count("00:30") >= 5  # UTC times
    assert '<span class="rp-ok">done</span>' in page


@pytest.mark.django_db
def test_admin_pauses_runs_edits_and_refuses_a_bad_edit(admin_client, redis_client):
    periodic(every=60, name="edited")(noop)
    action = reverse("admin:redisparts_schedule_action", args=["edited"])
    assert admin_client.get(action).status_code == 405
    admin_client.post(action, {"action": "pause"})
    assert periodic_module.state("edited").paused
    admin_client.post(action, {"action": "run"})
    assert TaskQueue().length(QUEUE) == 1
    response = admin_client.post(action, {"action": "set", "cron": "0 9 * * *", "tz": "Asia/Tokyo"})
    assert response.status_code == 302
    assert periodic_module.state("edited").timing.tz == "Asia/Tokyo"
    before = redis_client.hgetall(periodic_module.get_schedule("edited").key())
    page = admin_client.post(
        action, {"action": "set", "cron": "0 25 * * *"}, follow=True
    ).content.decode()
    assert "Nothing done: invalid cron" in page
    page = admin_client.post(
        reverse("admin:redisparts_schedule_action", args=["missing"]), {"action": "run"},
        follow=True,
    ).content.decode()  # fmt: skip
    assert "no schedule of that name" in page
    assert redis_client.hgetall(periodic_module.get_schedule("edited").key()) == before


def test_declaring_a_schedule_needs_no_redis():
    with override_settings(CACHES={}):  # no connection can even be made
        with pytest.raises(Exception, match="not a CACHES entry"):
            TaskQueue()
        periodic(every=60, name="offline", args=[1, "two"])(noop)  # at import time
    assert periodic_module.get_schedule("offline").args == (1, "two")


def test_worker_survives_a_record_naming_a_bad_schedule(redis_client):
    task_id = noop.enqueue_with(on_commit=False)
    key = TaskQueue().key("tasks")
    record = json.loads(redis_client.hget(key, task_id))
    record["schedule"] = "a:{b}"
    redis_client.hset(key, task_id, json.dumps(record))
    assert Worker([QUEUE]).run(burst=True) == 1


def test_a_schedules_group_is_listed_once_it_fires(redis_client):
    periodic(every=3600, name="grouped")(
        task(name="tests.periodic.grouped", group="crons")(noop.func)
    )
    assert "crons" not in queue_groups()
    periodic_module.run_now("grouped")
    assert "crons" in queue_groups()


@pytest.mark.cluster
def test_fire_run_now_and_edits_work_on_a_server_and_a_cluster(redis_backend, redis_client, face):
    schedules = face(periodic_module)
    periodic(every=1, name="anywhere")(noop)
    fire_first_slot()
    schedules.run_now("anywhere")
    schedules.pause("anywhere")
    schedules.resume("anywhere")
    schedules.set_timing("anywhere", cron="* * * * *")
    schedules.reset_timing("anywhere")
    (state,) = schedules.states()
    assert state.timing.every == 1
    assert not state.edited
    assert TaskQueue().length(QUEUE) == 2
    assert Worker([QUEUE]).run(burst=True) == 2
    assert schedules.state("anywhere").run["outcome"] == "done"
