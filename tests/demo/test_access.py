"""Who may open what: every URL pattern of the site, for every kind of visitor, and CSRF.

``ACCESS`` has an entry for every URL pattern (the site's, the social pages', Django's
admin and the Redis parts admin); a pattern without one fails
``test_every_url_pattern_has_an_entry``, so a new view cannot go untested. Each entry
lists requests and the answer each visitor gets:

- ``None``: anonymous; ``alice``: an ordinary user (member of the tavern chat and the
  Knights guild, owner of her mail, listings and inventory);
- ``dave``: another user, not in the tavern chat nor the Knights guild, acting on what
  alice owns;
- ``clerk``: staff without any permission of the apps; ``admin``: a superuser.

``LOGIN``/``ADMIN_LOGIN`` mean a redirect to the site's/admin's login page. A refused
request (anything but the last, successful request of an entry) must leave the data in
Redis unchanged. Every page answered 200 has the CSRF token in each of its POST forms,
and every pattern refuses a POST without the token with 403.
"""

import re
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group, User
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from marketplace.demo_data import CHAT_ID
from redisparts_app.services.mail import Mailbox
from tests.demo.site_helpers import GUARDS, client_for, data_snapshot
from tests.tasks_helpers import fails_until_flag

LOGIN = "login"
ADMIN_LOGIN = "admin-login"


@dataclass(frozen=True)
class Check:
    user: str | None
    expect: int | str
    method: str = "GET"
    data: dict | None = None
    path: str = ""  # the entry's path when empty


@dataclass(frozen=True)
class Entry:
    """A concrete ``path`` of a pattern (``{name}`` placeholders are filled per test run)
    and the requests made to it, in order; only the last one may write."""

    path: str
    checks: tuple[Check, ...]


def page(path: str, status: int = 200, **others: int | str) -> Entry:
    """A page for signed-in users; ``others``: what other users get."""
    refusals = [Check(user, expect) for user, expect in others.items()]
    return Entry(path, (Check(None, LOGIN), *refusals, Check("alice", status)))


def action(
    path: str, data: dict, done: int = 302, refusals: tuple[Check, ...] = (), **others: int | str
) -> Entry:
    """A POST for signed-in users; ``others``: what other users get (changing nothing),
    ``refusals``: other requests refused."""
    refusals = (*refusals, *(Check(user, expect, "POST", data) for user, expect in others.items()))
    return Entry(
        path,
        (
            Check(None, LOGIN, "POST", data),
            Check("alice", 405),  # GET
            *refusals,
            Check("alice", done, "POST", data),
        ),
    )


def staff_page(path: str, status: int = 200, clerk: int = 403) -> Entry:
    """An admin page: staff only; ``clerk`` is what staff without permissions get."""
    return Entry(
        path,
        (
            Check(None, ADMIN_LOGIN),
            Check("alice", ADMIN_LOGIN),
            Check("clerk", clerk),
            Check("admin", status),
        ),
    )


def staff_action(path: str, data: dict, done: int = 302, clerk: int = 403) -> Entry:
    return Entry(
        path,
        (
            Check(None, ADMIN_LOGIN, "POST", data),
            Check("alice", ADMIN_LOGIN, "POST", data),
            Check("clerk", clerk, "POST", data),
            Check("admin", 405),  # GET
            Check("admin", done, "POST", data),
        ),
    )


CHAT = f"/chat/{CHAT_ID}"
RP = "/admin/redisparts_app/redisparts"
SOLD = {"seller": "bob", "item": "Healing potion", "price": "450"}

