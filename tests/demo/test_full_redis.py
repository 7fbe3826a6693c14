"""The site and the admin on a Redis that is full: a real redis-server under noeviction,
filled with SETs until it refuses one (``maxmemory`` just above the memory it used), then
its limit set MARGIN under the memory in use, so that memory a request frees (a
connection closed, a log trimmed) cannot bring it back under its limit.

Every request that would add data answers the 503 page and leaves every key as it was;
a request that only takes data away (``REMOVALS``) may be carried out instead, since
Redis runs commands that free memory; pages that only read still work. All on the demo's own set-up
(AOF on, the ASGI face, htmx requests) and on a plain server (no AOF, WSGI pages).
"""

import itertools
import re
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.test import AsyncClient, Client

from redisparts_app.services import config
from redisparts_app.services.locks import Lock
from redisparts_app.services.semaphores import Semaphore
from redisparts_app.services.tasks import Worker
from tests.demo.site_helpers import BOOKKEEPING
from tests.demo.test_access import (  # noqa: F401 (visitors: a fixture)
    ACCESS,
    ADMIN_LOGIN,
    LOGIN,
    RP,
    Check,
    visitors,
)
from tests.tasks_helpers import fails_until_flag

# How far under the memory in use the limit is set once the server is full.
MARGIN = 256 * 1024


@dataclass(frozen=True)
class SetUp:
    args: tuple[str, ...]
    asgi: bool
    headers: dict[str, str]


SETUPS = {
    # The embedded server as `manage.py demo` runs it, the site under ASGI as uvicorn
    # serves it, posts as htmx sends them.
    "demo": SetUp(
        ("--appendonly", "yes", "--appendfsync", "everysec"), True, {"HX-Request": "true"}
    ),
    "plain": SetUp((), False, {}),
}

# The last request of each entry of the access table, which succeeds on a Redis with room
# (but the event stream, which never ends: the push tests stream it), and the writes the
# table does not reach.
REQUESTS: dict[str, tuple[str, Check]] = {
    route: (entry.path, entry.checks[-1])
    for route, entry in ACCESS.items()
    if route != "chat/<str:chat_id>/events/"
}
REQUESTS |= {
    "bulk retry": (
        f"{RP}/bulk-actions/default/",
        Check("admin", 302, "POST", {"action": "retry", "ids": "{failed}", "confirmed": "yes"}),
    ),
    "bulk delete": (
        f"{RP}/bulk-actions/default/",
        Check("admin", 302, "POST", {"action": "delete", "ids": "{failed}", "confirmed": "yes"}),
    ),
    "bulk cancel": (
        f"{RP}/bulk-actions/default/",
        Check("admin", 302, "POST", {"action": "cancel", "ids": "{ready}", "confirmed": "yes"}),
    ),
    "retry a failed task": (f"{RP}/tasks/default/{{failed}}/retry/", Check("admin", 302, "POST")),
    "cancel a ready task": (f"{RP}/tasks/default/{{ready}}/cancel/", Check("admin", 302, "POST")),
    "release a held lock": (
        f"{RP}/locks/held/release/",
        Check("admin", 302, "POST", {"owner": "{lock}"}),
    ),
    "release a held permit": (
        f"{RP}/semaphores/held/release/",
        Check("admin", 302, "POST", {"holder": "{permit}"}),
    ),
    "run a schedule now": (
        f"{RP}/schedules/prune-registries/",
        Check("admin", 302, "POST", {"action": "run"}),
    ),
    "time a schedule": (
        f"{RP}/schedules/prune-registries/",
        Check("admin", 302, "POST", {"action": "set", "every": "60"}),
    ),
    "delete a configuration": (
        f"{RP}/config/",
        Check(
            "admin", 302, "POST", {"kind": "logs", "name": "kept", "value": "{}", "delete": "on"}
        ),
    ),
}
# Requests that only take data away, which Redis may carry out when full: those whose
# commands free memory (a MULTI is refused whole by Redis 6.2 and 7, not by Valkey 8).
REMOVALS = {
    "friends/remove/",
    "guild/leave/",
    "mail/<int:message_id>/",  # reading a message takes it from the unread ones
    "mail/<int:message_id>/delete/",
    "chat/<str:chat_id>/leave/",
    "admin/redisparts_app/redisparts/locks/<str:name>/release/",
    "admin/redisparts_app/redisparts/tasks/<str:group>/<str:task_id>/delete/",
    "bulk delete",
    "release a held lock",
    "release a held permit",
    "delete a configuration",
}
# Posts that write nothing to Redis: signing in and out (the sessions are in the
# database), the page asking to confirm a bulk action.
NO_REDIS_WRITE = {
    "login/",
    "logout/",
    "admin/login/",
    "admin/logout/",
    "admin/redisparts_app/redisparts/bulk-actions/<str:group>/",
    # The table's task has failed by then: a cancel finds it finished and does nothing.
    "admin/redisparts_app/redisparts/tasks/<str:group>/<str:task_id>/cancel/",
}
# Pages that take something for the reader (a chat's pending messages): a write.
TAKING = {"chat/<str:chat_id>/", "chat/<str:chat_id>/poll/"}
# A released lock leaves its waiters a wake-up (one entry, expiring with the lock).
WAKE_UP = re.compile(rb"^[^:]+:lock:\{[^}]+\}:signal$")
# The health check fails its memory check.
ANSWERS = {"health/": 500}
PLACEHOLDER = re.compile(r"\{(\w+)\}")


