"""The sync enqueue's shortcuts give what the general steps give: the transaction check
in threads, async code and with connections set in place; the arguments' JSON; the
names checked once per process."""

import asyncio
import json
import threading
from enum import IntEnum

import pytest
from django.conf import settings
from django.db import connections, transaction
from django.db.utils import ConnectionDoesNotExist
from django.test import override_settings

from redisparts_app.exceptions import InvalidKeyPart, InvalidTask
from redisparts_app.services import registry
from redisparts_app.services.tasks import TaskQueue, task
from redisparts_app.services.tasks import queue as queue_module
from redisparts_app.services.tasks.queue import _ENCODER, _in_atomic_block, encode_arguments

pytestmark = pytest.mark.cluster


def in_other_thread(work):
    """Run ``work()`` in a new thread (closing its database connections); return its result."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@pytest.mark.django_db(transaction=True)
def test_outside_any_atomic_block_the_push_is_at_once(redis_client):
    queue = TaskQueue()
    queue.enqueue("tests.record", args=["now"])
    assert queue.length("default") == 1
    assert not _in_atomic_block(None)


@pytest.mark.django_db(transaction=True)
def test_another_threads_atomic_block_does_not_defer_a_push(redis_client):
    queue = TaskQueue()
    with transaction.atomic():
        assert _in_atomic_block(None)
        pushed = in_other_thread(
            lambda: (_in_atomic_block(None), queue.enqueue("tests.record", args=["x"]))
        )
        assert pushed[0] is False
        assert queue.length("default") == 1


@pytest.mark.django_db(transaction=True)
def test_a_new_threads_own_atomic_block_defers_its_push(redis_client):
    queue = TaskQueue()

    def committed() -> tuple[int, int]:
        with transaction.atomic():
            queue.enqueue("tests.record", args=["committed"])
            inside = queue.length("default")
        return inside, queue.length("default")

    def rolled_back() -> None:
        with transaction.atomic():
            queue.enqueue("tests.record", args=["rolled back"])
            raise RuntimeError("purchase failed")

    assert in_other_thread(committed) == (0, 1)
    with pytest.raises(RuntimeError, match="purchase failed"):
        in_other_thread(rolled_back)
    assert queue.length("default") == 1


@pytest.mark.django_db(transaction=True)
def test_async_code_reads_its_own_connection_as_django_does(redis_client):
    queue = TaskQueue()

    async def enqueue_from_async_code() -> bool:
        # A running loop: Django gives this context a connection of its own, not the
        # thread's, which is in no atomic block.
        in_block = _in_atomic_block(None)
        assert in_block == transaction.get_connection().in_atomic_block
        queue.enqueue("tests.record", args=["async"])  # the sync face
        return in_block

    with transaction.atomic():
        assert asyncio.run(enqueue_from_async_code()) is False
        assert queue.length("default") == 1
        assert _in_atomic_block(None)


@pytest.mark.django_db(transaction=True)
def test_a_connection_set_in_place_is_the_one_read(redis_client):
    # As LiveServerThread does with shared connections: ``connections[alias] = ...``.
    queue = TaskQueue()
    original = connections["default"]
    other = connections.create_connection("default")
    try:
        with transaction.atomic():  # on the original
            connections["default"] = other
            assert not _in_atomic_block(None)
            queue.enqueue("tests.record", args=["at once"])
            assert queue.length("default") == 1
            connections["default"] = original
        connections["default"] = other
        with transaction.atomic():  # on the other
            assert _in_atomic_block("default")
            queue.enqueue("tests.record", args=["on commit"])
            assert queue.length("default") == 1
        assert queue.length("default") == 2
    finally:
        connections["default"] = original
        other.close()


@pytest.mark.django_db(transaction=True)
def test_an_unknown_database_is_refused_with_nothing_written(redis_client):
    with pytest.raises(ConnectionDoesNotExist):
        TaskQueue().enqueue("tests.record", args=["x"], using="nowhere")
    assert redis_client.dbsize() == 0
    # on_commit=False asks no database
    TaskQueue().enqueue("tests.record", args=["x"], using="nowhere", on_commit=False)


class Level(IntEnum):
    HIGH = 2


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((), None),
        ([], {}),
        ((1, 0.0), None),
        (["a", None, True, False, -3, 1.5e300, 2**70], {"k": "é", "n": None}),
        (('quote " backslash \\ line \n tab \t é \u2028 \U0001f600',), {"é": 1.0}),
        ((Level.HIGH,), None),  # an int subclass: the general path
        (([1, [2, {"x": (3,)}]],), {"nested": {"a": [1]}}),
        (range(3), None),  # a sequence made a list
        ((1,), {"a": Level.HIGH}),
    ],
)
def test_arguments_json_is_the_general_encoders(args, kwargs):
    general = _ENCODER.encode(
        {
            "args": args if type(args) in (list, tuple) else list(args),
            "kwargs": {} if kwargs is None else kwargs,
        }
    )[1:-1]
    assert encode_arguments(args, kwargs) == general
    assert json.loads(f"{{{general}}}")["args"] == json.loads(json.dumps(list(args)))


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((float("nan"),), None, "JSON-serialisable: Out of range float"),
        ((1,), {"a": float("inf")}, "JSON-serialisable: Out of range float"),
        (([float("-inf")],), None, "JSON-serialisable: Out of range float"),
        ((object(),), None, "JSON-serialisable: Object of type object"),
        ((1,), {1: 2}, "string keys"),
        ((1,), [("a", 1)], "string keys"),
        ("abc", None, "list or tuple"),
        ({"a": 1}, None, "list or tuple"),
        (("x" * 70000,), None, "QUEUE_MAX_ARGS_BYTES"),
        ((), {"k": "x" * 70000}, "QUEUE_MAX_ARGS_BYTES"),
    ],
)
def test_bad_arguments_raise_as_before(args, kwargs, message):
    with pytest.raises(InvalidTask, match=message):
        encode_arguments(args, kwargs)


def test_a_circular_argument_is_refused():
    looped: list = [1]
    looped.append(looped)
    with pytest.raises(InvalidTask, match="Circular reference"):
        encode_arguments((looped,), None)


def test_names_checked_before_are_checked_again_under_new_settings(redis_client):
    queue = TaskQueue()
    queue.enqueue("tests.record", args=["x"], queue="long-queue-name")
    assert TaskQueue("long-group-name").group == "long-group-name"
    shorter = {**settings.REDISPARTS, "MAX_KEY_PART_LENGTH": 11}
    with override_settings(REDISPARTS=shorter):
        with pytest.raises(InvalidKeyPart, match="task name"):
            queue.enqueue("tests.record", args=["x"], queue="long-queue-name")
        with pytest.raises(InvalidKeyPart, match="queue"):
            queue.enqueue("tests.x", args=["x"], queue="long-queue-name")
        with pytest.raises(InvalidKeyPart, match="queue group"):
            TaskQueue("long-group-name")
    with override_settings(REDISPARTS={**settings.REDISPARTS, "KEY_PREFIX": "other"}):
        task_id = queue.enqueue("tests.record", args=["x"], queue="long-queue-name")
        assert redis_client.hexists(queue.key("tasks"), task_id)
        assert queue.key("tasks").startswith("other:")
    assert queue.length("long-queue-name") == 1


def test_names_are_recorded_in_their_normal_form_every_time(redis_client):
    queue = TaskQueue()
    decomposed = "cafe\u0301"
    for _ in range(2):
        task_id = queue.enqueue(decomposed, args=[], queue=decomposed)
        info = queue.get(task_id)
        assert (info.name, info.queue) == ("caf\u00e9", "caf\u00e9")
    assert queue.length("caf\u00e9") == 2


def test_bad_input_after_good_input_writes_nothing(redis_client):
    queue = TaskQueue()
    queue.enqueue("tests.record", args=["x"])
    redis_client.flushdb()
    for call in (
        lambda: queue.enqueue("tests.record", args=[float("nan")]),
        lambda: queue.enqueue("tests.record", args=["x"], delay=float("nan")),
        lambda: queue.enqueue("tests.record", args=["x"], max_retries=True),
        lambda: queue.enqueue("tests.record", args=["x"], wait_replicas=1.0),
        lambda: queue.enqueue("tests.record", args=["x"], task_id="a:b"),
    ):
        with pytest.raises((InvalidTask, InvalidKeyPart)):
            call()
    assert redis_client.dbsize() == 0


def test_the_group_is_noted_after_its_first_push(redis_client):
    queue = TaskQueue("noted-group")
    queue.enqueue("tests.record", args=["x"])
    assert "noted-group" in registry.names("queue")
    redis_client.delete(registry.registry_key("queue"))
    queue.enqueue("tests.record", args=["x"])  # noted lately: nothing sent
    assert registry.names("queue") == []
    registry.forget_noted()
    queue.enqueue("tests.record", args=["x"])
    assert registry.names("queue") == ["noted-group"]


def test_wake_tokens_stay_one_per_ready_task_up_to_the_cap(redis_client, monkeypatch):
    monkeypatch.setattr(queue_module, "WAKE_CAP", 3)
    queue = TaskQueue()
    wake = queue.key("wake")
    for n in range(5):  # a backlog longer than the cap: the full list is left as it is
        queue.enqueue("tests.record", args=[n])
        assert redis_client.llen(wake) == min(n + 1, 3)
    assert queue.length("default") == 5
    redis_client.ltrim(wake, 0, 0)  # tokens taken meanwhile (by claims): one left
    queue.enqueue("tests.record", args=["behind a long queue"])
    assert redis_client.llen(wake) == 2
    queue.enqueue("tests.record", args=["other queue"], queue="other")
    queue.enqueue("tests.record", args=["first of its queue"], queue="third")
    assert redis_client.llen(wake) == 3  # a full list from other queues' tasks stays full
    assert redis_client.lrange(wake, 0, -1) == [b"1"] * 3
    assert redis_client.smembers(queue.key("queues")) == {b"default", b"other", b"third"}


def test_each_kind_of_push_sends_the_keys_it_uses(redis_client):
    queue = TaskQueue()
    now = queue.enqueue("tests.record", args=["now"])
    later = queue.enqueue("tests.record", args=["later"], delay=60)
    first = queue.enqueue("tests.record", args=["once"], dedup_key="k", delay=60)
    again = queue.enqueue("tests.record", args=["twice"], dedup_key="k")
    assert again == first
    assert [info.id for info in queue.peek("default")] == [now]
    assert {info.id for info in queue.delayed()} == {later, first}
    assert redis_client.llen(queue.key("wake")) == 1  # the ready task's token only
    assert redis_client.llen(queue.key("sched_wake")) == 1
    assert redis_client.get(queue.key("dedup", "k")) == first.encode()
    assert redis_client.hlen(queue.key("tasks")) == 3
    record = json.loads(redis_client.hget(queue.key("tasks"), now))
    assert record["ready_at"] == record["enqueued_at"] == queue.get(now).enqueued_at
    delayed = json.loads(redis_client.hget(queue.key("tasks"), later))
    assert 59.9 < delayed["ready_at"] - delayed["enqueued_at"] < 60.1


def test_record_times_keep_six_digits_of_microseconds():
    assert queue_module._json_time(1_795_000_000_000_001) == "1795000000.000001"
    assert queue_module._json_time(1_795_000_000_120_000) == "1795000000.120000"
    assert queue_module._json_time(5) == "0.000005"


@task(name="test.enqueue.no_retries", max_retries=0)
def _no_retries() -> None: ...


def test_an_enqueue_by_name_writes_its_own_retry_count_not_the_tasks(redis_client):
    """As docs/components/tasks.md says: the count is written at enqueue, from the
    enqueuer's argument or its QUEUE_MAX_RETRIES, whatever the @task declares."""
    queue = TaskQueue()
    by_task = _no_retries.enqueue()
    by_name = queue.enqueue("test.enqueue.no_retries")
    by_name_with_option = queue.enqueue("test.enqueue.no_retries", max_retries=0)
    with override_settings(REDISPARTS={"QUEUE_MAX_RETRIES": 7}):
        by_name_elsewhere = queue.enqueue("test.enqueue.no_retries")
    enqueued = [by_task, by_name, by_name_with_option, by_name_elsewhere]
    counts = [queue.get(task_id).max_retries for task_id in enqueued]
    assert counts == [0, 3, 0, 7]
