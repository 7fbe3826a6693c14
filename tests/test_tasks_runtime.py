"""The worker runtime across processes: one acknowledgement per task under repeated SIGKILL,
no hoarding, dead workers found in seconds without stealing from live ones, soft and hard
time limits, concurrency in threads and child processes, async tasks, SIGTERM draining,
and database connections renewed around tasks.

Runs are recorded by the tasks themselves in keys outside the queue's keyspace
(tests.tasks_helpers), an independent check of the queue's bookkeeping.
"""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.test import override_settings

from redisparts_app.services.tasks import TaskQueue, Worker
from tests.tasks_helpers import (
    DONE,
    ORDER,
    RUNS,
    SEEN,
    async_record,
    db_break,
    db_count,
    ignores_soft_limit,
    meet,
    record,
    sleeps,
    slow_marked,
    start_runtime_worker,
    stop,
    wait_until,
)

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent


def order(client) -> list[str]:
    return [entry.decode() for entry in client.lrange(ORDER, 0, -1)]


def runs(client) -> dict[str, int]:
    return {key.decode(): int(value) for key, value in client.hgetall(RUNS).items()}


# -- acknowledgement per task -------------------------------------------------------------


@pytest.mark.parametrize(("pool", "concurrency"), [("solo", 1), ("prefork", 2)])
@override_settings(REDISPARTS={"QUEUE_WORKER_TIMEOUT": 1.0, "QUEUE_MAX_DELIVERIES": 1000})
def test_sigkills_rerun_at_most_the_tasks_running_and_lose_none(redis_client, pool, concurrency):
    expected = {f"k{n}" for n in range(400)}
    for label in sorted(expected):
        record.enqueue(label, 0.005)
    rng = random.Random(15)
    kills = 20
    for _ in range(kills):
        worker = start_runtime_worker(["default"], pool=pool, concurrency=concurrency)
        time.sleep(rng.uniform(0.15, 0.4))
        assert stop(worker, signal.SIGKILL) == -signal.SIGKILL
    time.sleep(1.0)  # the orphaned prefork children notice within 0.5 s
    worker = start_runtime_worker(["default"], pool=pool, concurrency=concurrency)
    try:
        assert wait_until(lambda: redis_client.scard(DONE) == len(expected), timeout=90)
    finally:
        assert stop(worker) == 0
    counted = runs(redis_client)
    assert set(counted) == expected  # nothing lost
    reruns = sum(count - 1 for count in counted.values())
    # At most the tasks running (or ended, not yet recorded) at each kill.
    assert reruns <= kills * concurrency, reruns
    assert TaskQueue().counts()["inflight"] == 0


# -- no hoarding ---------------------------------------------------------------------------


def test_an_idle_worker_takes_the_next_task_while_another_runs_a_slow_one(redis_client):
    slow_marked.enqueue("slow", 2.0)
    for n in range(10):
        record.enqueue(f"fast{n}")
    workers = [start_runtime_worker(["default"]) for _ in range(2)]
    try:
        assert wait_until(lambda: "finish:slow" in order(redis_client), timeout=30)
    finally:
        assert [stop(worker) for worker in workers] == [0, 0]
    seen = order(redis_client)
    # Every fast task ran while the slow one did: none waited behind it in a batch.
    assert seen.index("finish:slow") == len(seen) - 1
    assert {label for label in seen if label.startswith("fast")} == {f"fast{n}" for n in range(10)}


# -- dead workers and live ones ------------------------------------------------------------


def test_a_dead_workers_task_runs_elsewhere_within_five_seconds(redis_client):
    sleeps.enqueue("long", 30.0)  # the default 60 s lease: only the heartbeat can tell
    doomed = start_runtime_worker(["default"])
    assert wait_until(lambda: order(redis_client) == ["start:long"], timeout=20)
    survivor = start_runtime_worker(["default"])
    time.sleep(0.5)
    killed_at = time.monotonic()
    assert stop(doomed, signal.SIGKILL) == -signal.SIGKILL
    try:
        assert wait_until(lambda: order(redis_client).count("start:long") == 2, timeout=15)
        recovered = time.monotonic() - killed_at
    finally:
        stop(survivor, signal.SIGKILL)
    assert recovered <= 5.0, recovered  # heartbeat timeout (3 s) plus a reaper pass


def test_a_live_task_running_ten_leases_is_never_taken_from_its_worker(redis_client):
    slow_marked.enqueue("long", 5.0)
    workers = [start_runtime_worker(["default"], lease=0.5, maintenance_interval=0.1)]
    assert wait_until(lambda: order(redis_client) == ["start:long"], timeout=20)
    workers.append(start_runtime_worker(["default"], lease=0.5, maintenance_interval=0.1))
    try:
        assert wait_until(lambda: "finish:long" in order(redis_client), timeout=20)
    finally:
        assert [stop(worker) for worker in workers] == [0, 0]
    assert order(redis_client) == ["start:long", "finish:long"]
    assert TaskQueue().counts()["inflight"] == 0


