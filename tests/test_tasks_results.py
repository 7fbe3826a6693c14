"""Results of tasks (services/tasks/results.py): the handle an enqueue returns, waiting
for it without polling on both faces, failures, expiry, progress, and the result written
in the same step as the task's acknowledgement, checked with worker processes; on a
single server and on a Redis Cluster."""

import asyncio
import datetime as dt
import json
import pickle
import signal
import threading
import time

import pytest
from django.core.management import call_command
from django.urls import reverse

from redisparts_app.connection import aclose_async_clients, get_redis
from redisparts_app.exceptions import InvalidTask, ResultTimeout, TaskExpired, TaskFailed
from redisparts_app.services.tasks import (
    Progress,
    Result,
    TaskQueue,
    Worker,
    enqueue,
    progress,
    task,
)
from redisparts_app.services.tasks.results import aprogress
from tests.counting import command_calls
from tests.processes import CONTEXT, run_in_processes
from tests.tasks_helpers import RUNS, stop, wait_until

pytestmark = pytest.mark.cluster

GO = "test:results:go"  # set by a test to let a waiting task end


@task(name="tests.results.add", max_retries=0)
def add(a: int, b: int) -> int:
    return a + b


@task(name="tests.results.boom", max_retries=0)
def boom(text: str) -> None:
    raise KeyError(text)


@task(name="tests.results.until_go", max_retries=0)
def until_go() -> str:
    progress(1, 2, "trying")
    if not get_redis().exists(GO):
        raise RuntimeError("not yet")
    return "went"


@task(name="tests.results.retried", max_retries=1)
def retried() -> str:
    progress(1, 2, "first try")
    if get_redis().incr("test:results:tries") == 1:
        raise RuntimeError("try again")
    return "second try"


@task(name="tests.results.hangs", max_retries=0, soft_time_limit=5, time_limit=0.5)
def hangs() -> None:
    progress(1, 10, "started")
    time.sleep(30)


@task(name="tests.results.quiet", result=False)
def quiet() -> int:
    return 1


@task(name="tests.results.counted", max_retries=0)
def counted(label: str, seconds: float = 0.0) -> str:
    get_redis().hincrby(RUNS, label, 1)
    time.sleep(seconds)
    return label


@task(name="tests.results.steps", max_retries=0)
def steps(total: int) -> str:
    progress(1, total, "first step")
    # Held here until the test has seen the progress.
    assert wait_until(lambda: get_redis().exists(GO), timeout=20)
    progress(total, total, "all done")
    return "finished"


@task(name="tests.results.async_steps", max_retries=0)
async def async_steps() -> str:
    await aprogress(2, 4, "halfway")
    return "async finished"


@task(name="tests.results.short_lived", expires=0.2, max_retries=0)
def short_lived(label: str) -> None:
    get_redis().hincrby(RUNS, label, 1)


def run_all() -> int:
    return Worker(["default"], block=0.1).run(burst=True)


def _burst_worker(delay: float = 0.0) -> None:
    time.sleep(delay)
    run_all()


def start_process(target, *args):
    process = CONTEXT.Process(target=target, args=args, daemon=True)
    process.start()
    return process


# -- the handle -------------------------------------------------------------------------


def test_enqueue_returns_a_result_that_is_the_task_id(redis_client):
    result = add.enqueue(1, 2)
    assert isinstance(result, Result)
    assert isinstance(result, str)
    assert result == result.id
    assert redis_client.hexists(TaskQueue().key("tasks"), result)
    assert json.loads(json.dumps({"id": result})) == {"id": str(result)}
    # Pickled as the plain id: it crosses to other processes without its client.
    assert type(pickle.loads(pickle.dumps(result))) is str  # noqa: S301 (our own bytes)
    assert isinstance(enqueue("tests.results.add", args=[1, 1]), Result)
    assert isinstance(add.enqueue_in(30, 1, 1), Result)
    assert result.state == "READY"


def test_get_returns_the_return_value_with_the_times_and_worker(redis_client, face):
    result = add.enqueue(2, 3)
    worker = Worker(["default"], worker_id="w-results")
    assert worker.run(burst=True) == 1
    assert face(result).get(timeout=1) == 5
    info = face(result).info()
    assert (info.state, info.return_value, info.worker, info.name) == (
        "SUCCESSFUL", 5, "w-results", "tests.results.add"
    )  # fmt: skip
    assert info.enqueued_at <= info.started_at <= info.finished_at <= time.time()
    ttl = redis_client.pttl(TaskQueue().result_key(result))
    assert 0 < ttl <= 86400 * 1000
    # The same TTL (the server's clock may round the two a millisecond apart).
    assert abs(redis_client.pttl(TaskQueue().done_key(result)) - ttl) < 1000


