"""``demo_recovery``: a worker killed mid-send, the reaper, and exactly one e-mail.

The e-mails are counted in the file backend's outbox, written by the worker processes
themselves: a check independent of the command's own report and of the queue.
"""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from marketplace.mailers import FILE_BACKEND, mail_settings
from redisparts_app.services.tasks import TaskQueue

pytestmark = pytest.mark.slow


def test_killed_worker_task_is_recovered_and_delivered_exactly_once(tmp_path):
    out = io.StringIO()
    with override_settings(**mail_settings(FILE_BACKEND, file_path=tmp_path)):
        call_command("demo_recovery", lease=1.0, send_seconds=1.5, timeout=60, stdout=out)
    report = out.getvalue()
    assert "3. Killed worker" in report
    assert "4. In flight: worker " in report
    assert "delivery 1, lease ends in" in report
    assert "6. Recovered by the reaper" in report
    assert "8. Delivered once: 1 e-mail to seller@example.com after 2 deliveries" in report
    mails = [path.read_text() for path in tmp_path.iterdir()]
    assert sum(text.count("Subject: Your Sword of Dawn sold") for text in mails) == 1
    counts = TaskQueue().counts()
    assert counts["inflight"] == counts["failed"] == counts["quarantine"] == 0
    assert sum(counts["queues"].values()) == 0


@pytest.mark.parametrize(
    ("option", "value"),
    [("lease", 0.0), ("send_seconds", -1.0), ("timeout", float("nan")), ("queue", "a:b")],
)
def test_bad_options_fail_with_a_message_before_anything_runs(redis_client, option, value):
    with pytest.raises(CommandError):
        call_command("demo_recovery", **{option: value}, stdout=io.StringIO())
    assert redis_client.dbsize() == 0
