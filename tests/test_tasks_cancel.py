"""Cancellation of tasks (TaskQueue.cancel, Result.cancel, aborted()): a waiting task
never runs and is recorded CANCELLED; a running one is asked to stop, then ended by its
pool after the grace; a cancel racing the workers' claims has one winner, checked with
processes against a file outside Redis; the admin's Cancel, one and in bulk; on a
single server and on a Redis Cluster."""

import random
import threading
import time
from pathlib import Path

import pytest
from django.urls import reverse

from redisparts_app.connection import get_redis
from redisparts_app.exceptions import InvalidKeyPart, InvalidTask, TaskCancelled
from redisparts_app.services.tasks import (
    Cancel,
    Scheduler,
    TaskQueue,
    Worker,
    aborted,
    acancel,
    cancel,
    task,
)
from tests.processes import CONTEXT, run_in_processes
from tests.tasks_helpers import RUNS, stop, wait_until

pytestmark = pytest.mark.cluster

STARTED = "test:cancel:started"  # set of labels of tasks that started
LOG = "RP_CANCEL_LOG"  # the kwarg naming the file the race's tasks append to


@task(name="tests.cancel.counted", max_retries=0)
def counted(label: str) -> str:
    get_redis().hincrby(RUNS, label, 1)
    return label


@task(name="tests.cancel.flaky", max_retries=1)
def flaky(label: str) -> None:
    get_redis().hincrby(RUNS, label, 1)
    raise RuntimeError("first try fails")


@task(name="tests.cancel.polite", max_retries=3)
def polite(label: str) -> str:
    """Stops as soon as it is asked to (at most 30 s)."""
    get_redis().sadd(STARTED, label)
    deadline = time.monotonic() + 30
    while not aborted() and time.monotonic() < deadline:
        time.sleep(0.02)
    return "stopped" if aborted() else "ran out"


@task(name="tests.cancel.async_polite", max_retries=0)
async def async_polite(label: str) -> str:
    """``polite`` as an ``async def`` task: aborted() reads the same flag on its loop."""
    import asyncio

    get_redis().sadd(STARTED, label)
    deadline = time.monotonic() + 30
    while not aborted() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return "stopped" if aborted() else "ran out"


@task(name="tests.cancel.stubborn", max_retries=3)
def stubborn(label: str) -> str:
    """Never asks: its pool must end it (small sleeps, so an asynchronous exception lands)."""
    get_redis().hincrby(RUNS, label, 1)
    get_redis().sadd(STARTED, label)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(0.02)
    return "ran out"


@task(name="tests.cancel.append", max_retries=0)
def append(path: str, label: str) -> None:
    """The race's task: records its run in a file, outside Redis, unless cancelled."""
    time.sleep(0.002)
    if aborted():
        return
    with open(path, "a", encoding="utf-8") as log:
        log.write(label + "\n")


def run_all() -> int:
    return Worker(["default"], block=0.1).run(burst=True)


def _worker(pool: str, concurrency: int) -> int:
    """Runs until stopped (SIGTERM)."""
    return Worker(["default"], block=0.1, pool=pool, concurrency=concurrency).run()


@pytest.fixture
def fast_beat(settings):
    settings.REDISPARTS = {
        **getattr(settings, "REDISPARTS", {}), "QUEUE_HEARTBEAT": 0.1, "QUEUE_CANCEL_GRACE": 30.0,
    }  # fmt: skip
    return settings


# -- waiting tasks -------------------------------------------------------------------


def test_a_ready_task_cancelled_never_runs_and_its_waiter_wakes(redis_client, face):
    result = counted.enqueue("ready")
    woken: list[BaseException] = []

    def wait() -> None:
        try:
            result.get(timeout=20)
        except TaskCancelled as exc:
            woken.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)  # the waiter is blocked on done:<id>
    assert face(result).cancel() == Cancel.CANCELLED
    waiter.join(20)
    assert len(woken) == 1
    assert "it never ran" in str(woken[0])
    info = result.info()
    assert (info.state, info.name, info.started_at, info.worker) == (
        "CANCELLED", "tests.cancel.counted", None, None
    )  # fmt: skip
    assert info.finished_at is not None
    assert run_all() == 0
    assert redis_client.hget(RUNS, "ready") is None
    queue = TaskQueue()
    assert queue.length("default") == 0
    assert not redis_client.hexists(queue.key("tasks"), result)
    # Cancelled again, or after: it is over.
    assert face(result).cancel() == Cancel.FINISHED