def test_a_failed_task_gives_its_error_type_message_and_traceback(redis_client, face):
    result = boom.enqueue("no such key")
    run_all()
    with pytest.raises(TaskFailed, match="KeyError") as caught:
        face(result).get(timeout=1)
    failure = caught.value
    assert failure.error_type == "builtins.KeyError"
    assert failure.error_message == "'no such key'"
    assert "raise KeyError(text)" in failure.traceback
    assert face(result).info().state == "FAILED"


def test_a_task_killed_at_its_hard_limit_is_recorded_failed_with_the_reason(redis_client):
    result = hangs.enqueue()
    Worker(["default"], pool="prefork", concurrency=1, block=0.1).run(burst=True)
    with pytest.raises(TaskFailed) as caught:
        result.get(timeout=1)
    assert caught.value.error_type == "TimeLimitExceeded"
    assert "hard time limit (0.5 s) exceeded" in caught.value.error_message
    assert result.info().started_at is not None


def test_a_requeued_failed_task_is_waited_for_again(redis_client):
    result = until_go.enqueue()
    run_all()
    with pytest.raises(TaskFailed, match="not yet"):
        result.get(timeout=1)
    assert result.progress == Progress(1, 2, "trying")  # kept in the final record
    redis_client.set(GO, 1)
    TaskQueue().requeue(result)
    # The failure is cleared: a waiter now waits for the new run.
    assert result.state == "READY"
    with pytest.raises(ResultTimeout):
        result.get(timeout=0.2)
    run_all()
    assert result.get(timeout=1) == "went"


def test_a_retry_clears_the_failed_trys_progress(redis_client):
    from redisparts_app.services.tasks import Scheduler

    result = retried.enqueue()
    Worker(["default"]).run(max_tasks=1)
    assert result.state == "READY"  # waiting for its retry, no stale RUNNING record
    assert result.progress is None
    redis_client.zadd(TaskQueue().key("delayed"), {result: 0})  # due now
    Scheduler().run(burst=True)
    run_all()
    assert result.get(timeout=1) == "second try"


def test_a_task_with_result_false_records_none_and_its_handle_says_so(redis_client):
    result = quiet.enqueue()
    run_all()
    assert not redis_client.exists(TaskQueue().result_key(result))
    assert result.state == "PENDING"
    with pytest.raises(InvalidTask, match="keeps no result"):
        result.get(timeout=1)


def test_a_task_id_used_again_waits_for_the_new_run(redis_client):
    first = add.enqueue_with(args=[1, 1], task_id="nightly-report")
    run_all()
    assert first.get(timeout=1) == 2
    again = add.enqueue_with(args=[2, 2], task_id="nightly-report")
    assert again == first
    assert again.state == "READY"  # not the first run's result
    with pytest.raises(ResultTimeout):
        again.get(timeout=0.2)
    run_all()
    assert again.get(timeout=1) == 4


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), "5", True])
def test_get_refuses_a_timeout_that_is_not_positive_seconds(redis_client, timeout):
    result = add.enqueue(1, 1)
    with pytest.raises(InvalidTask, match="timeout must be None or seconds > 0"):
        result.get(timeout=timeout)


def test_get_times_out_with_one_blocking_read_and_no_polling(redis_client):
    result = add.enqueue(1, 1)  # no worker runs
    before = command_calls(redis_client, "blmove", "get")
    started = time.monotonic()
    with pytest.raises(ResultTimeout, match="has not ended after 1s") as caught:
        result.get(timeout=1.0)
    assert 0.9 <= time.monotonic() - started < 3
    assert caught.value.state is None
    # One BLMOVE and one GET in one round trip, not a read every few milliseconds.
    assert command_calls(redis_client, "blmove", "get") - before == 2


def test_a_stray_token_without_a_finished_result_does_not_spin_the_waiter(redis_client):
    result = add.enqueue(1, 1)
    redis_client.rpush(TaskQueue().done_key(result), 1)  # never written so by the library
    before = command_calls(redis_client, "blmove")
    with pytest.raises(ResultTimeout):
        result.get(timeout=0.5)
    assert command_calls(redis_client, "blmove") - before <= 6


