"""Limits held across every worker: ``@task(concurrency=N)`` and ``@task(rate_limit=...)``.

The claim itself is checked here in one process (several worker ids); the guarantee
across worker processes, with a count of the runs at once kept in a file outside
Redis, and a worker killed holding permits, in the tests marked slow.
"""

import json
import signal
import time

import pytest
from django.core.management import call_command

from redisparts_app.exceptions import InvalidTask
from redisparts_app.services.tasks import Cancel, Limit, TaskQueue, enqueue, limited_queues, task
from tests.counting import command_calls
from tests.tasks_helpers import limited, rated, start_runtime_worker, stop, wait_until

SERVED, LIMITS = ["@tests.limited", "limits"], {"@tests.limited": Limit(concurrency=2)}


def claim(queue: TaskQueue, worker: str, count: int = 5, done=(), lease: float = 30.0):
    return queue.claim_next(SERVED, worker, lease, count, done, limits=LIMITS)


def held(queue: TaskQueue) -> set[str]:
    return {member.decode() for member in queue.client.zrange(queue.permits_key(SERVED[0]), 0, -1)}


def test_a_limited_task_waits_in_its_own_queue_served_before_its_queue():
    result = limited.enqueue("a", "/dev/null")
    enqueue("tests.limited", args=["b", "/dev/null"], queue="default")  # by name: the same
    queue = TaskQueue()
    assert queue.length("@tests.limited") == 2
    assert queue.get(result.id).queue == "@tests.limited"
    assert limited_queues(["limits"]) == (SERVED, LIMITS)
    assert limited_queues(["default"]) == (["default"], {})
    # A worker of the limited queue alone keeps its limits.
    assert limited_queues(["@tests.limited"]) == (["@tests.limited"], LIMITS)


@pytest.mark.cluster
def test_claim_takes_a_limited_task_only_with_a_free_permit():
    queue = TaskQueue()
    for n in range(5):
        limited.enqueue(f"l{n}", "/dev/null")
    enqueue("tests.record", args=["free"], queue="limits")
    first, _ = claim(queue, "w1")
    # Two permits: two limited tasks, then the unlimited one behind them.
    assert [record["args"][0] for record, _ in first] == ["l0", "l1", "free"]
    assert claim(queue, "w2")[0] == []
    assert held(queue) == {first[0][0]["id"], first[1][0]["id"]}
    # A done task's permit is free for its worker's next claim, in the same call.
    again, lost = claim(queue, "w1", done=[first[0][0], first[2][0]])
    assert lost == []
    assert [record["args"][0] for record, _ in again] == ["l2"]
    assert held(queue) == {first[1][0]["id"], again[0][0]["id"]}
    # A permit whose task failed is free at the next claim, whoever makes it.
    assert queue.settle(first[1][0]["id"], "w1", "fail", {"reason": "x"})
    assert [record["args"][0] for record, _ in claim(queue, "w2")[0]] == ["l3"]
    assert len(held(queue)) == 2
    assert queue.length("@tests.limited") == 1


@pytest.mark.cluster
def test_a_reaped_task_gives_its_permit_back():
    queue = TaskQueue()
    for n in range(3):
        limited.enqueue(f"l{n}", "/dev/null")
    taken, _ = claim(queue, "dead", lease=0.001)
    assert len(taken) == 2
    assert wait_until(lambda: queue.reap()[0] == 2, timeout=5)
    # Back at the head of their queue, each taken again alone (a delivery before).
    again = [claim(queue, "w")[0] for _ in range(3)]
    assert sorted(jobs[0][0]["args"][0] for jobs in again[:2]) == ["l0", "l1"]
    assert [jobs[0][1] for jobs in again[:2]] == [2, 2]
    assert again[2] == []
    assert held(queue) == {taken[0][0]["id"], taken[1][0]["id"]}


def test_a_returned_permit_wakes_a_worker_for_a_waiting_task(redis_client):
    queue = TaskQueue()
    for n in range(3):
        limited.enqueue(f"l{n}", "/dev/null")
    redis_client.delete(queue.key("wake"))
    taken, _ = claim(queue, "w1")
    # Its worker stopping: the done task is recorded, nothing claimed.
    assert queue.claim_next(SERVED, "w1", 30, 0, [taken[0][0]], limits=LIMITS) == ([], [])
    assert redis_client.llen(queue.key("wake")) == 1
    assert [record["args"][0] for record, _ in claim(queue, "w2")[0]] == ["l2"]


