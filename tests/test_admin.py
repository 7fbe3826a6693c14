"""The Redis parts admin, through the test client, on the real test Redis.

Data is made by the services themselves (queues, locks, semaphores, chats, counters,
logs, statistics); every page must show it. Actions are checked by reading Redis back.
"""

import json
import re
import threading

import pytest
from django.contrib.auth.models import Permission, User
from django.test import override_settings
from django.urls import reverse

from redisparts_app.services import (
    autocomplete,
    chat,
    config,
    counters,
    files,
    geoip,
    listings,
    logs,
    market,
    presence,
    stats,
)
from redisparts_app.services.locks import Lock
from redisparts_app.services.mail import Mailbox
from redisparts_app.services.semaphores import Semaphore
from redisparts_app.services.tasks import TaskQueue, Worker, enqueue
from redisparts_app.templatetags.redisparts_admin import duration
from tests.tasks_helpers import fails_until_flag, wait_until

pytestmark = [pytest.mark.django_db, pytest.mark.cluster]

PAGES = [
    "admin:redisparts_app_redisparts_changelist",
    "admin:redisparts_queues",
    "admin:redisparts_tasks",
    "admin:redisparts_schedules",
    "admin:redisparts_locks",
    "admin:redisparts_semaphores",
    "admin:redisparts_chats",
    "admin:redisparts_files",
    "admin:redisparts_market",
    "admin:redisparts_mail",
    "admin:redisparts_presence",
    "admin:redisparts_geoip",
    "admin:redisparts_counters",
    "admin:redisparts_stats",
    "admin:redisparts_logs",
    "admin:redisparts_config",
    "admin:redisparts_persistence",
    "admin:redisparts_autocomplete",
]


def url(name: str, *args: str) -> str:
    return reverse(name, args=args)


def failed_tasks(count: int) -> list[str]:
    """Make ``count`` failed tasks (each raised ValueError on its only delivery)."""
    ids = [fails_until_flag.enqueue_with(args=[f"f{n}"], on_commit=False) for n in range(count)]
    assert Worker(["default"]).run(burst=True) == count
    return ids


def rows(html: str, css_class: str) -> int:
    return len(re.findall(rf'<tr class="{css_class}"', html))


# -- access ---------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_anonymous_users_are_sent_to_the_login_page(client, page):
    response = client.get(url(page))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("query", ["", "?user=carol"])
def test_the_header_names_the_signed_in_admin_on_every_page(admin_client, admin_user, page, query):
    html = admin_client.get(url(page) + query).content.decode()
    assert f"<strong>{admin_user.get_short_name() or admin_user.get_username()}</strong>" in html
    assert reverse("admin:password_change") in html


