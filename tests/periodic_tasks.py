"""Tasks and helpers of the periodic schedule tests: each run appends its slot to a file,
so runs are counted outside Redis."""

from collections.abc import Iterator
from contextlib import contextmanager

from redisparts_app.services.tasks import schedules as periodic_module
from redisparts_app.services.tasks import task
from redisparts_app.services.tasks.schedules import _schedules
from tests.fault_tasks import record_run, runs

QUEUE = "periodic"


@task(name="tests.periodic.append_slot", queue=QUEUE, max_retries=0)
def append_slot(path: str, slot: float) -> None:
    record_run(path, repr(slot))  # one O_APPEND write, as the fault tests count runs


@task(name="tests.periodic.noop", queue=QUEUE, max_retries=0)
def noop() -> None:
    pass


@task(name="tests.periodic.boom", queue=QUEUE, max_retries=0)
def boom() -> None:
    raise RuntimeError("boom")


def slots_run(path: str) -> list[float]:
    """The slots of the runs recorded so far, in order (a repeat is a duplicate)."""
    return [float(token) for token in runs(path)]


@contextmanager
def declared() -> Iterator[None]:
    """Forget the schedules declared inside this block when it ends."""
    before = dict(_schedules)
    try:
        yield
    finally:
        _schedules.clear()
        _schedules.update(before)


__all__ = ["QUEUE", "append_slot", "boom", "declared", "noop", "periodic_module", "slots_run"]