def test_a_delayed_task_cancelled_is_never_moved_nor_run(redis_client, face):
    result = counted.enqueue_in(30, "delayed")
    assert face(TaskQueue()).cancel(result) == "cancelled"  # a str enum
    redis_client.zadd(TaskQueue().key("delayed"), {"someone-else": 0})
    Scheduler().run(burst=True)
    assert run_all() == 0
    assert redis_client.hget(RUNS, "delayed") is None
    with pytest.raises(TaskCancelled):
        face(result).get(timeout=1)


def test_a_task_waiting_for_its_retry_cancelled_never_runs_again(redis_client, settings):
    settings.REDISPARTS = {**getattr(settings, "REDISPARTS", {}), "QUEUE_RETRY_DELAY": 30.0}
    result = flaky.enqueue("retried")
    assert run_all() == 1
    assert result.state == "READY"  # in the delayed set, for its retry
    assert cancel(result) == Cancel.CANCELLED
    redis_client.zadd(TaskQueue().key("delayed"), {result: 0})  # due now, were it there
    Scheduler().run(burst=True)
    assert run_all() == 0
    assert redis_client.hget(RUNS, "retried") == b"1"
    assert result.state == "CANCELLED"


def test_cancel_says_finished_or_unknown_and_refuses_bad_ids(redis_client, face):
    done = counted.enqueue("done")
    run_all()
    assert face(done).cancel() == Cancel.FINISHED
    assert done.get(timeout=1) == "done"  # untouched
    assert face(TaskQueue()).cancel("no-such-task") == Cancel.UNKNOWN
    with pytest.raises(InvalidKeyPart):
        TaskQueue().cancel("bad{id}")


def test_a_cancelled_task_releases_its_dedup_key(redis_client):
    first = TaskQueue().enqueue("tests.cancel.counted", args=["a"], dedup_key="once")
    assert TaskQueue().enqueue("tests.cancel.counted", args=["b"], dedup_key="once") == first
    assert cancel(first) == Cancel.CANCELLED
    second = TaskQueue().enqueue("tests.cancel.counted", args=["c"], dedup_key="once")
    assert second != first
    assert run_all() == 1
    assert redis_client.hget(RUNS, "c") == b"1"


def test_the_module_level_async_cancel(redis_client):
    import asyncio

    from redisparts_app.connection import aclose_async_clients

    result = counted.enqueue("async")

    async def go() -> Cancel:
        try:
            return await acancel(result)
        finally:
            await aclose_async_clients()

    assert asyncio.run(go()) == Cancel.CANCELLED
    assert result.state == "CANCELLED"


def test_aborted_outside_a_task_is_refused():
    with pytest.raises(InvalidTask, match="inside a task"):
        aborted()


# -- running tasks -------------------------------------------------------------------


POOLS = [("solo", 1), ("threads", 2), ("prefork", 2)]


@pytest.mark.parametrize(
    ("pool", "concurrency", "polite_task"),
    [*((*p, polite) for p in POOLS), ("solo", 1, async_polite)],
)
def test_a_running_task_asked_to_stop_stops_and_is_recorded_cancelled(
    redis_client, fast_beat, pool, concurrency, polite_task
):
    result = polite_task.enqueue(pool)
    worker = CONTEXT.Process(target=_worker, args=(pool, concurrency))  # prefork forks
    worker.start()
    try:
        assert wait_until(lambda: redis_client.sismember(STARTED, pool))
        assert result.state == "RUNNING"
        assert cancel(result) == Cancel.ABORTING
        assert cancel(result) == Cancel.ABORTING  # asked again: the same answer
        with pytest.raises(TaskCancelled, match="aborted while running"):
            result.get(timeout=20)
    finally:
        stop(worker)
    info = result.info()
    assert info.state == "CANCELLED"
    assert info.return_value == "stopped"  # it stopped on its own, before the grace
    assert info.started_at is not None
    assert info.error_type is None
    queue = TaskQueue()
    assert not redis_client.hexists(queue.key("tasks"), result)  # not retried
    assert not redis_client.exists(queue.abort_key(result))