def test_non_staff_users_are_sent_to_the_login_page(client):
    client.force_login(User.objects.create_user("ann", password="x"))
    response = client.get(url("admin:redisparts_queues"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_staff_without_the_permission_get_403_and_view_only_staff_cannot_act(client):
    staff = User.objects.create_user("bob", password="x", is_staff=True)
    client.force_login(staff)
    assert client.get(url("admin:redisparts_locks")).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_redisparts"))
    client.force_login(User.objects.get(pk=staff.pk))
    assert client.get(url("admin:redisparts_locks")).status_code == 200
    [task_id] = failed_tasks(1)
    retry = client.post(url("admin:redisparts_task_retry", "default", task_id))
    assert retry.status_code == 403
    assert TaskQueue().counts()["failed"] == 1
    assert client.post(url("admin:redisparts_maintenance"), {"action": "set"}).status_code == 403
    assert config.maintenance_status() is None


def test_the_app_is_listed_in_the_admin_index(admin_client):
    page = admin_client.get(reverse("admin:index")).content.decode()
    assert "Redis parts" in page
    assert url("admin:redisparts_app_redisparts_changelist") in page


# -- pages show the data ----------------------------------------------------------------


def test_dashboard_and_queues_show_lengths_and_age(admin_client):
    for n in range(3):
        enqueue("shop.mail", args=[n], queue="email", on_commit=False)
    enqueue("shop.report", queue="reports", delay=60, on_commit=False)
    failed_tasks(2)
    dashboard = admin_client.get(url("admin:redisparts_app_redisparts_changelist"))
    assert dashboard.status_code == 200
    cards = dict(
        re.findall(
            r'rp-label">([^<]+)</span><a class="rp-value[^"]*" [^>]*>(\d+)<',
            dashboard.content.decode(),
        )
    )
    assert cards["Ready"] == "3"
    assert cards["Failed"] == "2"
    assert cards["Delayed"] == "1"
    page = admin_client.get(url("admin:redisparts_queues")).content.decode()
    email_row = re.search(r">email</a></td>\s*<td>(\d+)</td>\s*<td>([\d.]+) s</td>", page)
    assert email_row
    assert email_row.group(1) == "3"
    peek = admin_client.get(url("admin:redisparts_peek", "default", "email")).content.decode()
    assert rows(peek, "rp-task") == 3
    assert "shop.mail" in peek
    assert "[2]" in peek


def test_queues_page_lists_the_workers_that_beat(admin_client):
    page = admin_client.get(url("admin:redisparts_queues")).content.decode()
    assert "No worker is running." in page
    TaskQueue().beat("host-4242-a1b2c3", [], 30)
    page = admin_client.get(url("admin:redisparts_queues")).content.decode()
    row = re.search(r">host-4242-a1b2c3</td><td>([\d.]+) s ago</td>", page)
    assert row
    assert float(row.group(1)) < 30


def test_queues_page_shows_the_permits_held_and_the_tasks_waiting(admin_client):
    from redisparts_app.services.tasks import Limit
    from tests.tasks_helpers import limited

    ids = [limited.enqueue_with(args=[f"l{n}", "/dev/null"], on_commit=False) for n in range(3)]
    queue = TaskQueue()
    queue.claim_next(["@tests.limited"], "w1", 30, 1, limits={"@tests.limited": Limit(2)})
    page = admin_client.get(url("admin:redisparts_queues")).content.decode()
    assert url("admin:redisparts_task", "default", ids[0].id) in page
    assert url("admin:redisparts_task", "default", ids[1].id) not in page
    peek = url("admin:redisparts_peek", "default", "@tests.limited")
    assert f'<a href="{peek}">2</a>' in page
    waiting = admin_client.get(peek).content.decode()
    assert ids[1].id in waiting
    assert ids[2].id in waiting


def test_task_lists_show_failed_with_error_and_detail_shows_traceback(admin_client):
    [task_id] = failed_tasks(1)
    page = admin_client.get(url("admin:redisparts_tasks") + "?kind=failed").content.decode()
    assert "tests.fails_until_flag" in page
    assert "ValueError: flag not set" in page
    detail = admin_client.get(url("admin:redisparts_task", "default", task_id)).content.decode()
    assert "Traceback (most recent call last)" in detail
    assert "raise ValueError(&quot;flag not set&quot;)" in detail


def test_in_flight_and_delayed_lists_show_worker_lease_deliveries_and_due_time(admin_client):
    queue = TaskQueue()
    enqueue("shop.mail", args=["x"], queue="email", on_commit=False)
    enqueue("shop.later", queue="email", delay=120, on_commit=False)
    _record, _deliveries = queue.dequeue(["email"], "host-42-abc", lease=30)
    inflight = admin_client.get(url("admin:redisparts_tasks") + "?kind=inflight").content.decode()
    assert "host-42-abc" in inflight
    assert re.search(r"<td>in (29|30)\.\d s</td><td>1</td>", inflight), "lease left, deliveries"
    delayed = admin_client.get(url("admin:redisparts_tasks") + "?kind=delayed").content.decode()
    assert "shop.later" in delayed
    assert re.search(r"\(in (119|120)\.\d s\)", delayed)


def test_locks_semaphores_and_chats_pages(admin_client):
    lock = Lock("market", ttl=30)
    fence = lock.acquire()
    sem = Semaphore("checkout", 3, timeout=30)
    holder = sem.acquire(reason="buying a sword")
    chat_id = chat.create_chat("ann", ["bob", "cid"], "hello")
    chat.send_message(chat_id, "bob", "second")
    chat.fetch_chat_messages(chat_id, "bob")

    locks_page = admin_client.get(url("admin:redisparts_locks")).content.decode()
    assert "market" in locks_page
    assert lock.token in locks_page
    assert re.search(rf"<td>(29|30)\.\d\d s</td>\s*<td>{fence}</td>", locks_page)
    sems = admin_client.get(url("admin:redisparts_semaphores")).content.decode()
    assert holder in sems
    assert "buying a sword" in sems
    chats = admin_client.get(url("admin:redisparts_chats")).content.decode()
    members = dict(re.findall(r'rp-member">(\w+) \((\d+)\)', chats))
    assert members == {"ann": "2", "bob": "0", "cid": "2"}
    assert '<td class="rp-history">2</td>' in chats  # both messages kept in the history
    lock.release()
    sem.release(holder)


def test_counters_stats_and_logs_pages_with_charts(admin_client):
    for _ in range(3):
        counters.update_counter("hits", clock=lambda: 1_700_000_000.0)
    counters.update_counter("hits", clock=lambda: 1_700_000_001.0)
    stats.update_stats("checkout", "amount", 12.5)
    stats.update_stats("checkout", "amount", 7.5)
    stats.record_access_time("market.listings", 0.25)
    logs.log_common("web", "payment declined <b>", "warning")
    logs.log_common("web", "payment declined <b>", "warning")

    page = admin_client.get(url("admin:redisparts_counters") + "?name=hits&precision=1")
    html = page.content.decode()
    assert "<svg" in html
    assert "22:13:20: 3</title>" in html
    assert "22:13:21: 1</title>" in html
    html = admin_client.get(url("admin:redisparts_stats")).content.decode()
    assert "checkout" in html
    assert "<td>2</td><td>10.0000</td>" in html
    assert "market.listings: 250 ms</title>" in html
    html = admin_client.get(url("admin:redisparts_logs") + "?name=web&severity=warning").content
    html = html.decode()
    assert "payment declined &lt;b&gt;</td><td>2</td>" in html


def test_counters_page_says_precisions_as_durations(admin_client):
    counters.update_counter("hits", clock=lambda: 1_700_000_000.0)  # at every precision
    html = admin_client.get(url("admin:redisparts_counters") + "?name=hits").content.decode()
    for said in (">1 second<", ">5 seconds<", ">1 minute<", ">5 minutes<", ">1 hour<", ">5 hours<",
                 ">1 day<"):  # fmt: skip
        assert said in html
    assert " s</a>" not in html
    assert "86400" not in re.sub(r"<[^>]*>", "", html)


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(1, "1 second"), (90, "90 seconds"), (300, "5 minutes"), (18000, "5 hours"),
     (86400, "1 day"), (172800, "2 days"), (0, "0 seconds")],
)  # fmt: skip
def test_duration_says_seconds_in_the_largest_exact_unit(seconds, said):
    assert duration(seconds) == said


