"""Task queues in one process: FIFO and priority order, delays, retries, the failed
registry, quarantine listing, de-duplication, transactions and input validation."""

import json

import pytest
from django.core import mail
from django.db import transaction
from django.test import override_settings

from redisparts_app.connection import get_redis
from redisparts_app.exceptions import (
    InvalidKeyPart,
    InvalidTask,
    TaskNotFound,
    TaskNotReplicated,
)
from redisparts_app.keys import slot_of
from redisparts_app.services.tasks import (
    Scheduler,
    TaskQueue,
    Worker,
    enqueue,
    queue_groups,
    task,
)
from redisparts_app.services.tasks.worker import Backoff
from redisparts_app.testing import start_replica
from tests.counting import counting_like
from tests.tasks_helpers import (
    DONE,
    ORDER,
    RUNS,
    fails_until_flag,
    flaky,
    record,
    record_high,
    send_sold_email,
    start_scheduler,
    stop,
    wait_until,
)

pytestmark = pytest.mark.cluster


def labels(redis_client) -> list[str]:
    return [label.decode() for label in redis_client.lrange(ORDER, 0, -1)]


def test_tasks_run_in_fifo_order(redis_client):
    for n in range(20):
        record.enqueue(f"t{n}")
    assert Worker(["default"]).run(burst=True) == 20
    assert labels(redis_client) == [f"t{n}" for n in range(20)]
    assert TaskQueue().counts() == {
        "queues": {"default": 0}, "delayed": 0, "inflight": 0, "failed": 0, "quarantine": 0,
        "limits": {},
    }  # fmt: skip


def test_first_non_empty_queue_wins(redis_client):
    record.enqueue("low1")
    record_high.enqueue("high1")
    record.enqueue("low2")
    record_high.enqueue("high2")
    Worker(["high", "default"]).run(burst=True)
    assert labels(redis_client) == ["high1", "high2", "low1", "low2"]


def test_worker_only_takes_its_queues(redis_client):
    record.enqueue("low")
    record_high.enqueue("high")
    assert Worker(["high"]).run(burst=True) == 1
    assert labels(redis_client) == ["high"]
    assert TaskQueue().length("default") == 1


def test_max_tasks_stops_the_worker(redis_client):
    for n in range(5):
        record.enqueue(f"t{n}")
    assert Worker(["default"]).run(max_tasks=3) == 3
    assert TaskQueue().length("default") == 2


def test_queue_groups_lists_groups_that_hold_queues(redis_client):
    assert queue_groups() == []
    record.enqueue("a")
    enqueue("tests.record", args=["b"], group="mail", queue="outbox")
    enqueue("tests.record", args=["c"], group="Zoë's jobs", queue="q")
    assert queue_groups() == ["Zoë's jobs", "default", "mail"]
    assert TaskQueue("mail").queue_names() == ["outbox"]


def test_keys_of_a_group_share_one_cluster_slot():
    queue = TaskQueue("shop")
    keys = [queue.queue_key("a"), queue.queue_key("b"), queue.key("inflight"),
            queue.key("delayed"), queue.key("wake"), queue.result_key("x")]  # fmt: skip
    assert len({slot_of(key) for key in keys}) == 1


@pytest.mark.slow
def test_delayed_tasks_become_runnable_when_due(redis_client):
    """The book's scenario: delays 0, 0.5, 0, 1.5 s; two runnable at once, four by ~2 s."""
    queue = TaskQueue()
    ids = [record.enqueue_in(delay, f"d{delay}-{n}") for n, delay in enumerate((0, 0.5, 0, 1.5))]
    assert queue.length("default") == 2
    delayed = queue.delayed()
    assert [info.id for info in delayed] == [ids[1], ids[3]]
    assert delayed[0].due_at < delayed[1].due_at
    scheduler = start_scheduler()
    try:
        assert wait_until(lambda: queue.length("default") == 4, timeout=20)
    finally:
        assert stop(scheduler) == 0
    ready = [info.id for info in queue.peek("default")]
    assert ready == [ids[0], ids[2], ids[1], ids[3]]
    assert queue.delayed() == []


def test_scheduler_leaves_tasks_that_are_not_due(redis_client):
    queue = TaskQueue()
    record.enqueue_in(60, "later")
    scheduler = Scheduler()
    wait = scheduler.run_once()
    assert scheduler.moved == 0
    assert queue.length("default") == 0
    assert 0 < wait <= 1.0


