"""Periodic schedules across processes: several schedulers fire each slot exactly once,
also while schedulers are SIGKILLed at random moments and restarted.

Each run appends its slot to a file (tests.periodic_tasks.append_slot): runs are
counted outside Redis. The schedulers are forked processes; a burst worker runs what
they enqueued once they are stopped.
"""

import itertools
import random
import signal
import time

import pytest

from redisparts_app.services.tasks import Worker, periodic
from tests.periodic_tasks import QUEUE, append_slot, declared, slots_run
from tests.tasks_helpers import CONTEXT, stop

EVERY = 0.25


def _run_scheduler() -> None:
    from redisparts_app.services.tasks import Scheduler

    Scheduler(max_wait=0.2, reap=False).run()


def start_scheduler():
    process = CONTEXT.Process(target=_run_scheduler, daemon=True)
    process.start()
    return process


def check_each_slot_once(path: str) -> list[float]:
    """Run what was enqueued; assert every slot between the first and the last ran once."""
    Worker([QUEUE]).run(burst=True)
    slots = slots_run(path)
    assert len(slots) == len(set(slots)), "a slot fired twice"
    ordered = sorted(slots)
    steps = [round((b - a) / EVERY) for a, b in itertools.pairwise(ordered)]
    assert steps == [1] * len(steps), f"slots lost: gaps of {steps}"
    return slots


def test_three_schedulers_fire_each_slot_exactly_once(redis_client, tmp_path):
    path = str(tmp_path / "runs")
    with declared():
        periodic(every=EVERY, pass_slot=True, args=[path])(append_slot)
        schedulers = [start_scheduler() for _ in range(3)]
        try:
            time.sleep(3.0)
        finally:
            assert [stop(s) for s in schedulers] == [0, 0, 0]
        slots = check_each_slot_once(path)
    assert len(slots) >= 8


@pytest.mark.slow
def test_schedulers_killed_at_random_neither_lose_nor_repeat_a_slot(redis_client, tmp_path):
    path = str(tmp_path / "runs")
    rng = random.Random(41)
    with declared():
        periodic(every=EVERY, pass_slot=True, args=[path])(append_slot)
        schedulers = [start_scheduler() for _ in range(3)]
        try:
            deadline = time.monotonic() + 6.0
            kills = 0
            while time.monotonic() < deadline:
                time.sleep(rng.uniform(0.05, 0.3))
                victim = rng.randrange(len(schedulers))
                assert stop(schedulers[victim], signal.SIGKILL) == -signal.SIGKILL
                kills += 1
                schedulers[victim] = start_scheduler()
        finally:
            for scheduler in schedulers:
                stop(scheduler)
        slots = check_each_slot_once(path)
    assert kills >= 15
    assert len(slots) >= 18