def test_logs_page_opens_on_a_log_with_entries(admin_client):
    # "a-django" sorts first but holds only warnings; the purchases are info in "shop".
    logs.log_recent("a-django", "slow request", "warning")
    logs.log_recent("shop", "alice bought Lantern", "info")
    page = admin_client.get(url("admin:redisparts_logs"))
    assert page.context["name"] == "shop"
    assert page.context["severity"] == "info"
    assert "alice bought Lantern" in page.content.decode()
    # A log named without a severity opens on a severity it has entries at.
    page = admin_client.get(url("admin:redisparts_logs") + "?name=a-django")
    assert page.context["severity"] == "warning"
    assert "slow request" in page.content.decode()
    # Named both ways, the page shows what was asked, empty or not.
    page = admin_client.get(url("admin:redisparts_logs") + "?name=a-django&severity=info")
    assert page.context["severity"] == "info"
    assert "No info entries." in page.content.decode()


def test_persistence_page_shows_the_server_state(admin_client, redis_client):
    html = admin_client.get(url("admin:redisparts_persistence")).content.decode()
    assert redis_client.info("server")["redis_version"] in html
    assert 'role</th><td class="rp-mono">master' in html


def test_autocomplete_box_completes_guild_members(admin_client):
    autocomplete.AddressBook("knights").join_many(["Anna Lee", "Annie", "Bob"])
    page = admin_client.get(url("admin:redisparts_autocomplete")).content.decode()
    assert "knights" in page
    fragment = admin_client.get(
        url("admin:redisparts_autocomplete") + "?guild=knights&prefix=ann&fragment=1"
    ).content.decode()
    assert re.findall(r"<li>([^<]+)</li>", fragment) == ["Anna Lee", "Annie"]
    bad = admin_client.get(url("admin:redisparts_autocomplete") + "?guild=a:b&prefix=x")
    assert bad.status_code == 200
    assert "is not allowed" in bad.content.decode()


# -- actions ------------------------------------------------------------------------------


def test_retry_requeues_a_failed_task(admin_client, redis_client):
    [task_id] = failed_tasks(1)
    queue = TaskQueue()
    response = admin_client.post(
        url("admin:redisparts_task_retry", "default", task_id), follow=True
    )
    assert response.redirect_chain[-1][1] == 302
    assert f"Task {task_id} is back in its queue." in response.content.decode()
    assert queue.counts()["failed"] == 0
    assert queue.length("default") == 1
    redis_client.set("test:tasks:flag", 1)
    assert Worker(["default"]).run(burst=True) == 1
    assert redis_client.sismember("test:tasks:done", "f0")


