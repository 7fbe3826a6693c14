"""The Redis parts admin in Chromium: a task that failed in a real worker is shown, and
"Retry" puts it back in its queue, where the worker runs it again."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from redisparts_app.services.tasks import TaskQueue
from tests.tasks_helpers import DONE, fails_until_flag, wait_until

from .helpers import log_in, save_screenshot

pytestmark = pytest.mark.browser


def test_failed_task_is_shown_and_retry_requeues_it(new_page, start_worker, redis_client):
    queue = TaskQueue()
    fails_until_flag.enqueue("admin-retry")  # raises until test:tasks:flag exists
    start_worker("default")
    assert wait_until(lambda: queue.counts()["failed"] == 1, timeout=30), "the task never failed"

    page = new_page()
    log_in(page, "admin", "admin-demo")
    page.goto(reverse("admin:redisparts_tasks") + "?kind=failed")
    row = page.locator("tr.rp-task", has_text="tests.fails_until_flag")
    expect(row).to_contain_text("flag not set")
    save_screenshot(page, "admin-failed-task")

    redis_client.set("test:tasks:flag", 1)  # the next run succeeds
    row.get_by_role("button", name="Retry").click()
    expect(page.locator(".messagelist")).to_contain_text("is back in its queue")
    expect(page.locator("tr.rp-task", has_text="tests.fails_until_flag")).to_have_count(0)
    save_screenshot(page, "admin-task-retried")

    assert wait_until(lambda: redis_client.sismember(DONE, "admin-retry"), timeout=30)
    counts = queue.counts()
    assert counts["failed"] == counts["inflight"] == 0