def test_get_wakes_when_the_task_ends_without_polling(redis_client):
    result = add.enqueue(20, 22)
    before = command_calls(redis_client, "blmove")
    worker = start_process(_burst_worker, 0.5)
    try:
        started = time.monotonic()
        assert result.get(timeout=20) == 42
        assert time.monotonic() - started >= 0.4
    finally:
        stop(worker)
    assert command_calls(redis_client, "blmove") - before == 1


def _wait_for(task_id: str) -> int:
    return TaskQueue().result(task_id).get(timeout=30)


def test_every_waiter_on_one_task_gets_its_result(redis_client):
    result = add.enqueue(40, 2)
    worker = start_process(_burst_worker, 1.0)
    try:
        assert run_in_processes(_wait_for, [(str(result),)] * 4) == [42] * 4
    finally:
        stop(worker)
    # Later waiters get it at once: the token stays.
    assert result.get(timeout=1) == 42


def test_fifty_coroutines_wait_on_one_task_and_all_wake(redis_client):
    result = add.enqueue(1, 2)

    async def many():
        try:
            return await asyncio.gather(*(result.aget(timeout=20) for _ in range(50)))
        finally:
            await aclose_async_clients()

    thread = threading.Timer(0.3, run_all)
    thread.start()
    try:
        assert asyncio.run(many()) == [3] * 50
    finally:
        thread.join()


# -- expiry -----------------------------------------------------------------------------


def test_expires_refuses_naive_datetimes_and_non_positive_seconds(redis_client):
    with pytest.raises(InvalidTask, match="aware datetime"):
        add.enqueue_with(args=[1, 1], expires=dt.datetime.now())
    for bad in (0, -5, "10", float("inf")):
        with pytest.raises(InvalidTask, match="expires must be seconds > 0"):
            add.enqueue_with(args=[1, 1], expires=bad)
    with pytest.raises(InvalidTask, match="expires"):
        task(name="tests.results.bad_expiry", expires=dt.datetime.now(dt.UTC))
    assert redis_client.hlen(TaskQueue().key("tasks")) == 0