def test_delete_removes_a_failed_task(admin_client):
    [task_id] = failed_tasks(1)
    response = admin_client.post(url("admin:redisparts_task_delete", "default", task_id))
    assert response.status_code == 302
    queue = TaskQueue()
    assert queue.counts()["failed"] == 0
    assert queue.length("default") == 0
    with pytest.raises(LookupError):
        queue.get(task_id)
    again = admin_client.post(url("admin:redisparts_task_delete", "default", task_id), follow=True)
    assert "Nothing done: no task" in again.content.decode()


def test_a_stuck_ready_task_is_deleted_from_its_queue_page(admin_client):
    from tests.tasks_helpers import record

    stuck, other = (record.enqueue_with(args=[n], on_commit=False) for n in ("a", "b"))
    page_url = url("admin:redisparts_peek", "default", "default")
    page = admin_client.get(page_url).content.decode()
    # One task is deleted as several are: through the bulk action, which asks on a page.
    bulk_url = url("admin:redisparts_task_bulk", "default")
    assert f'action="{bulk_url}"' in page
    assert f'name="ids" value="{stuck}"' in page
    assert "confirm(" not in page  # no browser confirm box
    asked = admin_client.post(bulk_url, {"action": "delete", "ids": stuck, "next": page_url})
    assert asked.status_code == 200
    assert "Yes, delete 1 task" in asked.content.decode()
    assert len(TaskQueue().peek("default")) == 2  # nothing done before the answer
    response = admin_client.post(
        bulk_url, {"action": "delete", "ids": stuck, "next": page_url, "confirmed": "yes"}
    )
    assert response.status_code == 302
    assert response["Location"] == page_url  # back to the queue's page
    assert [task.id for task in TaskQueue().peek("default")] == [other]
    elsewhere = admin_client.post(
        url("admin:redisparts_task_delete", "default", other), {"next": "https://evil.example/"}
    )
    assert elsewhere["Location"].startswith(url("admin:redisparts_tasks"))  # no open redirect


def test_the_task_page_deletes_through_the_same_confirmation_page(admin_client):
    [task_id] = failed_tasks(1)
    page = admin_client.get(url("admin:redisparts_task", "default", task_id)).content.decode()
    bulk_url = url("admin:redisparts_task_bulk", "default")
    form = page[page.index(f'action="{bulk_url}"') :]
    form = form[: form.index("</form>")]
    assert 'name="action" value="delete"' in form
    assert f'name="ids" value="{task_id}"' in form
    assert 'name="next"' not in form  # back to the queue's list: the task will be gone
    assert 'name="confirmed"' not in form


def test_a_stuck_lock_is_released_for_the_owner_seen_and_wakes_a_waiter(admin_client, caplog):
    held = Lock("stuck", ttl=600)
    fence = held.acquire()
    page = admin_client.get(url("admin:redisparts_locks")).content.decode()
    release_url = url("admin:redisparts_lock_release", "stuck")
    assert f'action="{release_url}"' in page
    assert "return confirm(" in page
    malformed = admin_client.post(release_url, {"owner": "another-token"}, follow=True)
    assert "Nothing done: invalid owner token" in malformed.content.decode()
    other = "0" * 32
    stale = admin_client.post(release_url, {"owner": other}, follow=True)
    assert f"no longer held by {other}" in stale.content.decode()
    assert held.owned()  # a token that is not the owner's releases nothing
    done = admin_client.post(release_url, {"owner": held.token}, follow=True)
    assert "Lock stuck released" in done.content.decode()
    assert not held.owned()
    assert "force-released" in caplog.text
    taker = Lock("stuck", ttl=5)
    assert taker.acquire(timeout=0.5) > fence  # the next holder's fence is higher


def test_bulk_retry_asks_first_then_requeues_the_chosen_tasks(admin_client):
    first, second, third = failed_tasks(3)
    page_url = url("admin:redisparts_tasks") + "?kind=failed&group=default"
    page = admin_client.get(page_url).content.decode()
    bulk_url = url("admin:redisparts_task_bulk", "default")
    assert f'action="{bulk_url}"' in page
    assert page.count('type="checkbox" name="ids"') == 3  # each Delete has one too
    chosen = {"action": "retry", "ids": [first, third], "next": page_url}
    asked = admin_client.post(bulk_url, chosen)
    assert asked.status_code == 200  # a page listing the chosen tasks, nothing done yet
    assert rows(asked.content.decode(), "rp-chosen") == 2
    assert "Yes, retry 2 tasks" in asked.content.decode()
    assert TaskQueue().counts()["failed"] == 3
    done = admin_client.post(bulk_url, {**chosen, "confirmed": "yes"})
    assert done["Location"] == page_url
    queue = TaskQueue()
    assert [task.id for task in queue.failed()] == [second]
    assert {task.id for task in queue.peek("default")} == {first, third}
    again = admin_client.post(bulk_url, {**chosen, "confirmed": "yes"}, follow=True)
    assert "0 tasks back in their queue; 2 no longer there to retry" in again.content.decode()


