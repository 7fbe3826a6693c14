"""Task queues across processes: workers killed with SIGKILL lose no task, a task that
kills its worker ends in quarantine alone, workers run each task once, concurrent
schedulers enqueue each delayed task exactly once, and SIGTERM lets the current task
finish.

Completions are recorded by the tasks themselves in keys outside the queue's
keyspace (tests.tasks_helpers.DONE / RUNS), an independent check of the invariant.
"""

import os
import random
import signal
import time

import pytest
from django.test import override_settings

from redisparts_app.services.tasks import TaskQueue, Worker, enqueue
from tests.counting import command_calls
from tests.tasks_helpers import (
    DONE,
    ORDER,
    RUNS,
    record,
    slow_marked,
    start_scheduler,
    start_worker,
    stop,
    suicide,
    wait_until,
)

pytestmark = pytest.mark.slow


# Random kills on a loaded machine may hit the same task several times in a row; sending
# it to quarantine then is the poison rule's business (tested below), not lost work.
MANY_DELIVERIES = override_settings(REDISPARTS={"QUEUE_MAX_DELIVERIES": 1000})


def kill_workers_repeatedly(queues: list[str], kills: int) -> None:
    rng = random.Random(1234)
    for _ in range(kills):
        worker = start_worker(queues, lease=0.5, maintenance=0.2)
        time.sleep(rng.uniform(0.1, 0.35))
        assert stop(worker, signal.SIGKILL) == -signal.SIGKILL


def finish_with_a_healthy_worker(redis_client, queues: list[str], expected: set[str]) -> None:
    worker = start_worker(queues, lease=0.5, maintenance=0.2)
    try:
        assert wait_until(lambda: redis_client.scard(DONE) == len(expected), timeout=30)
    finally:
        assert stop(worker) == 0
    assert {label.decode() for label in redis_client.smembers(DONE)} == expected
    runs = {k.decode(): int(v) for k, v in redis_client.hgetall(RUNS).items()}
    assert set(runs) == expected
    assert all(count >= 1 for count in runs.values())
    counts = TaskQueue().counts()
    assert counts["inflight"] == counts["failed"] == counts["quarantine"] == 0
    assert sum(counts["queues"].values()) == 0


@MANY_DELIVERIES
def test_worker_killed_mid_task_repeatedly_loses_no_task(redis_client):
    expected = {f"t{n}" for n in range(100)}
    for n in range(100):
        record.enqueue(f"t{n}", pause=0.06)
    kill_workers_repeatedly(["default"], kills=20)
    # The kills interrupted the work: the healthy worker has tasks left to do.
    assert redis_client.scard(DONE) < len(expected)
    finish_with_a_healthy_worker(redis_client, ["default"], expected)


@MANY_DELIVERIES
def test_worker_on_three_priority_queues_killed_repeatedly_loses_no_task(redis_client):
    expected = set()
    for n in range(90):
        queue = ("high", "default", "low")[n % 3]
        enqueue("tests.record", args=[f"{queue}{n}"], kwargs={"pause": 0.06}, queue=queue)
        expected.add(f"{queue}{n}")
    kill_workers_repeatedly(["high", "default", "low"], kills=20)
    assert redis_client.scard(DONE) < len(expected)
    finish_with_a_healthy_worker(redis_client, ["high", "default", "low"], expected)


def test_task_that_kills_its_worker_ends_in_quarantine(redis_client):
    queue = TaskQueue()
    with override_settings(REDISPARTS={"QUEUE_MAX_DELIVERIES": 3}):
        task_id = suicide.enqueue("poison")
        record.enqueue("healthy")
        for _ in range(10):
            worker = start_worker(["default"], lease=0.5, maintenance=0.2)
            wait_until(lambda w=worker: not w.is_alive() or queue.quarantined(), timeout=20)
            if queue.quarantined():
                assert stop(worker) == 0
                break
            assert worker.exitcode == -signal.SIGKILL
    [quarantined] = queue.quarantined()
    assert quarantined.id == task_id
    assert quarantined.deliveries == 3
    assert int(redis_client.hget(RUNS, "poison")) == 3
    assert redis_client.sismember(DONE, "healthy")
    assert queue.counts()["inflight"] == 0


def test_two_schedulers_enqueue_each_delayed_task_exactly_once(redis_client):
    queue = TaskQueue()
    schedulers = [start_scheduler(max_wait=0.2) for _ in range(2)]
    try:
        expected = set()
        for n in range(200):
            record.enqueue_in(0.05 + (n % 20) * 0.05, f"d{n}")
            expected.add(f"d{n}")
        assert wait_until(lambda: queue.length("default") == 200, timeout=30)
        time.sleep(0.3)  # room for a duplicate push to show up
    finally:
        assert [stop(s) for s in schedulers] == [0, 0]
    assert queue.length("default") == 200
    assert queue.counts()["delayed"] == 0
    Worker(["default"]).run(burst=True)
    runs = {k.decode(): int(v) for k, v in redis_client.hgetall(RUNS).items()}
    assert runs == dict.fromkeys(expected, 1)