@pytest.mark.parametrize(("pool", "concurrency"), POOLS)
def test_a_running_task_that_ignores_the_cancel_is_ended_after_the_grace(
    redis_client, settings, pool, concurrency
):
    settings.REDISPARTS = {
        **getattr(settings, "REDISPARTS", {}), "QUEUE_HEARTBEAT": 0.1, "QUEUE_CANCEL_GRACE": 0.5,
    }  # fmt: skip
    result = stubborn.enqueue(pool)
    worker = CONTEXT.Process(target=_worker, args=(pool, concurrency))  # prefork forks
    worker.start()
    try:
        assert wait_until(lambda: redis_client.sismember(STARTED, pool))
        assert cancel(result) == Cancel.ABORTING
        with pytest.raises(TaskCancelled):
            result.get(timeout=20)
        # The worker goes on: a task enqueued now runs.
        assert counted.enqueue(f"after-{pool}").get(timeout=20) == f"after-{pool}"
    finally:
        stop(worker)
    info = result.info()
    assert info.state == "CANCELLED"
    assert info.error_type.endswith("TaskAborted")
    assert redis_client.hget(RUNS, pool) == b"1"  # ended, and not retried (max_retries=3)
    assert not redis_client.hexists(TaskQueue().key("tasks"), result)


def test_a_claimed_task_cancelled_before_it_starts_is_not_run(redis_client):
    """Prefetched (held by the worker, not started): the abort flag is set as it starts."""
    from redisparts_app.services.tasks.pool import SoloPool

    queue = TaskQueue()
    result = counted.enqueue("held")
    ((record, _),) = queue.claim(["default"], "w-held", 30, 1)
    assert cancel(result) == Cancel.ABORTING
    _lost, aborting = queue.beat("w-held", [result], 30)
    assert aborting == [result]
    pool = SoloPool(1, "w-held", queue, None, None)
    pool.abort(result)
    pool.submit(record)
    (outcome,) = pool.wait(0)
    assert outcome.outcome == "cancelled"
    assert queue.settle(result, "w-held", outcome.outcome, result=outcome.result)
    assert redis_client.hget(RUNS, "held") is None
    assert result.info().started_at is None
    with pytest.raises(TaskCancelled, match="it never ran"):
        result.get(timeout=1)


def test_a_task_whose_worker_died_while_aborting_it_is_not_run_again(redis_client):
    queue = TaskQueue()
    result = counted.enqueue("orphan")
    assert queue.claim(["default"], "w-dead", 0.01, 1)  # a lease that ends at once
    assert cancel(result) == Cancel.ABORTING
    time.sleep(0.05)
    assert queue.reap()[0] == 1  # back in its queue, delivered once
    assert Worker(["default"]).run(max_tasks=1) == 1
    assert redis_client.hget(RUNS, "orphan") is None
    with pytest.raises(TaskCancelled, match="it never ran"):
        result.get(timeout=1)


def test_a_retry_of_a_task_marked_for_abort_is_recorded_cancelled(redis_client):
    """The task failed before its worker's heartbeat saw the cancel: not retried."""
    queue = TaskQueue()
    result = flaky.enqueue("marked")
    ((record, _),) = queue.claim(["default"], "w-marked", 30, 1)
    assert cancel(result) == Cancel.ABORTING
    from redisparts_app.services.tasks.pool import run_task

    outcome = run_task(record, "w-marked", queue)
    assert outcome.outcome == "retry"
    assert outcome.cancelled
    assert queue.settle(
        result, "w-marked", "retry", outcome.payload, 30, result=None, cancelled=outcome.cancelled
    )
    assert not redis_client.zscore(queue.key("delayed"), result)
    info = result.info()
    assert info.state == "CANCELLED"
    assert info.error_message == "first try fails"


# -- the race ------------------------------------------------------------------------


def _canceller(ids: list[str], seed: int, log: Path) -> dict[str, str]:
    # Once the workers run tasks (the file grows): both sides then take some.
    assert wait_until(lambda: log.stat().st_size > 0, timeout=60, interval=0.001)
    order = list(ids)
    random.Random(seed).shuffle(order)
    queue = TaskQueue()
    said = {}
    for task_id in order:
        said[task_id] = str(queue.cancel(task_id))
    return said


def _race_worker(pool: str) -> int:
    return Worker(["default"], block=0.05, pool=pool, concurrency=2 if pool != "solo" else 1).run(
        burst=True
    )