def test_bulk_delete_counts_what_was_gone_and_refuses_bad_requests(admin_client):
    ids = failed_tasks(2)
    bulk_url = url("admin:redisparts_task_bulk", "default")
    TaskQueue().delete(ids[0])  # someone else got there first
    done = admin_client.post(
        bulk_url, {"action": "delete", "ids": ids, "confirmed": "yes"}, follow=True
    )
    assert "1 task deleted; 1 no longer there." in done.content.decode()
    assert TaskQueue().counts()["failed"] == 0
    [left] = failed_tasks(1)
    refusals = {
        "choose retry, cancel or delete": {"action": "purge", "ids": [left]},
        "no task was selected": {"action": "delete"},
        "at most 50 tasks": {"action": "delete", "ids": [f"t{n}" for n in range(51)]},
    }
    for message, data in refusals.items():
        refused = admin_client.post(bulk_url, {**data, "confirmed": "yes"}, follow=True)
        assert f"Nothing done: {message}" in refused.content.decode()
    assert TaskQueue().counts()["failed"] == 1
    assert admin_client.get(bulk_url).status_code == 405


def test_live_pages_carry_their_refresh_and_others_do_not(admin_client):
    for name in ("changelist", "queues", "tasks", "locks", "semaphores"):
        page = admin_client.get(
            url(
                f"admin:redisparts_{name}"
                if name != "changelist"
                else "admin:redisparts_app_redisparts_changelist"
            )
        )
        assert 'data-rp-live="5"' in page.content.decode(), name
        assert "redisparts_app/admin/admin.js" in page.content.decode()
    assert "data-rp-live" not in admin_client.get(url("admin:redisparts_config")).content.decode()


def test_a_stuck_semaphore_permit_is_released_and_its_holder_finds_out(admin_client, caplog):
    semaphore = Semaphore("printers", 1, timeout=600)
    stuck = semaphore.acquire(reason="jammed")
    assert stuck is not None
    page = admin_client.get(url("admin:redisparts_semaphores")).content.decode()
    release_url = url("admin:redisparts_permit_release", "printers")
    assert f'action="{release_url}"' in page
    assert f'value="{stuck}"' in page
    assert "return confirm(" in page
    unknown = admin_client.post(release_url, {"holder": "0" * 32}, follow=True)
    assert "was no longer live" in unknown.content.decode()
    garbage = admin_client.post(release_url, {"holder": "<script>"}, follow=True)
    assert garbage.status_code == 200
    assert "Nothing done" in garbage.content.decode()
    assert [holder.id for holder in semaphore.holders()] == [stuck]
    done = admin_client.post(release_url, {"holder": stuck}, follow=True)
    assert "Permit released on printers" in done.content.decode()
    assert semaphore.holders() == []
    assert "force-released" in caplog.text
    assert semaphore.acquire(wait=0.5) is not None  # the slot is free again
    assert semaphore.refresh(stuck) is False  # the old holder learns it lost the permit


@pytest.mark.parametrize("name", ["admin:redisparts_task_retry", "admin:redisparts_task_delete"])
def test_get_on_an_action_is_refused(admin_client, name):
    [task_id] = failed_tasks(1)
    assert admin_client.get(url(name, "default", task_id)).status_code == 405
    assert TaskQueue().counts()["failed"] == 1
    assert admin_client.get(url("admin:redisparts_maintenance")).status_code == 405


def test_actions_need_the_csrf_token(client):
    [task_id] = failed_tasks(1)
    client.handler.enforce_csrf_checks = True
    client.force_login(User.objects.create_superuser("root", password="x"))
    response = client.post(url("admin:redisparts_task_retry", "default", task_id))
    assert response.status_code == 403
    assert TaskQueue().counts()["failed"] == 1