# Keyed by the pattern's route, as ``url_patterns()`` spells it.
ACCESS: dict[str, Entry] = {
    # The site.
    "": Entry("/", (Check(None, 200), Check("alice", 200))),
    "login/": Entry(
        "/login/",
        (
            Check(None, 200),
            Check(None, 302, "POST", {"username": "alice", "password": "alice-demo"}),
        ),
    ),
    "logout/": Entry("/logout/", (Check("alice", 405), Check("alice", 302, "POST", {}))),
    "market/": page("/market/"),
    "market/buy/": action("/market/buy/", SOLD),
    # Listing an item of someone else's inventory is refused.
    "market/sell/": action(
        "/market/sell/",
        {"item": "Silver sword", "price": "12.50"},
        refusals=(Check("alice", 400, "POST", {"item": "Healing potion", "price": "5"}),),
    ),
    # dave cancelling alice's listing: the market says no (a message), nothing changes.
    "market/cancel/": action("/market/cancel/", {"item": "Lantern"}, dave=302),
    "market/open/": action("/market/open/", {}),
    "outbox/": page("/outbox/"),
    "friends/": page("/friends/"),
    "friends/add/": action("/friends/add/", {"username": "dave"}),
    "friends/remove/": action("/friends/remove/", {"username": "bob"}),
    "stats/": page("/stats/"),
    # The social pages.
    "guild/": page("/guild/"),
    "guild/join/": action("/guild/join/", {"guild": "Archers"}),
    "guild/leave/": action("/guild/leave/", {"guild": "Knights"}, dave=400),
    "guild/members/": page("/guild/members/?guild=Knights", dave=403),
    "contacts/suggest/": page("/contacts/suggest/?field=to&to=b"),
    "mail/": page("/mail/"),
    "mail/compose/": Entry(
        "/mail/compose/",
        (
            Check(None, LOGIN),
            Check(None, LOGIN, "POST", {"to": "bob", "subject": "s", "body": "b"}),
            # dave shares no guild with alice.
            Check("dave", 400, "POST", {"to": "alice", "subject": "s", "body": "b"}),
            Check("alice", 200),
            Check("alice", 302, "POST", {"to": "bob", "subject": "s", "body": "b"}),
        ),
    ),
    "mail/<int:message_id>/": page("/mail/{mail}/", dave=404),
    "mail/<int:message_id>/delete/": action("/mail/{mail}/delete/", {}, dave=404),
    "chat/": page("/chat/"),
    "chat/new/": action("/chat/new/", {"members": "bob", "message": "Hi"}),
    "chat/<str:chat_id>/": page(f"{CHAT}/", dave=403),
    "chat/<str:chat_id>/send/": action(f"{CHAT}/send/", {"text": "hi"}, dave=403),
    "chat/<str:chat_id>/poll/": page(f"{CHAT}/poll/?after=0", dave=403),
    # The test client is WSGI, where the event stream is refused (the page polls): 503
    # after the checks; test_push_events.py streams it under ASGI.
    "chat/<str:chat_id>/events/": page(f"{CHAT}/events/?after=0", status=503, dave=403),
    "chat/<str:chat_id>/older/": page(f"{CHAT}/older/?before=2", dave=403),
    "chat/<str:chat_id>/add/": action(f"{CHAT}/add/", {"member": "dave"}, dave=403),
    "chat/<str:chat_id>/leave/": action(f"{CHAT}/leave/", {}, dave=403),
    # Django's admin.
    "admin/login/": Entry(
        "/admin/login/",
        (
            Check(None, 200),
            # An ordinary user's right password does not open the admin.
            Check(None, 200, "POST", {"username": "alice", "password": "alice-demo"}),
            Check(None, 302, "POST", {"username": "admin", "password": "admin-demo"}),
        ),
    ),
    "admin/": staff_page("/admin/", clerk=200),
    "admin/logout/": Entry(
        "/admin/logout/",
        (
            # Non-staff are sent to the admin's index, which sends them to its login.
            Check(None, 302, "POST", {}),
            Check("alice", 302, "POST", {}),
            Check("admin", 405),
            Check("admin", 302, "POST", {}),  # to LOGOUT_REDIRECT_URL
        ),
    ),
    "admin/password_change/": staff_page("/admin/password_change/", clerk=200),
    "admin/password_change/done/": staff_page("/admin/password_change/done/", clerk=200),
    "admin/autocomplete/": staff_page(
        "/admin/autocomplete/?app_label=auth&model_name=user&field_name=groups&term=a"
    ),
    "admin/jsi18n/": staff_page("/admin/jsi18n/", clerk=200),
    # Users have no page on the site to go to.
    "admin/r/<path:content_type_id>/<path:object_id>/": staff_page(
        "/admin/r/{user_type}/{alice_id}/", status=404, clerk=404
    ),
    "admin/auth/group/": staff_page("/admin/auth/group/"),
    "admin/auth/group/add/": staff_page("/admin/auth/group/add/"),
    "admin/auth/group/<path:object_id>/history/": staff_page("/admin/auth/group/{group}/history/"),
    "admin/auth/group/<path:object_id>/delete/": staff_page("/admin/auth/group/{group}/delete/"),
    "admin/auth/group/<path:object_id>/change/": staff_page("/admin/auth/group/{group}/change/"),
    # Old-style object URLs redirect to the change page, which is staff only (above).
    "admin/auth/group/<path:object_id>/": Entry(
        "/admin/auth/group/{group}/", (Check(None, 302), Check("alice", 302))
    ),
    "admin/auth/user/<id>/password/": staff_page("/admin/auth/user/{alice_id}/password/"),
    "admin/auth/user/": staff_page("/admin/auth/user/"),
    "admin/auth/user/add/": staff_page("/admin/auth/user/add/"),
    "admin/auth/user/<path:object_id>/history/": staff_page("/admin/auth/user/{alice_id}/history/"),
    "admin/auth/user/<path:object_id>/delete/": staff_page("/admin/auth/user/{alice_id}/delete/"),
    "admin/auth/user/<path:object_id>/change/": staff_page("/admin/auth/user/{alice_id}/change/"),
    "admin/auth/user/<path:object_id>/": Entry(
        "/admin/auth/user/{alice_id}/", (Check(None, 302), Check("alice", 302))
    ),
    "admin/^(?P<app_label>auth|redisparts_app)/$": staff_page("/admin/auth/", clerk=404),
    "admin/(?P<url>.*)$": staff_page("/admin/nowhere/", status=404, clerk=404),
    # Operations: staff with view_redisparts (or the metrics token, tests/test_health.py).
    **{
        route: Entry(
            f"/{route}",
            (Check(None, 403), Check("alice", 403), Check("clerk", 403), Check("admin", 200)),
        )
        for route in ("metrics", "health/")
    },
    # The Redis parts admin.
    "admin/redisparts_app/redisparts/": staff_page(f"{RP}/"),
    "admin/redisparts_app/redisparts/queues/": staff_page(f"{RP}/queues/"),
    "admin/redisparts_app/redisparts/queues/<str:group>/<str:queue>/": staff_page(
        f"{RP}/queues/default/default/"
    ),
    "admin/redisparts_app/redisparts/tasks/": staff_page(f"{RP}/tasks/"),
    "admin/redisparts_app/redisparts/tasks/<str:group>/<str:task_id>/": staff_page(
        f"{RP}/tasks/default/{{task}}/"
    ),
    "admin/redisparts_app/redisparts/tasks/<str:group>/<str:task_id>/retry/": staff_action(
        f"{RP}/tasks/default/{{task}}/retry/", {}
    ),
    "admin/redisparts_app/redisparts/tasks/<str:group>/<str:task_id>/delete/": staff_action(
        f"{RP}/tasks/default/{{task}}/delete/", {}
    ),
    "admin/redisparts_app/redisparts/tasks/<str:group>/<str:task_id>/cancel/": staff_action(
        f"{RP}/tasks/default/{{task}}/cancel/", {}
    ),
    "admin/redisparts_app/redisparts/bulk-actions/<str:group>/": staff_action(
        f"{RP}/bulk-actions/default/", {"action": "delete", "ids": "t1"}, done=200
    ),  # the page that asks first
    "admin/redisparts_app/redisparts/locks/": staff_page(f"{RP}/locks/"),
    # A lock nobody holds: the release refuses with a message and redirects.
    "admin/redisparts_app/redisparts/locks/<str:name>/release/": staff_action(
        f"{RP}/locks/idle/release/", {"owner": "0" * 32}
    ),
    "admin/redisparts_app/redisparts/semaphores/": staff_page(f"{RP}/semaphores/"),
    # A permit nobody holds: the release refuses with a message and redirects.
    "admin/redisparts_app/redisparts/semaphores/<str:name>/release/": staff_action(
        f"{RP}/semaphores/idle/release/", {"holder": "0" * 32}
    ),
    "admin/redisparts_app/redisparts/chats/": staff_page(f"{RP}/chats/"),
    "admin/redisparts_app/redisparts/files/": staff_page(f"{RP}/files/"),
    "admin/redisparts_app/redisparts/market/": staff_page(f"{RP}/market/?user=alice"),
    "admin/redisparts_app/redisparts/mail/": staff_page(f"{RP}/mail/?user=alice"),
    "admin/redisparts_app/redisparts/presence/": staff_page(f"{RP}/presence/?user=alice"),
    "admin/redisparts_app/redisparts/geoip/": staff_page(f"{RP}/geoip/?ip=11.0.0.1"),
    "admin/redisparts_app/redisparts/counters/": staff_page(f"{RP}/counters/"),
    "admin/redisparts_app/redisparts/stats/": staff_page(f"{RP}/stats/"),
    "admin/redisparts_app/redisparts/logs/": staff_page(f"{RP}/logs/"),
    "admin/redisparts_app/redisparts/config/": Entry(
        f"{RP}/config/",
        (
            *staff_page(f"{RP}/config/").checks,
            *(
                Check(user, expect, "POST", {"kind": "logs", "name": "site", "value": "{}"})
                for user, expect in ((None, ADMIN_LOGIN), ("alice", ADMIN_LOGIN), ("clerk", 403))
            ),
            Check("admin", 302, "POST", {"kind": "logs", "name": "site", "value": "{}"}),
        ),
    ),
    "admin/redisparts_app/redisparts/config/maintenance/": staff_action(
        f"{RP}/config/maintenance/", {"retry_after": "60", "message": "Back soon"}
    ),
    "admin/redisparts_app/redisparts/schedules/": staff_page(f"{RP}/schedules/"),
    # Pausing a schedule of the demo: staff only, a POST that redirects back.
    "admin/redisparts_app/redisparts/schedules/<str:name>/": staff_action(
        f"{RP}/schedules/prune-registries/", {"action": "pause"}
    ),
    "admin/redisparts_app/redisparts/persistence/": staff_page(f"{RP}/persistence/"),
    "admin/redisparts_app/redisparts/autocomplete/": staff_page(f"{RP}/autocomplete/"),
}


