"""The Django Tasks backend: tasks defined with the Tasks API run on rp workers and
their results are read back by id from another process."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from redisparts_app.exceptions import InvalidTask, TaskFailed
from redisparts_app.services.tasks import TaskQueue, Worker
from tests.tasks_django import (
    InvalidTaskError,
    TaskResultDoesNotExist,
    TaskResultStatus,
    add,
    async_double,
    boom,
    shout,
    task_backends,
    which_attempt,
)
from tests.tasks_helpers import start_worker, stop, wait_until

TASKS = {
    "default": {
        "BACKEND": "redisparts_app.tasks_backend.RedisTaskBackend",
        "QUEUES": ["default", "email"],
    }
}


@pytest.fixture(autouse=True)
def _redis_tasks_backend():
    with override_settings(TASKS=TASKS):
        yield


def test_result_is_ready_until_a_worker_runs_the_task(redis_client):
    result = add.enqueue(2, 3)
    assert result.status == TaskResultStatus.READY
    stored = add.get_result(result.id)
    assert (stored.status, stored.args, stored.kwargs) == (TaskResultStatus.READY, [2, 3], {})
    assert stored.enqueued_at is not None
    assert TaskQueue().length("default") == 1


@pytest.mark.slow
def test_task_runs_in_a_worker_process_and_its_result_is_read_back(redis_client):
    result = shout.using(queue_name="email").enqueue("sold")
    worker = start_worker(["email"])
    try:
        assert wait_until(lambda: shout.get_result(result.id).is_finished, timeout=20)
    finally:
        assert stop(worker) == 0
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"text": "SOLD", "length": 4}
    assert len(result.worker_ids) == 1
    assert result.started_at <= result.finished_at
    assert task_backends["default"].get_result(result.id).return_value["length"] == 4
    # One store with the queue's own results: its handle reads the same record.
    info = TaskQueue().result(result.id).info()
    assert (info.state, info.return_value, info.worker) == (
        "SUCCESSFUL", {"text": "SOLD", "length": 4}, result.worker_ids[0]
    )  # fmt: skip
    assert info.name == "tests.tasks_django.shout"
    # and waits on it the same way
    assert TaskQueue().result(result.id).get(timeout=1) == {"text": "SOLD", "length": 4}


def test_failing_task_records_the_error_and_is_listed_as_failed(redis_client):
    result = boom.enqueue()
    Worker(["default"]).run(burst=True)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    [error] = result.errors
    assert error.exception_class is ValueError
    assert "boom went the task" in error.traceback
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value
    [failed] = TaskQueue().failed()
    assert failed.id == result.id
    assert failed.error == "ValueError: boom went the task"
    handle = TaskQueue().result(result.id)
    with pytest.raises(TaskFailed, match=r"builtins\.ValueError: boom went the task"):
        handle.get(timeout=1)
    # Requeued, its done token goes with the failure (its record stays FAILED, as
    # get_result says, until the new run starts).
    TaskQueue().requeue(result.id)
    assert not redis_client.exists(TaskQueue().done_key(result.id))


def test_context_sees_the_attempt(redis_client):
    result = which_attempt.enqueue()
    Worker(["default"]).run(burst=True)
    assert which_attempt.get_result(result.id).return_value == 1


def test_run_after_puts_the_task_in_the_delayed_set(redis_client):
    result = add.using(run_after=timezone.now() + timedelta(seconds=60)).enqueue(1, 1)
    [delayed] = TaskQueue().delayed()
    assert delayed.id == result.id
    assert 50 < delayed.due_at - delayed.enqueued_at < 70
    assert TaskQueue().length("default") == 0


def test_unknown_result_id_raises_does_not_exist(redis_client):
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result("0" * 32)
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result("bad:id")


def test_bad_arguments_and_queues_are_refused_before_writing(redis_client):
    with pytest.raises(InvalidTask, match="JSON"):
        add.enqueue(object(), 1)
    with pytest.raises(InvalidTaskError, match="Queue"):
        add.using(queue_name="nowhere").enqueue(1, 2)
    assert redis_client.dbsize() == 0


@pytest.mark.django_db(transaction=True)
def test_enqueue_inside_a_rolled_back_transaction_never_runs(redis_client):
    def purchase() -> str:
        with transaction.atomic():
            result = add.enqueue(1, 2)
            raise RuntimeError(result.id)

    with pytest.raises(RuntimeError) as info:
        purchase()
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result(str(info.value))
    assert redis_client.dbsize() == 0


def test_async_tasks_run_in_the_worker(redis_client):
    result = async_double.enqueue(21)
    Worker(["default"]).run(burst=True)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 42


def test_a_higher_priority_goes_to_the_head_of_its_queue(redis_client):
    first = add.enqueue(1, 1)
    low = add.using(priority=-10).enqueue(2, 2)
    high = add.using(priority=10).enqueue(3, 3)
    order = [info.id for info in TaskQueue().peek("default")]
    assert order == [high.id, first.id, low.id]
    Worker(["default"]).run(burst=True)
    assert add.get_result(high.id).return_value == 6


def test_the_finished_result_is_written_with_the_acknowledgement(redis_client):
    """Run but not acknowledged (its worker died there): RUNNING, and run again; the
    acknowledgement writes the finished result and wakes the queue's waiters."""
    from redisparts_app.services.tasks.pool import run_task

    queue = TaskQueue()
    result = add.enqueue(2, 3)
    ((record, _),) = queue.claim(["default"], "w-unacked", 30, 1)
    outcome = run_task(record, "w-unacked", queue)
    assert outcome.outcome == "done"
    assert add.get_result(result.id).status == TaskResultStatus.RUNNING
    assert not redis_client.exists(queue.done_key(result.id))
    assert queue.acknowledge([result.id], "w-unacked", results={result.id: outcome.result}) == []
    stored = add.get_result(result.id)
    assert (stored.status, stored.return_value) == (TaskResultStatus.SUCCESSFUL, 5)
    assert queue.result(result.id).get(timeout=1) == 5
    # Failed: the FAILED result comes with the failed registry's entry, in one script.
    failed = boom.enqueue()
    ((record, _),) = queue.claim(["default"], "w-unacked", 30, 1)
    outcome = run_task(record, "w-unacked", queue)
    assert outcome.outcome == "fail"
    assert boom.get_result(failed.id).status == TaskResultStatus.RUNNING
    assert queue.settle(failed.id, "w-unacked", "fail", outcome.payload, result=outcome.result)
    assert boom.get_result(failed.id).status == TaskResultStatus.FAILED
    with pytest.raises(TaskFailed):
        queue.result(failed.id).get(timeout=1)