def test_maintenance_toggle_sets_and_clears_the_flag(admin_client):
    response = admin_client.post(
        url("admin:redisparts_maintenance"),
        {"action": "set", "retry_after": "120", "message": "Back soon"},
        follow=True,
    )
    assert "Maintenance mode is on" in response.content.decode()
    status = config.maintenance_status()
    assert status is not None
    assert status.retry_after == 120
    assert status.message == "Back soon"
    admin_client.post(url("admin:redisparts_maintenance"), {"action": "clear"})
    assert config.maintenance_status() is None
    refused = admin_client.post(
        url("admin:redisparts_maintenance"), {"action": "set", "retry_after": "-1"}, follow=True
    )
    assert "Maintenance mode not changed" in refused.content.decode()
    assert config.maintenance_status() is None


def test_config_editor_saves_json_and_refuses_bad_json(admin_client, redis_client):
    saved = admin_client.post(
        url("admin:redisparts_config"), {"kind": "logs", "name": "web", "value": '{"level": 3}'}
    )
    assert saved.status_code == 302
    assert config.get_config("logs", "web", wait=0) == {"level": 3}
    keys_before = sorted(redis_client.scan_iter(match="rp:config:*"))
    for bad in ['{"level": 3', "[1, 2]", "", '"text"']:
        response = admin_client.post(
            url("admin:redisparts_config"), {"kind": "logs", "name": "other", "value": bad}
        )
        assert response.status_code == 400
        assert 'class="errorlist' in response.content.decode()
    bad_name = admin_client.post(
        url("admin:redisparts_config"), {"kind": "logs", "name": "a{b}", "value": "{}"}
    )
    assert bad_name.status_code == 400
    assert "is not allowed" in bad_name.content.decode()
    for depth in (1_000, 100_000):  # past Python's recursion limit, not a 500
        deep = '{"a": ' * depth + "1" + "}" * depth
        response = admin_client.post(
            url("admin:redisparts_config"), {"kind": "logs", "name": "deep", "value": deep}
        )
        assert response.status_code == 400
        assert "Nested too deeply" in response.content.decode()
    assert sorted(redis_client.scan_iter(match="rp:config:*")) == keys_before
    assert config.get_config("logs", "web", wait=0) == {"level": 3}
    edit = admin_client.get(url("admin:redisparts_config") + "?kind=logs&name=web")
    assert "&quot;level&quot;: 3" in edit.content.decode()


# -- large lists and failures ---------------------------------------------------------------


def test_250_failed_tasks_are_shown_a_page_at_a_time(admin_client):
    ids = failed_tasks(250)
    first = admin_client.get(url("admin:redisparts_tasks") + "?kind=failed").content.decode()
    assert rows(first, "rp-task") == 50
    assert "Page 1 of 5 (250 in all)" in first
    last = admin_client.get(url("admin:redisparts_tasks") + "?kind=failed&page=5").content.decode()
    assert rows(last, "rp-task") == 50
    shown = set(re.findall(r'rp-mono">([0-9a-f]{32})</span>', last))
    assert shown == set(TaskQueue().failed(200, 50)[i].id for i in range(50))
    assert shown <= set(ids)
    assert len(shown & set(re.findall(r"[0-9a-f]{32}", first))) == 0
    beyond = admin_client.get(url("admin:redisparts_tasks") + "?kind=failed&page=99")
    assert "Page 5 of 5" in beyond.content.decode()


def walk_cursor_pages(client, page: str, item: str, most: int) -> tuple[set[str], int]:
    """Follow a SCAN-paged admin list to its end; return the items seen and the pages."""
    seen: set[str] = set()
    cursor, pages = "0", 0
    while pages < 100:
        pages += 1
        html = client.get(url(page) + f"?cursor={cursor}").content.decode()
        found = re.findall(item, html)
        assert len(found) <= most
        seen.update(found)
        match = re.search(r'\?cursor=(\d+)">next', html)
        if not match:
            break
        cursor = match.group(1)
    return seen, pages


def test_chats_are_paged_with_scan(admin_client):
    for n in range(60):
        chat.create_chat("ann", ["bob"], f"hi {n}", chat_id=f"c{n}")
    seen, pages = walk_cursor_pages(
        admin_client,
        "admin:redisparts_chats",
        r'<tr class="rp-chat"><td class="rp-mono">(c\d+)<',
        50,
    )
    assert seen == {f"c{n}" for n in range(60)}
    assert pages > 1


def test_locks_and_semaphores_are_paged_with_scan(admin_client):
    held = [Lock(f"item{n}", ttl=60) for n in range(130)]
    for lock in held:
        lock.acquire()
    seen, pages = walk_cursor_pages(
        admin_client, "admin:redisparts_locks", r"<tr><td>(item\d+)</td>", 100
    )
    assert seen == {f"item{n}" for n in range(130)}
    assert pages > 1
    for n in range(45):
        Semaphore(f"s{n}", 2, timeout=60).acquire(reason="paging")
    seen, pages = walk_cursor_pages(
        admin_client, "admin:redisparts_semaphores", r"<h2>(s\d+) — 1 holder</h2>", 40
    )
    assert seen == {f"s{n}" for n in range(45)}
    assert pages > 1


