"""The task queue's enqueue on both faces: ``TaskQueue.aenqueue``, ``Task.aenqueue``,
``aenqueue_in``, ``aenqueue_with`` and the module's ``aenqueue`` share the sync enqueue's
checks, record and script (one prepared push); a worker runs what either face enqueued."""

import asyncio
import json

import pytest

from redisparts_app.connection import aclose_async_clients
from redisparts_app.exceptions import InvalidKeyPart, InvalidTask, TaskNotReplicated
from redisparts_app.services import tasks
from redisparts_app.services.tasks import TaskQueue, Worker
from tests.tasks_helpers import ORDER, record

pytestmark = pytest.mark.cluster


def labels(redis_client) -> list[str]:
    return [label.decode() for label in redis_client.lrange(ORDER, 0, -1)]


def test_enqueued_tasks_run_in_fifo_order(redis_client, face):
    for n in range(10):
        face(record).enqueue(f"t{n}")
    assert Worker(["default"]).run(burst=True) == 10
    assert labels(redis_client) == [f"t{n}" for n in range(10)]


def test_the_record_is_the_sync_faces_record(redis_client, face):
    task_id = face(TaskQueue()).enqueue("tests.record", args=["json"], kwargs={"pause": 0})
    body = json.loads(redis_client.hget(TaskQueue().key("tasks"), task_id))
    assert set(body) == {
        "id", "name", "queue", "retries", "max_retries", "enqueued_at", "ready_at", "kind",
        "args", "kwargs",
    }  # fmt: skip
    assert (body["id"], body["name"], body["queue"], body["kind"]) == (
        task_id,
        "tests.record",
        "default",
        "task",
    )
    assert (body["args"], body["kwargs"]) == (["json"], {"pause": 0})


def test_a_delayed_task_waits_in_the_delayed_set(redis_client, face):
    face(record).enqueue_in(3600, "later")
    counts = TaskQueue().counts()
    assert (counts["delayed"], counts["queues"]) == (1, {"default": 0})


def test_a_dedup_key_keeps_one_task(redis_client, face):
    first = face(record).enqueue_with(args=["once"], dedup_key="order-42")
    assert record.enqueue_with(args=["once"], dedup_key="order-42") == first  # either face
    assert face(record).enqueue_with(args=["once"], dedup_key="order-42") == first
    assert Worker(["default"]).run(burst=True) == 1
    assert labels(redis_client) == ["once"]


def test_the_modules_enqueue_takes_a_group(redis_client, face):
    task_id = face(tasks).enqueue("tests.record", group="shop", args=["g"])
    assert TaskQueue("shop").get(task_id).args == ["g"]
    assert "shop" in tasks.queue_groups()


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"name": "bad:name"}, InvalidKeyPart, "task name"),
        ({"queue": "q{1}"}, InvalidKeyPart, "queue"),
        ({"args": "abc"}, InvalidTask, "list or tuple"),
        ({"args": ["x" * 70000]}, InvalidTask, "QUEUE_MAX_ARGS_BYTES"),
        ({"kwargs": {1: 2}}, InvalidTask, "string keys"),
        ({"delay": float("inf")}, InvalidTask, "delay"),
        ({"max_retries": -1}, InvalidTask, "max_retries"),
        ({"dedup_key": "a:b"}, InvalidKeyPart, "de-dup"),
        ({"wait_replicas": -1}, InvalidTask, "wait_replicas"),
        ({"wait_timeout": 0}, InvalidTask, "wait_timeout"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(
    redis_client, face, options, error, message
):
    options = {"name": "tests.record", **options}
    with pytest.raises(error, match=message):
        face(TaskQueue()).enqueue(options.pop("name"), **options)
    assert redis_client.dbsize() == 0


def test_wait_replicas_counts_the_replicas_of_the_groups_node(redis_client, redis_backend, face):
    for group in ["shop", "mail", "jobs"]:  # spread over the cluster's primaries
        queue = face(TaskQueue(group))
        if redis_backend == "server":  # the session's server has no replica
            with pytest.raises(TaskNotReplicated, match="0 of 1 replica"):
                queue.enqueue("tests.record", args=[group], wait_replicas=1, wait_timeout=0.1)
            continue
        task_id = queue.enqueue("tests.record", args=[group], wait_replicas=1, wait_timeout=30)
        assert TaskQueue(group).get(task_id).args == [group]


def test_a_script_the_server_lost_is_loaded_again(redis_client, face):
    redis_client.script_flush()
    face(TaskQueue()).enqueue("tests.record", args=["a"])
    redis_client.script_flush()
    # The replicated push sends the script and WAIT in one pipeline: both go again, so
    # WAIT answers for the task's write (5 replicas: more than any node has).
    with pytest.raises(TaskNotReplicated, match="of 5 replica"):
        face(TaskQueue("mail")).enqueue(
            "tests.record", args=["b"], wait_replicas=5, wait_timeout=0.05
        )
    assert TaskQueue().length("default") == TaskQueue("mail").length("default") == 1


def test_concurrent_async_enqueues_are_each_stored_once(redis_client):
    """200 enqueues awaited together on one event loop: every task runs once."""

    async def enqueue_all() -> list[str]:
        try:
            return await asyncio.gather(*(record.aenqueue(f"c{n}") for n in range(200)))
        finally:
            await aclose_async_clients()

    ids = asyncio.run(enqueue_all())
    assert len(set(ids)) == 200
    assert Worker(["default"]).run(burst=True) == 200
    assert sorted(labels(redis_client)) == sorted(f"c{n}" for n in range(200))