@pytest.mark.cluster
def test_the_permits_held_and_the_waiting_tasks_show(capsys):
    queue = TaskQueue()
    assert queue.limits() == {}
    for n in range(3):
        limited.enqueue(f"l{n}", "/dev/null")
    taken, _ = claim(queue, "w1", count=1)
    limits = queue.limits()
    [permit] = limits["@tests.limited"].pop("held")
    assert permit["id"] == taken[0][0]["id"]
    assert limits == {
        "@tests.limited": {
            "task": "tests.limited", "concurrency": 2, "rate_limit": None, "started": None,
            "waiting": 2,
        }
    }  # fmt: skip
    # A permit whose task ended is free, and not shown, before the next claim drops it.
    assert queue.settle(taken[0][0]["id"], "w1", "done")
    assert queue.limits()["@tests.limited"]["held"] == []
    call_command("rp_queue", "stats", "--json")
    stats = json.loads(capsys.readouterr().out)
    assert stats["default"]["limits"]["@tests.limited"]["waiting"] == 2
    call_command("rp_queue", "stats")
    assert "@tests.limited 0 of 2 running, 2 waiting" in capsys.readouterr().out
    rated.enqueue("r", "/dev/null")
    queue.claim_next(
        ["@tests.rated"], "w1", 30, 1, limits={"@tests.rated": Limit(rate=10, window=1.0)}
    )
    assert queue.limits()["@tests.rated"]["started"] == 1
    call_command("rp_queue", "stats")
    assert "@tests.rated 1 started of 10/s, 0 waiting" in capsys.readouterr().out


@pytest.mark.cluster
def test_claim_takes_a_rate_limited_task_only_within_its_rate():
    queue = TaskQueue()
    served = ["@tests.rated", "rated"]
    assert limited_queues(["rated"]) == (served, {"@tests.rated": Limit(rate=10, window=1.0)})
    for n in range(5):
        rated.enqueue(f"r{n}", "/dev/null")
    enqueue("tests.record", args=["free"], queue="rated")
    limits = {"@tests.rated": Limit(rate=3, window=60.0)}
    first, _ = queue.claim_next(served, "w1", 30, 10, limits=limits)
    # Three starts in the window, then the unlimited task behind them.
    assert [record["args"][0] for record, _ in first] == ["r0", "r1", "r2", "free"]
    # Not more once they ended: the window counts starts, not runs at once.
    done = [record for record, _ in first]
    assert queue.claim_next(served, "w1", 30, 10, done, limits=limits) == ([], [])
    assert queue.length("@tests.rated") == 2
    # A window of 50 ms: the next starts once the first ones left it.
    short = {"@tests.rated": Limit(rate=3, window=0.05)}
    assert wait_until(lambda: queue.claim_next(served, "w2", 30, 10, limits=short)[0], timeout=5)


@pytest.mark.cluster
def test_a_task_with_both_limits_keeps_both():
    queue = TaskQueue()
    served = ["@tests.rated", "rated"]
    for n in range(5):
        rated.enqueue(f"r{n}", "/dev/null")
    limits = {"@tests.rated": Limit(concurrency=1, rate=2, window=60.0)}
    [(first, _)] = queue.claim_next(served, "w1", 30, 10, limits=limits)[0]
    [(second, _)] = queue.claim_next(served, "w1", 30, 10, [first], limits=limits)[0]
    assert queue.claim_next(served, "w1", 30, 10, [second], limits=limits)[0] == []
    assert queue.length("@tests.rated") == 3


def test_a_waiting_run_can_be_cancelled_and_a_held_one_comes_back_on_stop():
    queue = TaskQueue()
    runs = [limited.enqueue(f"l{n}", "/dev/null") for n in range(4)]
    taken, _ = claim(queue, "w1", count=2)
    assert runs[3].cancel() == Cancel.CANCELLED
    assert queue.length("@tests.limited") == 1
    # A worker stopping puts its unstarted runs back first in line: their permits are free.
    assert queue.release([record for record, _ in taken], "w1") == 2
    again, _ = claim(queue, "w2")
    assert [record["args"][0] for record, _ in again] == ["l0", "l1"]


@pytest.mark.parametrize("rate_limit", ["0/m", "10", "10/d", "1.5/s", "/m", 10, "-1/s"])
def test_rate_limit_must_be_a_count_per_second_minute_or_hour(rate_limit):
    with pytest.raises(InvalidTask, match="rate_limit"):
        task("tests.bad_rate", rate_limit=rate_limit)


@pytest.mark.parametrize("concurrency", [0, -1, 1.5, True, "2"])
def test_concurrency_must_be_a_whole_number_from_one(concurrency):
    with pytest.raises(InvalidTask, match="concurrency"):
        task("tests.bad_limit", concurrency=concurrency)


# -- across processes ---------------------------------------------------------------------


def runs(path) -> list[tuple[str, str, int]]:
    """The lines of the file the limited task writes: (start|end, label, runs at once)."""
    lines = [line.split(":") for line in path.read_text().split()]
    return [(kind, label, int(running)) for kind, label, running in lines]