def test_bad_parameters_answer_404_not_500(admin_client):
    assert admin_client.get(url("admin:redisparts_tasks") + "?kind=nope").status_code == 404
    assert admin_client.get(url("admin:redisparts_tasks") + "?group=a*b").status_code == 404
    assert admin_client.get(url("admin:redisparts_task", "default", "missing")).status_code == 404
    assert admin_client.get(url("admin:redisparts_tasks") + "?page=-3").status_code == 200


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("parameter", ["cursor", "page", "start", "precision"])
def test_non_ascii_digits_in_a_number_parameter_are_ignored_not_a_500(
    admin_client, page, parameter
):
    for value in ("²", "\u00b3\u00b9", "\U0001d7d9"):  # isdigit() holds; int() refuses
        response = admin_client.get(reverse(page) + f"?{parameter}={value}")
        assert response.status_code == 200, (page, parameter, value)


DOWN = {"CONNECTIONS": {"default": {"URL": "redis://127.0.0.1:1/0"}}}


@pytest.mark.parametrize("page", PAGES)
def test_redis_down_shows_a_message_not_a_500(admin_client, page):
    # The mail page reads Redis once a user is looked up.
    query = "?user=cleo" if page == "admin:redisparts_mail" else ""
    with override_settings(REDISPARTS=DOWN):
        response = admin_client.get(url(page) + query)
    assert response.status_code == 503
    assert "Redis cannot be reached right now" in response.content.decode()


def test_json_in_arguments_is_escaped(admin_client):
    enqueue("shop.mail", args=["<script>alert(1)</script>"], queue="email", on_commit=False)
    html = admin_client.get(url("admin:redisparts_peek", "default", "email")).content.decode()
    assert "<script>alert(1)" not in html
    assert json.dumps("&lt;script&gt;")[1:-1] in html


def test_queue_peek_is_paged_with_ranges(admin_client):
    ids = [enqueue("shop.mail", args=[n], queue="email", on_commit=False) for n in range(120)]
    page = admin_client.get(url("admin:redisparts_peek", "default", "email") + "?page=3")
    html = page.content.decode()
    assert "Page 3 of 3 (120 in all)" in html
    assert re.findall(r'rp-mono">([0-9a-f]{32})</span>', html) == ids[100:]


# -- market, mail, presence, GeoIP --------------------------------------------------------


def test_market_page_shows_listings_the_outbox_and_a_users_account(admin_client, redis_client):
    market.create_user("ann", 10_000)
    market.create_user("ben", 250_075)
    for item, price in (("Lantern", 500), ("Oak shield", 120)):
        market.give_item("ann", item)
        market.list_item("ann", item, price)
    market.give_item("ann", "Rope")
    market.purchase("ben", "Lantern", "ann", 500)
    page = admin_client.get(url("admin:redisparts_market")).content.decode()
    assert rows(page, "rp-listing") == 1  # the shield; the lantern was sold
    assert "Oak shield" in page
    assert "1.20" in page
    assert rows(page, "rp-sale") == len(market.pending_sales())
    account = admin_client.get(url("admin:redisparts_market"), {"user": "ben"}).content.decode()
    assert "2,495.75" in account  # 2,500.75 less the lantern's 5.00
    assert "Lantern" in account
    nobody = admin_client.get(url("admin:redisparts_market"), {"user": "nobody"})
    assert "There is no market user named nobody." in nobody.content.decode()
    redis_client.zadd(market.outbox_key(), {"{not json": 0})  # written by hand, by mistake
    broken = admin_client.get(url("admin:redisparts_market")).content.decode()
    assert "The outbox holds a record that cannot be read" in broken
    hostile = admin_client.get(url("admin:redisparts_market"), {"user": "a:b{c}"})
    assert hostile.status_code == 200
    assert "errornote" in hostile.content.decode()


def test_mail_page_shows_a_mailbox_page_by_page_without_bodies(admin_client):
    box = Mailbox("cleo")
    for n in range(23):
        box.send("dan", f"Subject {n}", f"secret body {n}")
    box.mark_read(23)
    first = admin_client.get(url("admin:redisparts_mail"), {"user": "cleo"}).content.decode()
    assert rows(first, "rp-mail") == 20
    assert "23 messages, 22 unread" in first
    assert "secret body" not in first
    assert "user=cleo&amp;page=2" in first
    second = admin_client.get(url("admin:redisparts_mail"), {"user": "cleo", "page": "2"})
    assert rows(second.content.decode(), "rp-mail") == 3
    empty = admin_client.get(url("admin:redisparts_mail"), {"user": "nobody"}).content.decode()
    assert "No mail." in empty