def test_failing_task_is_retried_then_lands_in_failed_with_traceback(redis_client):
    queue = TaskQueue()
    with override_settings(REDISPARTS={"QUEUE_RETRY_DELAY": 0.01}):
        task_id = flaky.enqueue("x")
        worker = Worker(["default"])
        for _ in range(3):
            assert wait_until(lambda: queue.schedule()[0] or queue.length("default"), 10)
            assert worker.run(max_tasks=1) == 1
    assert int(redis_client.hget(RUNS, "x")) == 3  # first run + max_retries=2
    [failed] = queue.failed()
    assert failed.id == task_id
    assert failed.error == "RuntimeError: flaky x failed"
    assert "Traceback" in failed.traceback
    assert "raise RuntimeError" in failed.traceback
    assert failed.retries == 2
    assert failed.deliveries == 3
    assert failed.failed_at is not None
    assert queue.counts()["delayed"] == 0


def test_retry_waits_with_exponential_backoff(redis_client):
    queue = TaskQueue()
    with override_settings(REDISPARTS={"QUEUE_RETRY_DELAY": 100, "QUEUE_RETRY_MAX_DELAY": 150}):
        flaky.enqueue("x")
        Worker(["default"]).run(burst=True)
        [first] = queue.delayed()
        assert first.retries == 1
        assert 95 < first.due_at - first.enqueued_at < 110
        queue.client.zadd(queue.key("delayed"), {first.id: 0})  # make it due now
        queue.schedule()
        Worker(["default"]).run(burst=True)
        [second] = queue.delayed()
        assert second.retries == 2
        # 200 s capped at QUEUE_RETRY_MAX_DELAY.
        assert 140 < second.due_at - second.enqueued_at < 160


def test_requeue_from_failed_runs_the_task(redis_client):
    queue = TaskQueue()
    task_id = fails_until_flag.enqueue("f")
    Worker(["default"]).run(burst=True)
    [failed] = queue.failed()
    assert failed.error == "ValueError: flag not set"
    redis_client.set("test:tasks:flag", 1)
    queue.requeue(task_id)
    assert queue.failed() == []
    assert queue.get(task_id).retries == 0
    assert Worker(["default"]).run(burst=True) == 1
    assert redis_client.sismember(DONE, "f")
    with pytest.raises(TaskNotFound):
        queue.get(task_id)


def test_delete_removes_a_failed_task(redis_client):
    queue = TaskQueue()
    task_id = fails_until_flag.enqueue("f")
    Worker(["default"]).run(burst=True)
    queue.delete(task_id)
    assert queue.failed() == []
    with pytest.raises(TaskNotFound):
        queue.get(task_id)
    with pytest.raises(TaskNotFound):
        queue.delete(task_id)
    with pytest.raises(TaskNotFound):
        queue.requeue(task_id)
    assert not any(redis_client.hexists(queue.key(role), task_id)
                   for role in ("tasks", "errors", "deliveries"))  # fmt: skip


def test_delete_removes_a_queued_task(redis_client):
    queue = TaskQueue()
    keep = record.enqueue("keep")
    drop = record.enqueue("drop")
    queue.delete(drop)
    assert [info.id for info in queue.peek("default")] == [keep]
    Worker(["default"]).run(burst=True)
    assert labels(redis_client) == ["keep"]


def test_requeue_refuses_a_task_that_has_not_failed(redis_client):
    task_id = record.enqueue("queued")
    with pytest.raises(TaskNotFound, match="failed registry"):
        TaskQueue().requeue(task_id)
    assert TaskQueue().length("default") == 1


def test_unknown_task_name_lands_in_failed_with_the_reason(redis_client):
    queue = TaskQueue()
    task_id = enqueue("nobody.knows.me", args=[1], queue="default")
    assert Worker(["default"]).run(burst=True) == 1
    [failed] = queue.failed()
    assert failed.id == task_id
    assert failed.name == "nobody.knows.me"
    assert "unknown task name 'nobody.knows.me'" in failed.error