def test_cancels_racing_two_workers_each_task_ran_once_or_was_cancelled(
    redis_client, tmp_path: Path
):
    log = tmp_path / "ran.txt"
    log.touch()
    ids = [str(append.enqueue(str(log), f"t{n}")) for n in range(300)]
    labels = {task_id: f"t{n}" for n, task_id in enumerate(ids)}
    # Two workers and a canceller at once, each in its own process.
    outcomes = run_in_processes(
        lambda kind, *args: _canceller(*args) if kind == "cancel" else _race_worker(*args),
        [("worker", "solo"), ("worker", "threads"), ("cancel", ids, 7, log)],
    )
    said = outcomes[2]
    ran = log.read_text(encoding="utf-8").split()
    assert len(ran) == len(set(ran)), "a task ran twice"
    ran_set = set(ran)
    states = {task_id: TaskQueue().result(task_id).state for task_id in ids}
    violations = [
        task_id
        for task_id in ids
        if (states[task_id] == "SUCCESSFUL") != (labels[task_id] in ran_set)
        or states[task_id] not in ("SUCCESSFUL", "CANCELLED")
        or (said[task_id] == "cancelled" and states[task_id] != "CANCELLED")
    ]
    assert violations == []
    cancelled = sum(state == "CANCELLED" for state in states.values())
    assert cancelled + len(ran) == len(ids)
    # Both sides won some: the race was a race.
    assert 0 < cancelled < len(ids), (cancelled, len(ran))
    assert TaskQueue().counts()["inflight"] == 0


# -- the admin (rp_queue cancel: test_queue_command.py) ----------------------------------


def test_the_admin_cancels_one_task_and_in_bulk(redis_client, admin_client):
    # on_commit=False: the test runs in a transaction (the admin's database)
    one = counted.enqueue_with(args=["one"], on_commit=False)
    page_url = reverse("admin:redisparts_task", args=("default", one))
    bulk_url = reverse("admin:redisparts_task_bulk", args=("default",))
    # The page's Cancel asks on the bulk action's page, as its Delete does, no confirm box.
    page = admin_client.get(page_url).content.decode()
    form = page[page.index(f'action="{bulk_url}"') :]
    form = form[: form.index("</form>")]
    assert 'name="action" value="cancel"' in form
    assert f'name="ids" value="{one}"' in form
    assert f'name="next" value="{page_url}"' in form
    assert "confirm(" not in page
    asked = admin_client.post(bulk_url, {"action": "cancel", "ids": one, "next": page_url})
    assert "Yes, cancel 1 task" in asked.content.decode()
    assert one.state == "READY"
    cancel_url = reverse("admin:redisparts_task_cancel", args=("default", one))
    assert admin_client.get(cancel_url).status_code == 405
    # Back to the task's page, which shows what was done and its state, and no Cancel.
    page = admin_client.post(cancel_url, {"next": page_url}, follow=True)
    assert page.redirect_chain[-1][0] == page_url
    assert f"Task {one} cancelled: it will not run." in page.content.decode()
    assert one.state == "CANCELLED"
    assert "CANCELLED" in page.content.decode()
    assert 'value="cancel"' not in page.content.decode()
    # A running task (held by a worker): asked to stop, and its page says so.
    held = counted.enqueue_with(args=["held"], on_commit=False)
    assert TaskQueue().claim(["default"], "w-admin", 30, 1)
    held_url = reverse("admin:redisparts_task", args=("default", held))
    page = admin_client.post(
        reverse("admin:redisparts_task_cancel", args=("default", held)),
        {"next": held_url},
        follow=True,
    ).content.decode()
    assert f"Task {held} is running: asked to stop" in page
    assert "(cancelled: asked to stop)" in page
    assert held.info().aborting
    many = [counted.enqueue_with(args=[f"bulk{n}"], on_commit=False) for n in range(3)]
    peek = admin_client.get(reverse("admin:redisparts_peek", args=("default", "default")))
    assert 'value="cancel"' in peek.content.decode()
    ask = admin_client.post(bulk_url, {"action": "cancel", "ids": many})
    assert ask.status_code == 200
    assert "will not run" in ask.content.decode()
    done = admin_client.post(
        bulk_url, {"action": "cancel", "ids": [*many, "gone"], "confirmed": "yes"}, follow=True
    )
    assert "3 tasks cancelled" in done.content.decode()
    assert {task.state for task in many} == {"CANCELLED"}
    assert run_all() == 0