def test_presence_page_counts_and_pages_who_is_online_and_a_users_friends(admin_client):
    for n in range(105):
        presence.record_activity(f"user{n:03d}")
    presence.add_friend("user000", "user001")
    presence.add_friend("user000", "offline")
    page = admin_client.get(url("admin:redisparts_presence")).content.decode()
    _users, total = presence.online_page()
    assert total >= 105  # and whoever the site's presence middleware saw (the admin)
    assert rows_li(page, "rp-online") == 100
    assert f">{total}<" in page
    second = admin_client.get(url("admin:redisparts_presence"), {"page": "2"}).content.decode()
    assert rows_li(second, "rp-online") == total - 100
    friends = admin_client.get(url("admin:redisparts_presence"), {"user": "user000"})
    text = friends.content.decode()
    assert "offline, user001" in text  # every friend
    assert re.search(r"Friends online</th><td>user001</td>", text)


def test_online_page_is_most_recent_first_and_checks_its_arguments():
    presence.record_activity("early", clock=lambda: 1_000_000.0)
    presence.record_activity("late", clock=lambda: 1_000_030.0)
    assert presence.online_page(clock=lambda: 1_000_031.0) == (["late", "early"], 2)
    assert presence.online_page(1, 1, clock=lambda: 1_000_031.0) == (["early"], 2)
    with pytest.raises(ValueError, match="count"):
        presence.online_page(0, 0)
    with pytest.raises(ValueError, match="offset"):
        presence.online_page(-1)


def test_geoip_page_counts_the_import_and_finds_a_city(admin_client):
    empty = admin_client.get(url("admin:redisparts_geoip")).content.decode()
    assert "Nothing imported yet" in empty
    geoip.import_geoip(geoip.SAMPLE_BLOCKS, geoip.SAMPLE_LOCATIONS)
    blocks, cities = geoip.counts()
    assert blocks > 0
    assert cities > 0
    page = admin_client.get(url("admin:redisparts_geoip"), {"ip": "11.0.0.1"}).content.decode()
    assert f">{blocks}<" in page
    assert '<th scope="row">Geoname id</th><td>9100024</td>' in page
    gap = admin_client.get(url("admin:redisparts_geoip"), {"ip": "1.2.3.4"}).content.decode()
    assert "No imported block holds 1.2.3.4." in gap
    bad = admin_client.get(url("admin:redisparts_geoip"), {"ip": "999.1.1.1"}).content.decode()
    assert "errornote" in bad
    assert "dotted quad" in bad


def rows_li(html: str, css_class: str) -> int:
    return len(re.findall(rf'<li class="{css_class}"', html))


def test_files_page_shows_a_distribution_under_way_until_it_ends(admin_client, tmp_path):
    for n in range(3):
        (tmp_path / f"part-{n}.log").write_bytes(b"line\n" * (n + 1))
    upload = threading.Thread(
        target=files.copy_logs_to_redis,
        args=(tmp_path, "nightly"),
        kwargs={"processors": 2, "limit": 10_000, "wait_timeout": 30},
    )
    upload.start()
    try:
        # The start, three files and the end mark are announced; nobody has taken them yet.
        assert wait_until(lambda: chat_last_id("nightly") == 5)  # start, 3 files, done
        page = admin_client.get(url("admin:redisparts_files")).content.decode()
        assert rows(page, "rp-channel") == 1
        assert "uploading" in page
        assert re.search(r"0 \(5\)</span> <span class=\"rp-member\">1 \(5\)", page)
        lines: list[bytes] = []
        files.process_logs_from_redis("nightly", "0", lines.append)
        page = admin_client.get(url("admin:redisparts_files")).content.decode()
        assert re.search(r"<span class=\"rp-member\">1 \(5\)", page)
        assert "0 (" not in page  # processor 0 took everything and left
        files.process_logs_from_redis("nightly", "1", lines.append)
    finally:
        upload.join(30)
    assert len(lines) == 2 * (1 + 2 + 3)
    assert files.channels() == []
    ended = admin_client.get(url("admin:redisparts_files")).content.decode()
    assert "No distribution is under way." in ended


def chat_last_id(chat_id: str) -> int | None:
    overview = listings.chat_overview(chat_id)
    return overview.last_id if overview else None