@pytest.mark.slow
def test_three_workers_never_run_more_than_the_limit_at_once(tmp_path):
    path = tmp_path / "runs"
    path.touch()
    labels = [f"l{n}" for n in range(30)]
    for label in labels:
        limited.enqueue(label, str(path), 0.05)
    # Six slots in all, for a limit of two.
    workers = [start_runtime_worker(["limits"], pool="threads", concurrency=2) for _ in range(3)]
    try:
        assert wait_until(lambda: len(path.read_text().split()) == 60, timeout=60)
    finally:
        assert [stop(worker) for worker in workers] == [0, 0, 0]
    lines = runs(path)
    assert max(running for _, _, running in lines) == 2
    assert sorted(label for kind, label, _ in lines if kind == "start") == sorted(labels)
    assert sorted(label for kind, label, _ in lines if kind == "end") == sorted(labels)
    queue = TaskQueue()
    assert queue.counts()["inflight"] == 0
    assert held(queue) == set()


@pytest.mark.slow
def test_a_killed_worker_gives_its_permits_back_and_the_rest_run(tmp_path):
    path = tmp_path / "runs"
    path.touch()
    queue = TaskQueue()
    for n in range(2):
        limited.enqueue(f"long{n}", str(path), 2.0)
    for n in range(6):
        limited.enqueue(f"l{n}", str(path), 0.05)
    victim = start_runtime_worker(["limits"], pool="threads", concurrency=2, lease=1.0)
    assert wait_until(lambda: len(path.read_text().split()) == 2, timeout=30)
    assert len(held(queue)) == 2
    assert stop(victim, signal.SIGKILL) == -signal.SIGKILL
    # Four slots: a permit not held would show as more than four runs at once below.
    worker = start_runtime_worker(["limits"], pool="threads", concurrency=4, lease=1.0)
    try:
        # The permits come back once the dead worker's tasks are reaped, which then run
        # again (first in line), and the rest after them.
        assert wait_until(lambda: len(path.read_text().split()) == 2 + 16, timeout=60)
    finally:
        assert stop(worker) == 0
    lines = runs(path)
    started = sorted(label for kind, label, _ in lines if kind == "start")
    assert started == sorted(["long0", "long1"] * 2 + [f"l{n}" for n in range(6)])
    # The count outside Redis: the killed runs never ended, so it starts from two.
    assert max(running for _, _, running in lines) == 4
    assert held(queue) == set()
    assert queue.counts()["inflight"] == 0


@pytest.mark.slow
def test_runs_waiting_for_a_permit_hold_no_worker_in_a_loop(tmp_path, redis_admin):
    """While two long runs hold the permits, two idle workers make at most their usual
    claims (a poll every 0.05 s while a slot is free, the heartbeats, the reaper): a
    loop over the ten waiting runs would send thousands of calls a second."""
    path = tmp_path / "runs"
    path.touch()
    for n in range(2):
        limited.enqueue(f"long{n}", str(path), 3.0)
    for n in range(10):
        limited.enqueue(f"l{n}", str(path))
    workers = [start_runtime_worker(["limits"], pool="threads", concurrency=2) for _ in range(2)]
    try:
        assert wait_until(lambda: len(path.read_text().split()) == 2, timeout=30)
        before = command_calls(redis_admin, "evalsha", "evalsha_ro", "blpop")
        time.sleep(1.5)
        calls = command_calls(redis_admin, "evalsha", "evalsha_ro", "blpop") - before
        assert len(path.read_text().split()) == 2  # the waiting runs still wait
        assert calls < 150
        assert wait_until(lambda: len(path.read_text().split()) == 24, timeout=30)
    finally:
        assert [stop(worker) for worker in workers] == [0, 0]


@pytest.mark.slow
def test_three_workers_start_no_more_than_the_rate_in_any_window(tmp_path):
    """The rule: at most 10 claims in any window of 1 s of the server's clock. Starts are
    stamped in the task, after the claim by a delay of their own (up to ``SLACK``): so
    any 11 consecutive starts span at least 1 s less that delay."""
    path = tmp_path / "starts"
    path.touch()
    labels = [f"r{n}" for n in range(30)]
    for label in labels:
        rated.enqueue(label, str(path))
    workers = [start_runtime_worker(["rated"], pool="threads", concurrency=2) for _ in range(3)]
    try:
        assert wait_until(lambda: len(path.read_text().split()) == 30, timeout=60)
    finally:
        assert [stop(worker) for worker in workers] == [0, 0, 0]
    starts = [line.split(":") for line in path.read_text().split()]
    assert sorted(label for label, _ in starts) == sorted(labels)
    times = sorted(float(at) for _, at in starts)
    spans = [later - earlier for earlier, later in zip(times, times[10:], strict=False)]
    assert min(spans) >= 1.0 - SLACK


SLACK = 0.25  # seconds between a claim and its task's start, at most, on a busy machine