def test_duplicate_enqueue_with_a_dedup_key_runs_once(redis_client):
    first = record.enqueue_with(args=["once"], dedup_key="order-42")
    second = record.enqueue_with(args=["once"], dedup_key="order-42")
    other = record.enqueue_with(args=["other"], dedup_key="order-43")
    assert second == first
    assert other != first
    assert 0 < redis_client.pttl(TaskQueue().key("dedup", "order-42")) <= 3600 * 1000
    Worker(["default"]).run(burst=True)
    assert sorted(labels(redis_client)) == ["once", "other"]
    # Released when the task is done: the next order-42 is a new task.
    assert not redis_client.exists(TaskQueue().key("dedup", "order-42"))
    assert record.enqueue_with(args=["again"], dedup_key="order-42") != first


def test_dedup_key_is_kept_while_the_task_retries_and_released_when_it_fails(redis_client):
    with override_settings(REDISPARTS={"QUEUE_RETRY_DELAY": 0.01}):
        first = flaky.enqueue_with(args=["f"], dedup_key="pay-1")
        worker = Worker(["default"], maintenance_interval=0.01)
        worker.run(max_tasks=1)  # the first run fails: a retry, the key is kept
        assert flaky.enqueue_with(args=["f"], dedup_key="pay-1") == first
        while TaskQueue().counts()["failed"] == 0:
            worker.run(burst=True)
    assert not redis_client.exists(TaskQueue().key("dedup", "pay-1"))


def test_listings_page_through_ranges(redis_client):
    queue = TaskQueue()
    ids = [record.enqueue(f"t{n}") for n in range(7)]
    assert [i.id for i in queue.peek("default", 0, 3)] == ids[:3]
    assert [i.id for i in queue.peek("default", 3, 3)] == ids[3:6]
    assert [i.id for i in queue.peek("default", 6, 3)] == ids[6:]
    info = queue.peek("default", 0, 1)[0]
    assert (info.name, info.queue, info.args, info.kwargs) == ("tests.record", "default",
                                                              ["t0"], {})  # fmt: skip
    with pytest.raises(InvalidTask):
        queue.peek("default", -1, 3)
    with pytest.raises(InvalidTask):
        queue.failed(0, 0)


def test_inflight_lists_worker_lease_and_deliveries(redis_client):
    queue = TaskQueue()
    task_id = record.enqueue("held")
    record_, deliveries = queue.dequeue(["default"], "w-1", lease=30)
    assert (record_["id"], deliveries) == (task_id, 1)
    [held] = queue.inflight()
    assert (held.id, held.worker, held.deliveries) == (task_id, "w-1", 1)
    assert held.lease_until > held.enqueued_at + 25
    assert queue.extend(task_id, "w-1", 60)
    assert not queue.extend(task_id, "w-2", 60)
    assert queue.inflight()[0].lease_until > held.lease_until + 25


def test_expired_lease_is_reaped_back_to_the_head_of_its_queue(redis_client):
    queue = TaskQueue()
    first = record.enqueue("first")
    second = record.enqueue("second")
    queue.dequeue(["default"], "dead-worker", lease=0.001)
    assert wait_until(lambda: queue.reap()[0] == 1, timeout=5)
    assert [i.id for i in queue.peek("default")] == [first, second]
    # The dead worker can no longer record an outcome.
    assert not queue.settle(first, "dead-worker", "done")
    assert queue.get(first).deliveries == 1


def test_task_reaped_too_often_goes_to_quarantine(redis_client):
    queue = TaskQueue()
    task_id = record.enqueue("poison")
    for _ in range(3):
        queue.dequeue(["default"], "w", lease=0.001)
        assert wait_until(lambda: sum(queue.reap(max_deliveries=3)[:2]) == 1, timeout=5)
    [quarantined] = queue.quarantined()
    assert quarantined.id == task_id
    assert quarantined.deliveries == 3
    assert "delivered 3 times" in quarantined.error
    assert queue.length("default") == 0
    queue.requeue(task_id)
    assert queue.quarantined() == []
    assert queue.get(task_id).deliveries == 0
    Worker(["default"]).run(burst=True)
    assert labels(redis_client) == ["poison"]


def test_sold_email_task_sends_mail_through_django(redis_client):
    mail.outbox.clear()
    send_sold_email.enqueue("seller@example.com", "sword", 120, "bob")
    assert Worker(["email"]).run(burst=True) == 1
    [message] = mail.outbox
    assert message.subject == "Your sword sold"
    assert message.to == ["seller@example.com"]
    assert "bob bought your sword for 120" in message.body