# -- time limits -----------------------------------------------------------------------------


@pytest.mark.parametrize("pool", ["solo", "threads", "prefork"])
def test_soft_time_limit_fails_the_task_and_the_worker_goes_on(redis_client, pool):
    sleeps.enqueue("stuck", 30.0)
    record.enqueue("after")
    worker = Worker(["default"], pool=pool, concurrency=1, soft_time_limit=0.5)
    assert worker.run(burst=True) == 2
    [failed] = TaskQueue().failed()
    assert failed.name == "tests.sleeps"
    assert failed.error.startswith("SoftTimeLimitExceeded")
    assert order(redis_client) == ["start:stuck", "after"]


def test_hard_time_limit_kills_a_task_that_ignores_the_soft_one(redis_client):
    ignores_soft_limit.enqueue("stubborn")
    record.enqueue("after")
    worker = Worker(["default"], pool="prefork", concurrency=1, soft_time_limit=0.3, time_limit=1.5)
    started = time.monotonic()
    assert worker.run(burst=True) == 2
    assert time.monotonic() - started < 10  # not the task's 10**6 s
    [failed] = TaskQueue().failed()
    assert failed.name == "tests.ignores_soft_limit"
    assert "hard time limit (1.5 s) exceeded" in failed.error
    # The soft limit reached the task; the hard one ended its C-level sleep; a new
    # child ran the next task.
    assert order(redis_client) == ["start:stubborn", "soft:stubborn", "after"]


# -- concurrency and async tasks -------------------------------------------------------------


@pytest.mark.parametrize("pool", ["threads", "prefork"])
def test_concurrency_n_runs_n_tasks_at_once(redis_client, pool):
    for n in range(3):
        meet.enqueue(f"m{n}", 3)
    assert Worker(["default"], pool=pool, concurrency=3).run(burst=True) == 3
    seen = sorted(entry.decode() for entry in redis_client.lrange(SEEN, 0, -1))
    assert seen == ["m0:3", "m1:3", "m2:3"]


@pytest.mark.parametrize(("pool", "concurrency"), [("solo", 1), ("threads", 2), ("prefork", 2)])
def test_async_tasks_run_on_an_event_loop(redis_client, pool, concurrency):
    for n in range(4):
        async_record.enqueue(f"a{n}")
    assert Worker(["default"], pool=pool, concurrency=concurrency).run(burst=True) == 4
    assert redis_client.smembers(DONE) == {f"async:a{n}".encode() for n in range(4)}
    assert TaskQueue().counts()["failed"] == 0


# -- SIGTERM drains ----------------------------------------------------------------------------


def test_sigterm_finishes_running_tasks_and_gives_back_the_prefetched(redis_client):
    slow_marked.enqueue("s", 1.5)
    record.enqueue("next1")
    record.enqueue("next2")
    worker = start_runtime_worker(["default"], pool="prefork", prefetch=2)
    try:
        assert wait_until(lambda: order(redis_client) == ["start:s"], timeout=20)
        assert TaskQueue().counts()["inflight"] == 3  # the running one and two prefetched
    finally:
        exitcode = stop(worker, signal.SIGTERM)
    assert exitcode == 0
    assert order(redis_client) == ["start:s", "finish:s"]
    counts = TaskQueue().counts()
    assert counts["inflight"] == 0
    assert counts["queues"]["default"] == 2  # back at the head, in order, for another worker
    assert [info.args[0] for info in TaskQueue().peek("default")] == ["next1", "next2"]


# -- database connections ----------------------------------------------------------------------


@pytest.mark.parametrize("hygiene", [True, False])
def test_a_database_connection_closed_under_the_worker_is_renewed(redis_url, tmp_path, hygiene):
    db_count.enqueue("before")
    db_break.enqueue("broken")
    db_count.enqueue("after")
    code = (
        "import django; django.setup()\n"
        "from django.core.management import call_command\n"
        "call_command('migrate', verbosity=0)\n"
        "import tests.tasks_helpers\n"
        "from redisparts_app.services.tasks import Worker\n"
        "from redisparts_app.services.tasks import pool\n"
        "from django.db import close_old_connections\n"
        f"if not {hygiene}:\n"
        "    pool.task_started.disconnect(close_old_connections)\n"
        "    pool.task_finished.disconnect(close_old_connections)\n"
        "Worker(['default']).run(burst=True)\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.stale_db_settings",
        "RP_DB": str(tmp_path / "db.sqlite3"),
        "RP_REDIS": redis_url,
    }
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    seen = order(TaskQueue().client)
    if hygiene:
        assert seen == ["before:0", "broken", "after:0"]
        assert TaskQueue().counts()["failed"] == 0
    else:  # the control: without it the next task fails on the dead connection
        assert seen == ["before:0", "broken"]
        [failed] = TaskQueue().failed()
        assert failed.name == "tests.db_count"