def url_patterns(patterns=None, prefix: str = "") -> list[str]:
    """The routes of every URL pattern of the site, includes walked."""
    routes = []
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            routes += url_patterns(pattern.url_patterns, route)
        else:
            assert isinstance(pattern, URLPattern)
            routes.append(route)
    return routes


def test_every_url_pattern_has_an_entry():
    routes = set(url_patterns())
    assert routes - ACCESS.keys() == set(), "URL patterns missing from ACCESS"
    assert ACCESS.keys() - routes == set(), "ACCESS entries of patterns that are gone"


@pytest.fixture
def visitors(demo, redis_client, django_user_model) -> dict[str, str]:
    """The demo's users plus ``clerk``; the values of the paths' placeholders."""
    django_user_model.objects.create_user("clerk", password="clerk-demo", is_staff=True)
    group = Group.objects.create(name="auditors")
    [mail, *_] = Mailbox("alice").fetch(0, 10).messages
    return {
        "mail": str(mail.id),
        "group": str(group.pk),
        "alice_id": str(User.objects.get(username="alice").pk),
        "user_type": str(ContentType.objects.get_for_model(User).pk),
        "task": fails_until_flag.enqueue("access"),
    }


POST_FORM = re.compile(r"<form\b[^>]*\bmethod=\"?post\b.*?</form>", re.I | re.S)