def must_refuse(name: str, check: Check) -> bool:
    """Whether the request would add data: then it answers 503."""
    if check.method == "GET":
        return name in TAKING
    return name not in REMOVALS | NO_REDIS_WRITE


def contents(client: redis.Redis, key: bytes) -> set[Any] | bytes | None:
    """What ``key`` holds, as a set of its parts where it has parts."""
    kind = client.type(key).decode()
    if kind == "none":
        return None
    if kind == "set":
        return client.smembers(key)
    if kind == "zset":
        return set(client.zrange(key, 0, -1, withscores=True))
    if kind == "hash":
        return set(client.hgetall(key).items())
    if kind == "list":
        return set(enumerate(client.lrange(key, 0, -1)))
    if kind == "stream":
        return {entry_id for entry_id, _ in client.xrange(key)}
    return client.dump(key)


def snapshot(client: redis.Redis) -> dict[bytes, Any]:
    return {key: contents(client, key) for key in client.scan_iter(count=1000)}


def changes(before: dict[bytes, Any], after: dict[bytes, Any], removal: bool) -> list[bytes]:
    """The keys that changed but the bookkeeping; with ``removal``, those that changed
    by more than parts (or whole keys) taken away."""
    found = []
    for key in before.keys() | after.keys():
        old, new = before.get(key), after.get(key)
        if new == old or BOOKKEEPING.match(key):
            continue
        if removal and (new is None or WAKE_UP.match(key)):
            continue
        if removal and isinstance(old, set) and isinstance(new, set) and new <= old:
            continue
        found.append(key)
    return sorted(found)


def fill(client: redis.Redis) -> None:
    """Write until the server refuses a SET, then lower its limit MARGIN under its memory."""
    used = client.info("memory")["used_memory"]
    client.config_set("maxmemory", used + 64 * 1024)
    for n in itertools.count():
        try:
            client.set(f"test:fill:{n}", b"x" * 1024)
        except redis.OutOfMemoryError:
            break
    used = client.info("memory")["used_memory"]
    client.config_set("maxmemory", used - MARGIN)


@pytest.fixture(params=SETUPS)
def full_site(request, redis_server_factory, settings, transactional_db):
    """The site on a server of its own with the demo data and what the requests act on."""
    setup = SETUPS[request.param]
    server = redis_server_factory(args=["--maxmemory-policy", "noeviction", *setup.args])
    settings.REDISPARTS = {**settings.REDISPARTS, "CONNECTIONS": {"default": server.url}}
    places = dict(request.getfixturevalue("visitors"))
    failed = fails_until_flag.enqueue_with(args=["full"], on_commit=False)
    assert Worker(["default"]).run(burst=True) >= 1
    ready = fails_until_flag.enqueue_with(args=["ready"], on_commit=False)
    lock = Lock("held", ttl=600)
    lock.acquire()
    permit = Semaphore("held", limit=2, timeout=600).acquire()
    assert permit is not None
    config.set_config("logs", "kept", {})
    places |= {"failed": failed, "ready": ready, "lock": lock.token, "permit": permit}
    return server, setup, places


@pytest.mark.parametrize("name", REQUESTS)
def test_a_full_redis_refuses_every_write_whole(name, full_site):
    server, setup, places = full_site
    path, check = REQUESTS[name]

    def fill_in(text: str) -> str:
        return PLACEHOLDER.sub(lambda found: places.get(found[1], found[0]), text)

    client = (AsyncClient if setup.asgi else Client)(headers=setup.headers)
    client.raise_request_exception = False
    if check.user is not None:
        client.force_login(User.objects.get(username=check.user))
    send = client.get if check.method == "GET" else client.post
    data = {field: fill_in(value) for field, value in (check.data or {}).items()}
    with server.client() as admin:
        fill(admin)
        before = snapshot(admin)
        response = (async_to_sync(send) if setup.asgi else send)(fill_in(path), data)
        after = snapshot(admin)
        assert admin.info("memory")["used_memory"] > int(admin.config_get("maxmemory")["maxmemory"])
    normal = ANSWERS.get(name, 302 if check.expect in (LOGIN, ADMIN_LOGIN) else check.expect)
    status = response.status_code
    if must_refuse(name, check):
        assert status == 503, f"{name}: {status}"
    elif name in REMOVALS:
        assert status in (normal, 503), f"{name}: {status}"
    else:
        assert status == normal, f"{name}: {status}"
    assert changes(before, after, removal=status != 503 and name in REMOVALS) == []
    if status == 503:
        assert response["Retry-After"]
        assert "right back" in response.content.decode()


def test_health_reports_a_full_redis(full_site):
    server, _, _ = full_site
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    with server.client() as admin:
        fill(admin)
    response = client.get("/health/?format=json")
    assert response.status_code == 500
    failing = {name: text for name, text in response.json().items() if text != "OK"}
    assert list(failing) == ["MemoryNearLimit"], failing
    assert "of maxmemory in use" in failing["MemoryNearLimit"]