def test_sigterm_lets_the_current_task_finish(redis_client):
    slow_marked.enqueue("s", 1.5)
    record.enqueue("next")
    worker = start_worker(["default"], lease=5)
    try:
        assert wait_until(lambda: redis_client.lrange(ORDER, 0, -1) == [b"start:s"], timeout=20)
    finally:
        exitcode = stop(worker, signal.SIGTERM)
    assert exitcode == 0
    assert redis_client.lrange(ORDER, 0, -1) == [b"start:s", b"finish:s"]
    counts = TaskQueue().counts()
    assert counts["inflight"] == 0
    assert counts["queues"]["default"] == 1  # the next task was left for another worker


def test_three_workers_run_every_task_exactly_once_with_one_script_call_each(redis_client):
    expected = {f"b{n}" for n in range(600)}
    for label in sorted(expected):
        record.enqueue(label)
    claims_before = command_calls(redis_client, "evalsha", "eval")
    workers = [start_worker(["default"], lease=5, maintenance=5) for _ in range(3)]
    try:
        assert wait_until(lambda: redis_client.scard(DONE) == len(expected), timeout=60)
    finally:
        assert [stop(worker) for worker in workers] == [0, 0, 0]
    runs = {k.decode(): int(v) for k, v in redis_client.hgetall(RUNS).items()}
    assert runs == dict.fromkeys(expected, 1)  # no task was claimed by two workers
    # One script call per task records it and claims the next; a few more for the
    # heartbeats, the reaper and the claims that found the queue empty.
    scripts = command_calls(redis_client, "evalsha", "eval") - claims_before
    assert len(expected) <= scripts < len(expected) + 300
    assert TaskQueue().counts()["inflight"] == 0


@MANY_DELIVERIES
def test_workers_killed_mid_batch_lose_no_task(redis_client):
    expected = {f"k{n}" for n in range(1000)}
    for label in sorted(expected):
        record.enqueue(label, pause=0.005)
    kill_workers_repeatedly(["default"], kills=10)
    assert redis_client.scard(DONE) < len(expected)
    finish_with_a_healthy_worker(redis_client, ["default"], expected)


def test_task_that_kills_its_worker_mid_batch_alone_ends_in_quarantine(redis_client):
    queue = TaskQueue()
    healthy = {f"h{n}" for n in range(12)}
    with override_settings(REDISPARTS={"QUEUE_MAX_DELIVERIES": 3}):
        for n in range(12):
            record.enqueue(f"h{n}")
            if n == 5:  # mid-batch: a worker claims h0 alone, then h1.. in one batch
                task_id = suicide.enqueue("poison")
        for _ in range(10):
            worker = start_worker(["default"], lease=0.5, maintenance=0.2)
            wait_until(lambda w=worker: not w.is_alive() or queue.quarantined(), timeout=20)
            if queue.quarantined():
                assert wait_until(lambda: redis_client.scard(DONE) == len(healthy))
                assert stop(worker) == 0
                break
            assert worker.exitcode == -signal.SIGKILL
    [quarantined] = queue.quarantined()
    assert quarantined.id == task_id
    assert int(redis_client.hget(RUNS, "poison")) == 3
    # Its batch-mates ran (some twice: done but not yet acknowledged when it struck).
    assert {label.decode() for label in redis_client.smembers(DONE)} == healthy
    assert queue.counts()["inflight"] == 0


def test_idle_worker_gets_its_task_claimed_on_wake_with_no_round_trip_of_its_own(redis_client):
    """An idle worker's claim waits in the server behind its BLPOP: the enqueue that wakes
    it moves the task in flight under it even while its process is stopped."""
    worker = start_worker(["default"], lease=30, maintenance=30)
    try:
        # Idle: its heartbeat is recorded and it is blocked on the wake-up list.
        assert wait_until(
            lambda: (
                redis_client.execute_command("CLIENT", "LIST", "TYPE", "normal").count(b"cmd=blpop")
                == 1
            )
        )
        os.kill(worker.pid, signal.SIGSTOP)
        try:
            task_id = record.enqueue("woken")
            owners = TaskQueue().key("owners")
            assert wait_until(lambda: redis_client.hget(owners, task_id) is not None, timeout=10)
            assert not redis_client.sismember(DONE, "woken")  # claimed, not yet run
        finally:
            os.kill(worker.pid, signal.SIGCONT)
        assert wait_until(lambda: redis_client.sismember(DONE, "woken"))
    finally:
        assert stop(worker) == 0
    assert TaskQueue().counts()["inflight"] == 0