def assert_post_forms_carry_the_token(response) -> None:
    if "text/html" not in response.get("Content-Type", ""):
        return
    for form in POST_FORM.findall(response.content.decode()):
        assert 'name="csrfmiddlewaretoken"' in form, f"a POST form without CSRF token: {form}"


def assert_answer(check: Check, response, path: str) -> None:
    expect = check.expect
    if expect in (LOGIN, ADMIN_LOGIN):
        login = "/login/" if expect == LOGIN else "/admin/login/"
        assert response.status_code == 302, f"{check}: {response.status_code}"
        assert response["Location"].startswith(f"{login}?next="), response["Location"]
    else:
        assert response.status_code == expect, f"{check}: got {response.status_code}"


@pytest.mark.parametrize("route", ACCESS, ids=lambda route: route or "home")
def test_each_visitor_gets_the_expected_answer(route, visitors, redis_client):
    entry = ACCESS[route]
    last = entry.checks[-1]
    for check in entry.checks:
        path = (check.path or entry.path).format(**visitors)
        before = data_snapshot(redis_client, GUARDS) if check is not last else None
        client = client_for(check.user)
        response = client.get(path) if check.method == "GET" else client.post(path, check.data)
        assert_answer(check, response, path)
        if response.status_code == 200:
            assert_post_forms_carry_the_token(response)
        if before is not None:
            assert data_snapshot(redis_client, GUARDS) == before, f"{check} changed data"


def csrf_token(client: Client) -> str:
    # A page with a form sets the CSRF cookie (signed in: the home page /login/ sends to).
    client.get("/login/", follow=True)
    return client.cookies["csrftoken"].value


@pytest.mark.parametrize("route", ACCESS, ids=lambda route: route or "home")
def test_posts_without_the_csrf_token_are_refused(route, visitors, redis_client):
    """Every pattern refuses a POST without the token (no view is csrf_exempt); the POSTs
    of the table are then accepted with it, so the 403 was the token's doing."""
    entry = ACCESS[route]
    for check in entry.checks:
        if check.method != "POST":
            continue
        path = (check.path or entry.path).format(**visitors)
        client = client_for(check.user, enforce_csrf_checks=True)
        before = data_snapshot(redis_client, GUARDS)
        response = client.post(path, check.data)
        assert response.status_code == 403, f"{check}: {response.status_code}"
        assert "CSRF" in response.content.decode()
        assert data_snapshot(redis_client, GUARDS) == before
        response = client.post(path, {**check.data, "csrfmiddlewaretoken": csrf_token(client)})
        assert_answer(check, response, path)
    if not any(check.method == "POST" for check in entry.checks):
        # GET-only views too: the middleware refuses before the view says 405.
        user = next(check.user for check in reversed(entry.checks))
        client = client_for(user, enforce_csrf_checks=True)
        response = client.post(entry.path.format(**visitors), {})
        assert response.status_code == 403
        assert "CSRF" in response.content.decode()
