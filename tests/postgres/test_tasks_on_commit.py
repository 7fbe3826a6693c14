"""Enqueue on commit on PostgreSQL, for the Tasks API backend (RedisTaskBackend) and the
app's own tasks: a rolled-back transaction or savepoint enqueues nothing, a committed one
enqueues once, and the worker (another process, another connection) sees its rows."""

import pytest
from django.db import connections, transaction

from redisparts_app.services.tasks import TaskQueue
from tests.fencing.models import FencedRecord
from tests.tasks_django import TaskResultDoesNotExist, TaskResultStatus, add, record_value
from tests.tasks_helpers import record, start_worker, stop, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


class Rollback(Exception):
    """Raised inside a block to roll it back; carries the id of the task result."""


def sell_and_fail() -> None:
    with transaction.atomic():
        FencedRecord.objects.create(name="sale-1", value=7)
        result = record_value.enqueue("sale-1")
        record.enqueue("sale-1")
        raise Rollback(result.id)


def test_a_rolled_back_transaction_enqueues_nothing(redis_client):
    with pytest.raises(Rollback) as rolled_back:
        sell_and_fail()
    assert not FencedRecord.objects.exists()
    with pytest.raises(TaskResultDoesNotExist):
        record_value.get_result(rolled_back.value.args[0])
    assert redis_client.dbsize() == 0


def enqueue_and_fail() -> None:
    with transaction.atomic():
        result = add.enqueue(3, 4)
        record.enqueue("dropped")
        raise Rollback(result.id)


def test_a_rolled_back_savepoint_drops_only_its_own_enqueues(redis_client):
    with transaction.atomic():
        kept = add.enqueue(1, 2)
        with pytest.raises(Rollback) as rolled_back:
            enqueue_and_fail()  # a savepoint inside the outer transaction
    assert [info.id for info in TaskQueue().peek("default")] == [kept.id]
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result(rolled_back.value.args[0])


def test_a_committed_transaction_enqueues_once_and_the_worker_sees_its_row(redis_client):
    with transaction.atomic():
        FencedRecord.objects.create(name="sale-1", value=7)
        result = record_value.enqueue("sale-1")
        task_id = record.enqueue("sale-1")
        assert TaskQueue().length("default") == 0
        with pytest.raises(TaskResultDoesNotExist):
            record_value.get_result(result.id)
    assert sorted(info.id for info in TaskQueue().peek("default")) == sorted([result.id, task_id])

    connections.close_all()  # the forked worker opens a connection of its own
    worker = start_worker(["default"])
    try:
        assert wait_until(lambda: record_value.get_result(result.id).is_finished, timeout=20)
        assert wait_until(lambda: redis_client.hget("test:tasks:runs", "sale-1"), timeout=20)
    finally:
        assert stop(worker) == 0
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 7)
    assert len(result.worker_ids) == 1
    assert redis_client.hget("test:tasks:runs", "sale-1") == b"1"
    assert TaskQueue().length("default") == 0