def test_a_task_past_its_expiry_is_never_run_and_is_recorded_expired(redis_client, face):
    later = add.enqueue_with(args=[1, 1], expires=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    soon = face(counted).enqueue_with(args=["expired"], expires=0.2)
    default = short_lived.enqueue("by default")
    time.sleep(0.4)  # no worker was running meanwhile
    worker = start_process(_burst_worker)
    try:
        with pytest.raises(TaskExpired, match="never ran"):
            soon.get(timeout=20)
        with pytest.raises(TaskExpired):
            default.get(timeout=20)
        assert later.get(timeout=20) == 2
    finally:
        stop(worker)
    assert redis_client.hgetall(RUNS) == {}
    assert soon.info().state == "EXPIRED"
    counts = TaskQueue().counts()
    assert counts["inflight"] == counts["failed"] == sum(counts["queues"].values()) == 0


def test_rp_worker_counts_the_expired_tasks(redis_client, capsys):
    counted.enqueue_with(args=["late"], expires=0.1)
    time.sleep(0.2)
    call_command("rp_worker", "default", "--burst", "--json")
    report = json.loads(capsys.readouterr().out)
    assert (report["tasks"], report["expired"], report["done"]) == (1, 1, 0)
    assert redis_client.hgetall(RUNS) == {}


# -- progress ---------------------------------------------------------------------------


def test_progress_outside_a_task_is_refused():
    with pytest.raises(InvalidTask, match="inside a task a worker runs"):
        progress(1, 2)


def test_progress_is_readable_while_the_task_runs(redis_client):
    result = steps.enqueue(3)
    worker = start_process(_burst_worker)
    try:
        assert wait_until(lambda: result.progress is not None, timeout=20)
        info = result.info()
        assert info.state == "RUNNING"
        assert info.progress == Progress(1, 3, "first step")
        assert round(info.progress.percent) == 33
        assert info.worker
        assert info.started_at
        redis_client.set(GO, 1)
        assert result.get(timeout=20) == "finished"
    finally:
        stop(worker)
    assert result.progress == Progress(3, 3, "all done")


def test_an_async_task_reports_progress_with_aprogress(redis_client):
    result = async_steps.enqueue()
    run_all()
    assert result.get(timeout=1) == "async finished"
    assert result.progress == Progress(2, 4, "halfway")


@pytest.mark.parametrize(
    ("done", "total", "note"), [(3, 2, ""), (-1, 2, ""), (1, 0, ""), ("1", 2, ""), (1, 2, 5)]
)
def test_progress_refuses_impossible_figures(redis_client, done, total, note):
    from redisparts_app.services.tasks import results

    run = results.Running(TaskQueue(), {"id": "x", "name": "n", "queue": "q"}, "w", 0.0, True)
    with results.running(run), pytest.raises(InvalidTask, match="progress"):
        progress(done, total, note)


@pytest.mark.django_db
def test_the_admin_task_page_shows_a_live_progress_bar_then_the_result(redis_client, admin_client):
    result = steps.enqueue_with(args=[4], on_commit=False)  # the test runs in a transaction
    page_url = reverse("admin:redisparts_task", args=["default", result])
    worker = start_process(_burst_worker)
    try:
        assert wait_until(lambda: result.progress is not None, timeout=20)
        page = admin_client.get(page_url).content.decode()
        assert '<progress class="rp-progress" value="1" max="4">25%</progress>' in page
        assert "1 of 4 (25%): first step" in page
        assert "data-rp-live" in page  # refreshed while it runs
        redis_client.set(GO, 1)
        assert result.get(timeout=20) == "finished"
    finally:
        stop(worker)
    page = admin_client.get(page_url).content.decode()
    assert "SUCCESSFUL" in page
    assert "&quot;finished&quot;" in page
    assert "data-rp-live" not in page
    missing = admin_client.get(reverse("admin:redisparts_task", args=["default", "nope"]))
    assert missing.status_code == 404


# -- across processes -------------------------------------------------------------------


def _forever_worker(worker_id: str) -> None:
    Worker(["default"], block=0.2, lease=1.0, maintenance_interval=0.2, worker_id=worker_id).run()


@pytest.mark.slow
def test_a_result_outlives_the_worker_that_recorded_it(redis_client):
    first = start_process(_forever_worker, "first")
    try:
        result = add.enqueue(4, 4)
        assert result.get(timeout=20) == 8
    finally:
        assert stop(first) == 0
    second = start_process(_forever_worker, "second")
    try:
        assert TaskQueue().result(result).get(timeout=5) == 8
        assert add.enqueue(1, 1).get(timeout=20) == 2
    finally:
        assert stop(second) == 0
    assert TaskQueue().result(result).info().worker == "first"


@pytest.mark.slow
def test_a_worker_killed_mid_task_leaves_no_result_and_the_rerun_records_one(redis_client):
    result = counted.enqueue("killed", 1.5)
    first = start_process(_forever_worker, "killed-worker")
    try:
        assert wait_until(lambda: redis_client.hget(RUNS, "killed") == b"1", timeout=20)
        time.sleep(0.2)
    finally:
        assert stop(first, signal.SIGKILL) == -signal.SIGKILL
    # Killed while running: neither acknowledged nor any result.
    assert result.info().state == "RUNNING"
    assert not redis_client.exists(TaskQueue().result_key(result))
    second = start_process(_forever_worker, "second-worker")
    try:
        assert result.get(timeout=30) == "killed"
    finally:
        assert stop(second) == 0
    # Run again once (the runtime's bound: what was running), recorded once, by the rerun.
    assert redis_client.hget(RUNS, "killed") == b"2"
    info = result.info()
    assert (info.state, info.worker) == ("SUCCESSFUL", "second-worker")
    assert redis_client.lrange(TaskQueue().done_key(result), 0, -1) == [b"1"]
    assert TaskQueue().counts()["inflight"] == 0


def test_a_quarantined_task_reads_failed_and_wakes_its_waiters(redis_client, face):
    """Quarantined by the reaper (its worker died on its last delivery): terminal."""
    queue = TaskQueue()
    result = counted.enqueue("poison")
    assert queue.claim(["default"], "w-dead", 0.01, 1)  # a lease that ends at once
    time.sleep(0.05)
    assert queue.reap(max_deliveries=1)[1] == 1
    with pytest.raises(TaskFailed) as caught:
        face(result).get(timeout=1)
    assert caught.value.error_type == "Quarantined"
    assert "delivered 1 times without finishing" in caught.value.error_message
    assert face(result).info().state == "FAILED"
    # Requeued, it is waited for again, and its new run's result is the one kept.
    queue.requeue(result)
    assert result.state == "READY"
    run_all()
    assert result.get(timeout=1) == "poison"
