"""rp_worker and rp_scheduler: options, exit conditions, bad options, and a worker that
rides out a Redis outage."""

import signal
import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from redisparts_app.connection import get_redis
from redisparts_app.services.tasks import TaskQueue, Worker
from tests.processes import CONTEXT
from tests.tasks_helpers import DONE, ORDER, record, slow_marked, stop, wait_until


def run(command: str, *args, **options) -> str:
    out = StringIO()
    call_command(command, *args, stdout=out, stderr=StringIO(), **options)
    return out.getvalue()


def test_burst_runs_every_queued_task_then_exits(redis_client):
    for n in range(3):
        record.enqueue(f"t{n}")
    output = run("rp_worker", "default", "--burst", "--import", "tests.tasks_helpers")
    assert "Ran 3 task(s)." in output
    assert redis_client.lrange(ORDER, 0, -1) == [b"t0", b"t1", b"t2"]


def test_prefetch_runs_tasks_one_by_one_in_order(redis_client):
    for n in range(3):
        record.enqueue(f"t{n}")
    assert "Ran 3 task(s)." in run("rp_worker", "default", "--burst", "--prefetch", "2")
    assert redis_client.lrange(ORDER, 0, -1) == [b"t0", b"t1", b"t2"]


def test_max_tasks_exits_after_that_many(redis_client):
    for n in range(5):
        record.enqueue(f"t{n}")
    assert "Ran 2 task(s)." in run("rp_worker", "default", "--max-tasks", "2")
    assert TaskQueue().length("default") == 3


def test_queues_are_taken_in_the_order_given(redis_client):
    record.enqueue("first")
    record.enqueue("second")
    TaskQueue().enqueue("tests.record", args=["urgent"], queue="urgent")
    run("rp_worker", "urgent", "default", "--burst")
    assert redis_client.lrange(ORDER, 0, -1) == [b"urgent", b"first", b"second"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-tasks", "0"], "--max-tasks must be at least 1"),
        (["--max-tasks", "-3"], "--max-tasks must be at least 1"),
        (["--max-tasks", "many"], "invalid int value"),
        (["bad:queue", "--burst"], "invalid queue"),
        (["a", "a", "--burst"], "repeat"),
        (["--lease", "0", "--burst"], "lease"),
        (["--lease", "nan", "--burst"], "lease"),
        (["--prefetch", "-1", "--burst"], "prefetch must be a whole number"),
        (["--prefetch", "501", "--burst"], "prefetch must be at most 500"),
        (["--concurrency", "0", "--burst"], "concurrency must be a whole number"),
        (["--pool", "solo", "--concurrency", "2", "--burst"], "solo pool runs one task"),
        (["--time-limit", "0", "--burst"], "time_limit must be None or a number"),
        (["--soft-time-limit", "-1", "--burst"], "soft_time_limit must be"),
        (["--group", "g{1}", "--burst"], "queue group"),
        (["--import", "no.such.module", "--burst"], "cannot import 'no.such.module'"),
    ],
)
def test_bad_worker_options_give_a_command_error(redis_client, args, message):
    record.enqueue("untouched")
    with pytest.raises(CommandError, match=message):
        run("rp_worker", *args)
    assert TaskQueue().length("default") == 1


def test_scheduler_once_moves_due_tasks(redis_client):
    record.enqueue_in(0.01, "soon")
    record.enqueue_in(600, "later")
    assert wait_until(lambda: TaskQueue().delayed()[0].due_at < time.time() - 0.05, timeout=5)
    output = run("rp_scheduler", "--once")
    assert "Moved 1 delayed task(s)" in output
    assert TaskQueue().length("default") == 1
    assert len(TaskQueue().delayed()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-wait", "0"], "max_wait"),
        (["--max-wait", "-1"], "max_wait"),
        (["--group", "a*b"], "queue group"),
    ],
)
def test_bad_scheduler_options_give_a_command_error(args, message):
    with pytest.raises(CommandError, match=message):
        run("rp_scheduler", "--once", *args)


def _worker_on(url: str) -> None:
    with override_settings(REDISPARTS={"CONNECTIONS": {"default": {"URL": url}}}):
        Worker(["default"], block=0.2).run()


@pytest.mark.slow
def test_worker_waits_out_a_redis_outage_and_resumes(redis_server_factory):
    server = redis_server_factory()
    with override_settings(REDISPARTS={"CONNECTIONS": {"default": {"URL": server.url}}}):
        record.enqueue("before")
        worker = CONTEXT.Process(target=_worker_on, args=(server.url,), daemon=True)
        worker.start()
        try:
            assert wait_until(lambda: get_redis().sismember(DONE, "before"), timeout=20)
            server.kill()
            time.sleep(1.5)  # the worker meets the outage and backs off
            assert worker.is_alive()
            server.start()  # same port, empty data
            record.enqueue("after")
            assert wait_until(lambda: get_redis().sismember(DONE, "after"), timeout=30)
        finally:
            assert stop(worker, signal.SIGTERM, timeout=40) == 0


def _command(*args: str) -> None:
    call_command(*args, stdout=StringIO(), stderr=StringIO())


@pytest.mark.slow
def test_commands_stop_cleanly_on_sigterm_and_sigint(redis_client):
    slow_marked.enqueue("c", 1.0)
    worker = CONTEXT.Process(target=_command, args=("rp_worker", "default"), daemon=True)
    scheduler = CONTEXT.Process(target=_command, args=("rp_scheduler",), daemon=True)
    worker.start()
    scheduler.start()
    assert wait_until(lambda: redis_client.lrange(ORDER, 0, -1) == [b"start:c"], timeout=20)
    assert stop(worker, signal.SIGINT) == 0
    assert stop(scheduler, signal.SIGTERM) == 0
    assert redis_client.lrange(ORDER, 0, -1) == [b"start:c", b"finish:c"]