@pytest.mark.django_db(transaction=True)
def test_enqueue_inside_a_rolled_back_transaction_never_runs(redis_client):
    def purchase() -> None:
        with transaction.atomic():
            record.enqueue("rolled-back")
            raise RuntimeError("purchase failed")

    with pytest.raises(RuntimeError, match="purchase failed"):
        purchase()
    assert TaskQueue().length("default") == 0
    assert Worker(["default"]).run(burst=True) == 0
    assert labels(redis_client) == []


@pytest.mark.django_db(transaction=True)
def test_enqueue_inside_a_committed_transaction_runs_after_commit(redis_client):
    with transaction.atomic():
        task_id = record.enqueue("committed")
        assert TaskQueue().length("default") == 0
    assert TaskQueue().get(task_id).name == "tests.record"
    Worker(["default"]).run(burst=True)
    assert labels(redis_client) == ["committed"]


@pytest.mark.django_db(transaction=True)
def test_on_commit_false_enqueues_at_once(redis_client):
    with transaction.atomic():
        record.enqueue_with(args=["now"], on_commit=False)
        assert TaskQueue().length("default") == 1


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: record.enqueue(object()), InvalidTask, "JSON-serialisable"),
        (lambda: record.enqueue(float("nan")), InvalidTask, "JSON-serialisable"),
        (lambda: record.enqueue("x" * 70000), InvalidTask, "QUEUE_MAX_ARGS_BYTES"),
        (lambda: record.enqueue_in(float("inf"), "x"), InvalidTask, "delay"),
        (lambda: record.enqueue_in("soon", "x"), InvalidTask, "delay"),
        (lambda: enqueue("bad:name"), InvalidKeyPart, "task name"),
        (lambda: enqueue(""), InvalidKeyPart, "task name"),
        (lambda: enqueue("ok", queue="q{1}"), InvalidKeyPart, "queue"),
        (lambda: enqueue("ok", queue="a\nb"), InvalidKeyPart, "queue"),
        (lambda: enqueue("ok", group="g*"), InvalidKeyPart, "queue group"),
        (lambda: enqueue("ok", args="abc"), InvalidTask, "list or tuple"),
        (lambda: enqueue("ok", kwargs={1: 2}), InvalidTask, "string keys"),
        (lambda: enqueue("ok", max_retries=-1), InvalidTask, "max_retries"),
        (lambda: record.enqueue_with(args=["x"], dedup_key="a:b"), InvalidKeyPart, "de-dup"),
        (lambda: record.enqueue_with(args=["x"], wait_replicas=-1), InvalidTask, "wait_replicas"),
        (lambda: record.enqueue_with(args=["x"], wait_replicas="1"), InvalidTask, "wait_repl"),
        (lambda: record.enqueue_with(args=["x"], wait_timeout=0), InvalidTask, "wait_timeout"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(redis_client, call, error, message):
    with pytest.raises(error, match=message):
        call()
    assert redis_client.dbsize() == 0


@pytest.mark.parametrize("setting", [False, -1, "1"])
def test_a_bad_replica_setting_is_refused_at_enqueue(redis_client, settings, setting):
    settings.REDISPARTS = {**settings.REDISPARTS, "QUEUE_WAIT_REPLICAS": setting}
    with pytest.raises(InvalidTask, match="wait_replicas"):
        record.enqueue("x")
    assert redis_client.dbsize() == 0


@pytest.mark.single_server  # servers of its own
def test_enqueue_with_wait_returns_once_a_replica_has_the_task(redis_server_factory, tmp_path):
    master = redis_server_factory()
    queue = TaskQueue(client=master.client())
    replica = start_replica(master, tmp_path / "replica")
    try:
        task_id = queue.enqueue("tests.record", args=["a"], wait_replicas=1, wait_timeout=30)
        # WAIT returned, so the replica already holds the task: no polling needed.
        assert replica.client().hexists(queue.key("tasks"), task_id)
    finally:
        replica.stop()
    assert wait_until(lambda: master.client().info("replication")["connected_slaves"] == 0, 30)
    with pytest.raises(TaskNotReplicated, match="0 of 1 replica") as refused:
        queue.enqueue("tests.record", args=["b"], wait_replicas=1, wait_timeout=0.1)
    # Not acknowledged, yet stored on the master: it runs unless a failover loses it.
    assert master.client().hexists(queue.key("tasks"), refused.value.task_id)
    assert queue.length("default") == 2


def test_enqueue_with_wait_counts_the_replicas_of_the_groups_node(redis_client, redis_backend):
    groups = ["shop", "mail", "jobs"]  # spread over the cluster's primaries
    for group in groups:
        queue = TaskQueue(group)
        if redis_backend == "server":  # the session's server has no replica
            with pytest.raises(TaskNotReplicated):
                queue.enqueue("tests.record", args=[group], wait_replicas=1, wait_timeout=0.1)
            continue
        # Each primary of the cluster has one replica: WAIT runs on the group's primary.
        task_id = queue.enqueue("tests.record", args=[group], wait_replicas=1, wait_timeout=30)
        assert queue.get(task_id).args == [group]


def test_worker_refuses_bad_queue_lists():
    with pytest.raises(InvalidTask):
        Worker([])
    with pytest.raises(InvalidTask):
        Worker("default")
    with pytest.raises(InvalidTask, match="repeat"):
        Worker(["a", "a"])
    with pytest.raises(InvalidKeyPart):
        Worker(["a:b"])
    with pytest.raises(InvalidTask, match="lease"):
        Worker(["a"], lease=0)


def test_task_record_is_plain_json(redis_client):
    task_id = record.enqueue("json", pause=0)
    body = json.loads(redis_client.hget(TaskQueue().key("tasks"), task_id))
    assert body["name"] == "tests.record"
    assert body["args"] == ["json"]
    assert body["kwargs"] == {"pause": 0}


def test_system_check_reports_bad_queue_settings():
    from redisparts_app.checks import check_settings

    def queue_errors() -> list[str]:
        return [e.msg for e in check_settings() if "QUEUE_" in e.msg]

    assert queue_errors() == []
    bad = {"QUEUE_LEASE": -1, "QUEUE_MAX_RETRIES": 1.5, "QUEUE_RETRY_DELAY": float("nan"),
           "QUEUE_RESULT_TTL": float("inf"), "QUEUE_GROUP": "a:b"}  # fmt: skip
    with override_settings(REDISPARTS=bad):
        messages = queue_errors()
    assert len(messages) == 5
    for name in bad:
        assert any(name in message for message in messages), name


def test_queue_groups_of_several_slots(redis_client):
    client = redis_client
    groups = ["shop", "mail", "jobs"]  # spread over the masters' slots
    assert len({slot_of(TaskQueue(g).key("tasks")) for g in groups}) == len(groups)
    for group in groups:
        queue = TaskQueue(group, client=client)
        queue.enqueue("tests.record", args=[f"{group}-low"], queue="low")
        queue.enqueue("tests.record", args=[f"{group}-high"], queue="high")
        later = queue.enqueue("tests.record", args=[f"{group}-later"], queue="low", delay=0.05)
        first = queue.enqueue(
            "tests.fails_until_flag", args=["f"], queue="low", dedup_key="k", max_retries=0
        )
        assert queue.enqueue("tests.record", args=["dup"], queue="low", dedup_key="k") == first
        assert wait_until(lambda q=queue: q.schedule()[0] == 1, timeout=5)
        assert queue.peek("low", 0, 10)[-1].id == later
        assert Worker(["high", "low"], group=group, client=client).run(burst=True) == 4
        assert [i.id for i in queue.failed()] == [first]
        queue.delete(first)
        queue.enqueue("tests.record", args=[f"{group}-held"], queue="low")
        queue.dequeue(["low"], "dead", lease=0.001)
        assert wait_until(lambda q=queue: q.reap()[0] == 1, timeout=5)
        assert Worker(["low"], group=group, client=client).run(burst=True) == 1
        assert queue.counts() == {"queues": {"high": 0, "low": 0}, "delayed": 0,
                                  "inflight": 0, "failed": 0, "quarantine": 0,
                                  "limits": {}}  # fmt: skip
    order = labels(redis_client)
    for group in groups:
        mine = [label for label in order if label.startswith(group)]
        assert mine == [f"{group}-high", f"{group}-low", f"{group}-later", f"{group}-held"]


def test_backoff_doubles_up_to_its_cap_and_starts_over_after_a_reset():
    backoff = Backoff(first=0.5, most=30.0)
    assert [backoff.next() for _ in range(9)] == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    backoff.reset()
    assert backoff.next() == 0.5


# -- batches: claim, acknowledge, extend and release many tasks at once --------------------


def test_claim_takes_up_to_count_tasks_highest_priority_first(redis_client):
    queue = TaskQueue()
    high = [record_high.enqueue(f"h{n}") for n in range(2)]
    default = [record.enqueue(f"d{n}") for n in range(5)]
    claimed = queue.claim(["high", "default"], "w-1", lease=30, count=4)
    assert [task["id"] for task, _ in claimed] == high + default[:2]
    assert [deliveries for _, deliveries in claimed] == [1, 1, 1, 1]
    assert {info.id for info in queue.inflight()} == set(high + default[:2])
    assert {info.worker for info in queue.inflight()} == {"w-1"}
    assert [info.id for info in queue.peek("default")] == default[2:]
    # A wake-up token per task still ready: idle workers are not woken for taken ones.
    assert redis_client.llen(queue.key("wake")) == 3
    assert len(queue.claim(["high", "default"], "w-2", lease=30, count=10)) == 3
    assert redis_client.llen(queue.key("wake")) == 0
    assert queue.claim(["high", "default"], "w-2", lease=30, count=10) == []


def test_claim_takes_a_task_delivered_before_alone(redis_client):
    queue = TaskQueue()
    first, suspect, last = (record.enqueue(label) for label in ("first", "suspect", "last"))
    queue.claim(["default"], "w-1", lease=30, count=1)
    queue.claim(["default"], "dead", lease=0.001, count=1)  # suspect: its worker dies
    assert wait_until(lambda: queue.reap()[0] == 1, timeout=5)
    assert [info.id for info in queue.peek("default")] == [suspect, last]
    # Delivered before: never batched with others, so its deaths are counted on it alone.
    [(task, deliveries)] = queue.claim(["default"], "w-2", lease=30, count=10)
    assert (task["id"], deliveries) == (suspect, 2)
    [(task, deliveries)] = queue.claim(["default"], "w-2", lease=30, count=10)
    assert (task["id"], deliveries) == (last, 1)
    assert queue.acknowledge([first], "w-1") == []


def test_batch_after_a_fresh_task_stops_before_a_task_delivered_before(redis_client):
    queue = TaskQueue()
    suspect = record.enqueue("suspect")
    queue.claim(["default"], "dead", lease=0.001, count=1)
    assert wait_until(lambda: queue.reap()[0] == 1, timeout=5)
    fresh = record.enqueue("fresh")
    redis_client.lmove(queue.queue_key("default"), queue.queue_key("default"), "RIGHT", "LEFT")
    assert [info.id for info in queue.peek("default")] == [fresh, suspect]
    claimed = queue.claim(["default"], "w", lease=30, count=10)
    assert [task["id"] for task, _ in claimed] == [fresh]
    assert [info.id for info in queue.peek("default")] == [suspect]


def test_acknowledge_records_only_tasks_still_held(redis_client):
    queue = TaskQueue()
    ids = [record.enqueue(f"t{n}") for n in range(3)]
    queue.claim(["default"], "w-1", lease=30, count=2)
    queue.claim(["default"], "w-2", lease=30, count=1)
    assert queue.acknowledge(ids, "w-1") == [ids[2]]
    assert [info.id for info in queue.inflight()] == [ids[2]]
    with pytest.raises(TaskNotFound):
        queue.get(ids[0])
    assert queue.acknowledge([ids[2]], "w-2") == []
    assert queue.counts()["inflight"] == 0


def test_extend_all_pushes_every_held_lease_and_names_the_lost(redis_client):
    queue = TaskQueue()
    ids = [record.enqueue(f"t{n}") for n in range(3)]
    queue.claim(["default"], "w-1", lease=10, count=3)
    before = {info.id: info.lease_until for info in queue.inflight()}
    queue.acknowledge([ids[1]], "w-1")
    assert queue.extend_all(ids, "w-1", 60) == [ids[1]]
    after = {info.id: info.lease_until for info in queue.inflight()}
    assert set(after) == {ids[0], ids[2]}
    assert all(after[task_id] > before[task_id] + 45 for task_id in after)
    assert queue.extend_all(ids, "w-2", 60) == ids


def test_release_puts_unstarted_tasks_back_in_order_uncounted(redis_client):
    queue = TaskQueue()
    ids = [record.enqueue(f"t{n}") for n in range(4)]
    claimed = queue.claim(["default"], "w-1", lease=30, count=3)
    released = [task for task, _ in claimed[1:]]
    assert queue.release(released, "w-2") == 0  # not its tasks
    assert queue.release(released, "w-1") == 2
    assert [info.id for info in queue.peek("default")] == ids[1:]
    assert [info.deliveries for info in queue.peek("default")] == [0, 0, 0]
    assert [info.id for info in queue.inflight()] == [ids[0]]
    # Released tasks are fresh again: they may be claimed in a batch.
    assert len(queue.claim(["default"], "w-2", lease=30, count=3)) == 3


def test_worker_records_each_task_in_the_call_that_claims_the_next(redis_client):
    for n in range(300):
        record.enqueue(f"t{n}")
    counting = counting_like(redis_client)
    assert Worker(["default"], client=counting).run(burst=True) == 300
    scripts = counting.commands.count("EVALSHA") + counting.commands.count("EVAL")
    # One script call per task (record the last, claim the next), not two; a few more
    # for heartbeats and maintenance.
    assert 300 <= scripts < 330
    assert sorted(labels(redis_client)) == sorted(f"t{n}" for n in range(300))
    assert TaskQueue().counts()["inflight"] == 0


@task(name="tests.count_inflight", queue="default", max_retries=0)
def count_inflight(label: str) -> None:
    get_redis().rpush("test:tasks:inflight", TaskQueue().counts()["inflight"])
    record.func(label)


def test_worker_holds_no_unstarted_task_unless_asked_to_prefetch(redis_client):
    for n in range(6):
        count_inflight.enqueue(f"t{n}")
    assert Worker(["default"]).run(burst=True, max_tasks=3) == 3
    assert redis_client.lrange("test:tasks:inflight", 0, -1) == [b"1"] * 3
    redis_client.delete("test:tasks:inflight")
    assert Worker(["default"], prefetch=2).run(burst=True) == 3
    # The running task plus two claimed ahead, then fewer as the queue runs dry.
    assert redis_client.lrange("test:tasks:inflight", 0, -1) == [b"3", b"2", b"1"]
    for wrong in (-1, 501, True, 2.0):
        with pytest.raises(InvalidTask, match="prefetch must"):
            Worker(["default"], prefetch=wrong)


def test_a_delay_at_or_below_zero_runs_now(redis_client):
    record.enqueue_in(-1.5, "late")
    record.enqueue_in(0, "now")
    assert TaskQueue().counts()["delayed"] == 0
    assert Worker(["default"]).run(burst=True) == 2
    assert labels(redis_client) == ["late", "now"]


STOPPING: list[Worker] = []


@task(name="tests.stop_worker", queue="default", max_retries=0)
def stop_worker(label: str) -> None:
    record.func(label)
    STOPPING[0].stop()


def test_stopping_worker_puts_its_unstarted_tasks_back(redis_client):
    queue = TaskQueue()
    ids = [record.enqueue("t0"), record.enqueue("t1"), stop_worker.enqueue("stop")]
    ids += [record.enqueue(f"t{n}") for n in range(3, 8)]
    worker = Worker(["default"])
    STOPPING[:] = [worker]
    assert worker.run() == 3
    assert labels(redis_client) == ["t0", "t1", "stop"]
    # The rest went back at the head of the queue, in order, their delivery not counted.
    assert [info.id for info in queue.peek("default")] == ids[3:]
    assert {info.deliveries for info in queue.peek("default")} == {0}
    assert queue.counts()["inflight"] == 0
    assert Worker(["default"]).run(burst=True) == 5
    assert labels(redis_client)[3:] == [f"t{n}" for n in range(3, 8)]


def test_task_record_keeps_names_with_quotes_and_accents(redis_client):
    queue = TaskQueue()
    name, queue_name = 'odd "name" é\u00e8', 'q "x"'
    task_id = queue.enqueue(name, args=['a"b', 1.5, None], kwargs={"k": "é"}, queue=queue_name)
    info = queue.get(task_id)
    assert (info.name, info.queue, info.args, info.kwargs) == (
        name,
        queue_name,
        ['a"b', 1.5, None],
        {"k": "é"},
    )
    assert Worker([queue_name]).run(burst=True) == 1
    [failed] = queue.failed()
    assert failed.name == name
    assert "unknown task name" in failed.error
