"""rp_queue: stats, lists, retry and delete by id or in bulk, cancel, purge, refusals."""

import json

import pytest
from django.core.management import CommandError, call_command

from redisparts_app.services.tasks import TaskQueue, Worker
from tests.tasks_helpers import DONE, fails_until_flag, record

pytestmark = pytest.mark.cluster


def failed_tasks(count: int) -> list[str]:
    ids = [fails_until_flag.enqueue_with(args=[f"f{n}"], on_commit=False) for n in range(count)]
    assert Worker(["default"]).run(burst=True) == count
    return ids


def run_json(capsys, *args) -> object:
    call_command("rp_queue", *args, "--json")
    return json.loads(capsys.readouterr().out)


def test_stats_and_lists(capsys):
    failed = failed_tasks(2)
    ready = [record.enqueue_with(args=[f"r{n}"], on_commit=False) for n in range(3)]
    stats = run_json(capsys, "stats")
    assert stats["default"]["queues"] == {"default": 3}
    assert stats["default"]["failed"] == 2
    # Failed tasks (the default list); two failed in one millisecond may come in either order.
    assert sorted(t["id"] for t in run_json(capsys, "list")) == sorted(failed)
    assert [t["id"] for t in run_json(capsys, "list", "--kind", "ready")] == ready
    assert [t["id"] for t in run_json(capsys, "list", "--kind", "ready", "--start", "1")] == (
        ready[1:]
    )
    call_command("rp_queue", "stats")
    assert "default: ready default 3; delayed 0, inflight 0, failed 2" in capsys.readouterr().out


def test_retry_and_delete_by_id(redis_client, capsys):
    first, second, third = failed_tasks(3)
    assert run_json(capsys, "retry", first) == {"done": [first], "not_found": []}
    assert TaskQueue().length("default") == 1
    redis_client.set("test:tasks:flag", 1)
    assert Worker(["default"]).run(burst=True) == 1
    assert redis_client.smembers(DONE) == {b"f0"}
    call_command("rp_queue", "delete", second, "missing")
    out = capsys.readouterr().out
    assert "Deleted 1 task(s)." in out
    assert "missing" in out
    assert [task.id for task in TaskQueue().failed()] == [third]
    with pytest.raises(CommandError, match="no task was found") as failure:
        call_command("rp_queue", "retry", "missing")
    assert failure.value.returncode == 1


def test_bulk_retry_by_name_needs_yes_and_keeps_the_rest(redis_client, capsys):
    ids = failed_tasks(3)
    with pytest.raises(CommandError, match="without --yes") as refused:
        call_command("rp_queue", "retry", "--all")
    assert refused.value.returncode == 2
    assert len(TaskQueue().failed()) == 3  # nothing done
    other = TaskQueue().failed()[0]
    assert run_json(capsys, "retry", "--all", "--name", "tests.other", "--yes") == {
        "done": [],
        "not_found": [],
    }
    done = run_json(capsys, "retry", "--all", "--name", other.name, "--yes")
    assert sorted(done["done"]) == sorted(ids)
    assert TaskQueue().failed() == []
    assert TaskQueue().length("default") == 3


def test_purge_deletes_the_ready_tasks_of_one_queue(capsys):
    kept = failed_tasks(1)
    for n in range(3):
        record.enqueue_with(args=[f"r{n}"], on_commit=False)
    with pytest.raises(CommandError, match="without --yes"):
        call_command("rp_queue", "purge", "--queue", "default")
    assert TaskQueue().length("default") == 3
    assert len(run_json(capsys, "purge", "--queue", "default", "--yes")["done"]) == 3
    assert TaskQueue().length("default") == 0
    assert [task.id for task in TaskQueue().failed()] == kept


@pytest.mark.parametrize(
    "argv",
    [
        ["stats", "some-id"],
        ["retry"],
        ["retry", "an-id", "--all"],
        ["delete", "an-id", "--name", "x"],
        ["stats", "--group", "a:b"],
    ],
)
def test_bad_arguments_exit_2_and_change_nothing(redis_client, argv):
    failed_tasks(1)
    before = sorted(redis_client.scan_iter())
    with pytest.raises(CommandError) as failure:
        call_command("rp_queue", *argv)
    assert failure.value.returncode == 2
    assert sorted(redis_client.scan_iter()) == before


def test_an_unknown_list_is_named_with_the_choices():
    # argparse's own refusal: exit 2 from the command line (call_command raises it as 1).
    with pytest.raises(CommandError, match="invalid choice: 'nope'"):
        call_command("rp_queue", "list", "--kind", "nope")


def test_cancel_reports_what_each_cancel_did(capsys):
    done = record.enqueue_with(args=["done"], on_commit=False)
    waiting = record.enqueue_with(args=["waiting"], on_commit=False)
    assert Worker(["default"]).run(max_tasks=1) == 1  # runs "done"
    report = run_json(capsys, "cancel", waiting, done, "nope")
    assert report == {
        "cancelled": [waiting],
        "aborting": [],
        "finished": [done],
        "unknown": ["nope"],
    }
    assert TaskQueue().result(waiting).state == "CANCELLED"
    assert Worker(["default"]).run(burst=True) == 0
    call_command("rp_queue", "cancel", done)
    assert capsys.readouterr().out.strip() == f"finished: {done}"
    # Nothing known: exit 1; a bad id: exit 2, before any id is cancelled.
    with pytest.raises(CommandError) as unknown:
        call_command("rp_queue", "cancel", "nope")
    assert unknown.value.returncode == 1
    kept = record.enqueue_with(args=["kept"], on_commit=False)
    with pytest.raises(CommandError, match="task id") as bad:
        call_command("rp_queue", "cancel", kept, "bad{id}")
    assert bad.value.returncode == 2
    assert TaskQueue().result(kept).state == "READY"
    with pytest.raises(CommandError, match="ids") as none:
        call_command("rp_queue", "cancel")
    assert none.value.returncode == 2
