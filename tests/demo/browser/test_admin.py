"""The Redis parts admin in Chromium: a task that failed in a real worker is shown, and
"Retry" puts it back in its queue, where the worker runs it again; bulk actions and the
delete of one task ask first, on the same page; live pages refresh in place and hold still
while the operator is choosing."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from redisparts_app.services.locks import Lock
from redisparts_app.services.semaphores import Semaphore
from redisparts_app.services.tasks import TaskQueue, Worker
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


def _failed_tasks(labels: list[str]) -> None:
    for label in labels:
        fails_until_flag.enqueue(label)
    assert Worker(["default"]).run(burst=True) == len(labels)


def test_bulk_retry_and_delete_ask_first(new_page):
    _failed_tasks(["bulk-a", "bulk-b", "bulk-c"])
    page = new_page()
    log_in(page, "admin", "admin-demo")
    page.goto(reverse("admin:redisparts_tasks") + "?kind=failed")
    rows = page.locator("tr.rp-task")
    expect(rows).to_have_count(3)
    rows.nth(0).get_by_role("checkbox").check()
    rows.nth(1).get_by_role("checkbox").check()
    page.get_by_role("button", name="Retry selected").click()
    expect(page.locator("tr.rp-chosen")).to_have_count(2)
    save_screenshot(page, "admin-bulk-confirm")
    page.get_by_role("button", name="Yes, retry 2 tasks").click()
    expect(page.locator(".messagelist")).to_contain_text("2 tasks back in their queue")
    expect(rows).to_have_count(1)
    assert TaskQueue().counts()["failed"] == 1

    page.get_by_role("checkbox", name="Select every task of this page").check()
    page.get_by_role("button", name="Delete selected").click()
    page.get_by_role("link", name="No, go back").click()  # changed their mind
    expect(rows).to_have_count(1)
    page.get_by_role("checkbox", name="Select every task of this page").check()
    page.get_by_role("button", name="Delete selected").click()
    page.get_by_role("button", name="Yes, delete 1 task").click()
    expect(page.locator(".messagelist")).to_contain_text("1 task deleted")
    expect(page.locator(".rp-empty")).to_contain_text("No tasks here")
    assert TaskQueue().counts()["failed"] == 0


def test_deleting_one_task_asks_on_the_same_page_as_several(new_page):
    _failed_tasks(["one-a", "one-b"])
    page = new_page()
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, "admin", "admin-demo")
    page.goto(reverse("admin:redisparts_tasks") + "?kind=failed")
    rows = page.locator("tr.rp-task")
    expect(rows).to_have_count(2)
    rows.nth(0).get_by_role("button", name="Delete").click()
    expect(page.locator("tr.rp-chosen")).to_have_count(1)
    page.get_by_role("link", name="No, go back").click()
    expect(rows).to_have_count(2)
    rows.nth(0).get_by_role("button", name="Delete").click()
    page.get_by_role("button", name="Yes, delete 1 task").click()
    expect(page.locator(".messagelist")).to_contain_text("1 task deleted")
    expect(rows).to_have_count(1)
    assert dialogs == []  # never the browser's confirm box
    assert TaskQueue().counts()["failed"] == 1


def test_cancelling_a_task_asks_on_that_page_too_and_comes_back_to_the_task(new_page):
    waiting = fails_until_flag.enqueue("waiting")  # no worker: it stays ready
    page = new_page()
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, "admin", "admin-demo")
    task_url = reverse("admin:redisparts_task", args=("default", waiting))
    page.goto(task_url)
    page.get_by_role("button", name="Cancel").click()
    page.get_by_role("button", name="Yes, cancel 1 task").click()
    expect(page.locator(".messagelist")).to_contain_text("1 task cancelled")
    expect(page.locator(".rp-task-state")).to_contain_text("CANCELLED")
    assert page.url.endswith(task_url)
    assert dialogs == []  # never the browser's confirm box
    assert waiting.state == "CANCELLED"


def test_live_pages_refresh_in_place_and_wait_while_a_task_is_selected(new_page):
    page = new_page()
    log_in(page, "admin", "admin-demo")
    page.goto(reverse("admin:redisparts_locks"))
    expect(page.locator(".rp-empty")).to_contain_text("No lock is held")
    page.evaluate("window.notReloaded = true")
    lock = Lock("live-refresh", ttl=60)
    lock.acquire()
    expect(page.get_by_role("cell", name="live-refresh", exact=True)).to_be_visible()
    assert page.evaluate("window.notReloaded") is True  # swapped in place, not reloaded
    expect(page.locator("#rp-live-status")).to_contain_text("Updated at")
    lock.release()

    _failed_tasks(["live-a"])
    page.goto(reverse("admin:redisparts_tasks") + "?kind=failed")
    rows = page.locator("tr.rp-task")
    expect(rows).to_have_count(1)
    rows.nth(0).get_by_role("checkbox").check()
    _failed_tasks(["live-b"])
    expect(page.locator("#rp-live-status")).to_contain_text("Paused while something is selected")
    expect(rows).to_have_count(1)  # the page held still: the choice is not lost
    expect(rows.nth(0).get_by_role("checkbox")).to_be_checked()
    rows.nth(0).get_by_role("checkbox").uncheck()
    expect(rows).to_have_count(2)  # and refreshes again once nothing is selected
    page.get_by_role("button", name="Pause").click()
    expect(page.locator("#rp-live-status")).to_have_text("Paused.")
    save_screenshot(page, "admin-live-paused")


def test_a_stuck_lock_and_a_semaphore_permit_are_released_after_the_browser_asks(new_page):
    lock = Lock("stuck-door", ttl=600)
    lock.acquire()
    semaphore = Semaphore("printers", 1, timeout=600)
    holder = semaphore.acquire(reason="jammed")
    page = new_page()
    log_in(page, "admin", "admin-demo")
    asked: list[str] = []

    def answer(dialog) -> None:
        asked.append(dialog.message)
        if len(asked) == 1:
            dialog.dismiss()
        else:
            dialog.accept()

    page.on("dialog", answer)
    page.goto(reverse("admin:redisparts_locks"))
    row = page.locator("tr", has_text="stuck-door")
    row.get_by_role("button", name="Release").click()  # dismissed: nothing happens
    assert asked
    assert lock.owned()
    row.get_by_role("button", name="Release").click()
    expect(page.locator(".messagelist")).to_contain_text("Lock stuck-door released")
    assert "Release lock stuck-door?" in asked[0]
    assert not lock.owned()

    page.goto(reverse("admin:redisparts_semaphores"))
    page.get_by_role("row", name=holder).get_by_role("button", name="Release").click()
    expect(page.locator(".messagelist")).to_contain_text("Permit released on printers")
    assert semaphore.holders() == []
    assert semaphore.refresh(holder) is False
    save_screenshot(page, "admin-permit-released")
