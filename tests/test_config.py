import asyncio
import inspect
import json
import math

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import override_settings

from redisparts_app.connection import aclose_async_clients, get_async_redis, get_redis
from redisparts_app.exceptions import ComponentConnectionError, InvalidArgument
from redisparts_app.services import config
from redisparts_app.services.config import (
    clear_maintenance,
    get_config,
    is_under_maintenance,
    redis_connection,
    set_config,
    set_maintenance,
)
from tests.counting import command_calls
from tests.processes import run_in_processes

pytestmark = pytest.mark.cluster


class Clock:
    """A settable clock for the caches (seconds)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def _fresh_cache():
    config.clear_local_cache()
    yield
    config.clear_local_cache()


@pytest.fixture
def svc(face):
    """The config module on the test's face; the async component clients closed after."""
    yield face(config)
    if face.is_async:
        face.run(config.aclose_component_clients())


def gets(client) -> int:
    """GET commands the server (every primary of a cluster) has executed so far."""
    return command_calls(client, "get")


def awaited(face, value):
    """``value``, awaited on the async face (a command of an async client)."""
    return face.run(value) if inspect.isawaitable(value) else value


def test_config_round_trip_and_missing_config_is_empty(redis_client, svc):
    assert svc.get_config("logs", "main") == {}
    svc.set_config("logs", "main", {"level": "info", "targets": ["a", "b"], "ünï": 1})
    assert svc.get_config("logs", "main") == {"level": "info", "targets": ["a", "b"], "ünï": 1}
    stored = redis_client.get(config.config_key("logs", "main"))
    assert json.loads(stored)["level"] == "info"
    assert svc.delete_config("logs", "main") is True
    assert svc.get_config("logs", "main") == {}
    assert svc.delete_config("logs", "main") is False


def test_get_config_reads_redis_once_per_interval_in_a_tight_loop(redis_client, svc):
    svc.set_config("logs", "main", {"level": "info"})
    clock = Clock(0.0)
    before = gets(redis_client)
    for tick in range(1500):  # 15 simulated seconds, 100 reads a second
        clock.now = tick / 100
        assert svc.get_config("logs", "main", wait=1.0, clock=clock) == {"level": "info"}
    assert gets(redis_client) - before == 15


def test_changes_elsewhere_show_after_the_interval_not_before(redis_client, svc):
    clock = Clock()
    svc.set_config("svc", "search", {"shards": 1})
    assert svc.get_config("svc", "search", wait=5, clock=clock) == {"shards": 1}
    redis_client.set(config.config_key("svc", "search"), json.dumps({"shards": 2}))  # elsewhere
    clock.now += 4.9
    assert svc.get_config("svc", "search", wait=5, clock=clock) == {"shards": 1}
    clock.now += 0.1
    assert svc.get_config("svc", "search", wait=5, clock=clock) == {"shards": 2}


def test_setting_in_this_process_is_seen_at_once(svc):
    clock = Clock()
    assert svc.get_config("svc", "a", clock=clock) == {}
    svc.set_config("svc", "a", {"x": 1})
    assert svc.get_config("svc", "a", clock=clock) == {"x": 1}
    svc.delete_config("svc", "a")
    assert svc.get_config("svc", "a", clock=clock) == {}


def test_callers_cannot_change_the_cached_value(svc):
    svc.set_config("svc", "a", {"items": [1]})
    svc.get_config("svc", "a")["items"].append(2)
    assert svc.get_config("svc", "a") == {"items": [1]}


def test_both_faces_share_one_cache(redis_client):
    set_config("svc", "a", {"x": 1})
    clock = Clock()
    before = gets(redis_client)

    async def read_async():
        try:
            return (
                await config.aget_config("svc", "a", clock=clock),
                await config.ais_under_maintenance(clock=clock),
            )
        finally:
            await aclose_async_clients()

    assert get_config("svc", "a", clock=clock) == {"x": 1}
    assert is_under_maintenance(clock=clock) is False
    assert asyncio.run(read_async()) == ({"x": 1}, False)  # from the cache the sync face filled
    assert gets(redis_client) - before == 2
    clock.now += 1
    redis_client.set(config.maintenance_key(), "1")  # elsewhere
    assert asyncio.run(read_async()) == ({"x": 1}, True)
    assert is_under_maintenance(clock=clock) is True  # from the cache the async face filled
    assert gets(redis_client) - before == 4


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([1, 2], "must be a dict"),
        ({1: "x"}, "keys must be strings"),
        ({"when": object()}, "must be JSON-serialisable"),
        ({"ratio": math.nan}, "must be JSON-serialisable"),
        ({"blob": "x" * 70_000}, "the limit is 65536"),
    ],
)
def test_bad_config_is_refused_before_writing(redis_client, svc, value, message):
    with pytest.raises(InvalidArgument, match=message):
        svc.set_config("svc", "a", value)
    assert redis_client.dbsize() == 0


def nested(depth):
    """A configuration whose objects and arrays are ``depth`` levels deep."""
    value = 1
    for level in range(depth - 1):
        value = [value] if level % 2 else {"a": value}
    return {"top": value}


def test_nesting_past_max_depth_is_refused_on_every_path(redis_client, svc):
    svc.set_config("svc", "deepest", nested(config.MAX_DEPTH))
    keys_before = sorted(redis_client.scan_iter())
    assert config.parse_config(json.dumps(nested(config.MAX_DEPTH))) == nested(config.MAX_DEPTH)
    for depth in (config.MAX_DEPTH + 1, 2_000, 100_000):  # 2,000: no RecursionError on 3.13
        with pytest.raises(InvalidArgument, match="nested too deeply"):
            config.parse_config('{"a": ' * depth + "1" + "}" * depth)
    with pytest.raises(InvalidArgument, match="nested too deeply"):
        svc.set_config("svc", "deeper", nested(config.MAX_DEPTH + 1))
    cycle = {"a": []}
    cycle["a"].append(cycle)
    with pytest.raises(InvalidArgument, match="nested too deeply"):
        svc.set_config("svc", "cycle", cycle)
    assert sorted(redis_client.scan_iter()) == keys_before


def test_size_limit_follows_the_setting(redis_client, svc):
    limited = {**settings.REDISPARTS, "CONFIG_MAX_BYTES": 20}
    with (
        override_settings(REDISPARTS=limited),
        pytest.raises(InvalidArgument, match="the limit is 20"),
    ):
        svc.set_config("svc", "a", {"name": "x" * 20})
    assert redis_client.dbsize() == 0


@pytest.mark.parametrize(("kind", "name"), [("", "a"), ("svc", "a:b"), ("sv{c}", "a")])
def test_bad_type_or_name_is_refused(svc, kind, name):
    with pytest.raises(InvalidArgument):
        svc.set_config(kind, name, {})
    with pytest.raises(InvalidArgument):
        svc.get_config(kind, name)
    with pytest.raises(InvalidArgument):
        svc.delete_config(kind, name)


def test_corrupt_stored_config_is_a_clear_error(redis_client, svc):
    redis_client.set(config.config_key("svc", "a"), b"{not json")
    with pytest.raises(InvalidArgument, match="not valid JSON"):
        svc.get_config("svc", "a")
    redis_client.set(config.config_key("svc", "b"), b"[1, 2]")
    with pytest.raises(InvalidArgument, match="not a JSON object"):
        svc.get_config("svc", "b")


def _reads_with_own_clock(intervals: int) -> int:
    clock = Clock(0.0)
    for tick in range(intervals * 200):
        clock.now = tick / 200
        get_config("logs", "main", clock=clock)
        is_under_maintenance(clock=clock)
    return intervals


@pytest.mark.slow
def test_each_process_reads_once_per_interval(redis_client):
    set_config("logs", "main", {"level": "debug"})
    config.clear_local_cache()
    before = gets(redis_client)
    counts = run_in_processes(_reads_with_own_clock, [(3,)] * 4)
    # Two keys (configuration and flag), three intervals, four processes.
    assert gets(redis_client) - before == 2 * sum(counts) == 24


# -- maintenance flag ------------------------------------------------------------------------


def test_maintenance_flag_is_cached_for_one_second(redis_client, svc):
    clock = Clock()
    before = gets(redis_client)
    assert not svc.is_under_maintenance(clock=clock)
    redis_client.set(config.maintenance_key(), json.dumps({"since": 1, "retry_after": 60}))
    for _ in range(1000):
        clock.now += 0.0009  # 0.9 s in all
        assert not svc.is_under_maintenance(clock=clock)
    assert gets(redis_client) - before == 1
    clock.now += 0.1
    assert svc.is_under_maintenance(clock=clock)
    assert svc.maintenance_status(clock=clock) == config.Maintenance(since=1, retry_after=60)
    assert gets(redis_client) - before == 2


def test_set_and_clear_maintenance(redis_client, svc):
    status = svc.set_maintenance(retry_after=120, message="Upgrading", clock=lambda: 42.0)
    assert status == config.Maintenance(since=42.0, retry_after=120, message="Upgrading")
    assert svc.is_under_maintenance()
    assert svc.maintenance_status() == status
    assert svc.clear_maintenance() is True
    assert not svc.is_under_maintenance()
    assert svc.clear_maintenance() is False


def test_flag_set_by_hand_still_counts(redis_client, svc):
    redis_client.set(config.maintenance_key(), "1")
    assert svc.maintenance_status().retry_after == 300


@pytest.mark.parametrize("retry_after", [0, -5, 1.5, "60", True])
def test_bad_retry_after_is_refused(redis_client, svc, retry_after):
    with pytest.raises(InvalidArgument, match="retry_after"):
        svc.set_maintenance(retry_after=retry_after)
    with pytest.raises(InvalidArgument, match="message"):
        svc.set_maintenance(message="x" * 2001)
    assert redis_client.dbsize() == 0


MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "redisparts_app.middleware.MaintenanceMiddleware",
]


@pytest.mark.django_db
@override_settings(MIDDLEWARE=MIDDLEWARE)
def test_maintenance_page_for_users_normal_page_for_staff(client):
    assert client.get("/").status_code == 200
    set_maintenance(retry_after=90, message="Moving to bigger servers")
    response = client.get("/")
    assert response.status_code == 503
    assert response["Retry-After"] == "90"
    assert b"Moving to bigger servers" in response.content
    user = User.objects.create_user("shopper", password="pw")
    client.force_login(user)
    assert client.get("/").status_code == 503
    staff = User.objects.create_user("operator", password="pw", is_staff=True)
    client.force_login(staff)
    assert client.get("/").status_code == 200
    client.logout()
    assert client.get("/admin/login/").status_code == 200  # staff can still log in
    clear_maintenance()
    assert client.get("/").status_code == 200


@pytest.mark.django_db
@override_settings(MIDDLEWARE=MIDDLEWARE)
def test_maintenance_page_escapes_the_message(client):
    set_maintenance(message="<script>alert(1)</script>")
    response = client.get("/")
    assert response.status_code == 503
    assert b"<script>alert" not in response.content
    assert b"&lt;script&gt;" in response.content


# -- connections per component ---------------------------------------------------------------


async def _default_async_client():
    return get_async_redis()


def test_component_without_config_uses_the_default_connection(svc, face):
    default = face.run(_default_async_client()) if face.is_async else get_redis()
    assert svc.component_client("logs") is default


def test_component_client_follows_its_config(redis_client, redis_server_factory, svc, face):
    other = redis_server_factory()
    clock = Clock()
    svc.set_config("redis", "logs", {"url": other.url, "socket_timeout": 5})
    first = svc.component_client("logs", clock=clock)
    awaited(face, first.set("test:where", "other"))
    assert other.client().get("test:where") == b"other"
    assert redis_client.get("test:where") is None
    assert svc.component_client("logs", clock=clock) is first  # cached while unchanged
    moved = redis_server_factory()
    redis_client.set(
        config.config_key("redis", "logs"), json.dumps({"url": moved.url})
    )  # elsewhere
    clock.now += 0.5
    assert svc.component_client("logs", clock=clock) is first  # not re-read within the interval
    clock.now += 0.5
    second = svc.component_client("logs", clock=clock)
    assert second is not first
    awaited(face, second.set("test:where", "moved"))
    assert moved.client().get("test:where") == b"moved"


def test_redis_connection_decorator_passes_the_component_client(redis_server_factory, svc, face):
    other = redis_server_factory()
    svc.set_config("redis", "stats", {"url": other.url})
    if face.is_async:

        @redis_connection("stats")
        async def record(conn, name: str) -> int:
            return await conn.incr(name)

    else:

        @redis_connection("stats")
        def record(conn, name: str) -> int:
            return conn.incr(name)

    assert awaited(face, record("test:hits")) == 1
    assert awaited(face, record("test:hits")) == 2
    assert other.client().get("test:hits") == b"2"
    assert record.__name__ == "record"


def test_unusable_redis_config_is_refused_or_reported(redis_client, svc):
    with pytest.raises(InvalidArgument, match=r"\['colour'\]: unknown redis-py client arguments"):
        svc.set_config("redis", "logs", {"colour": "blue"})
    with pytest.raises(InvalidArgument, match=r"invalid url .*: must start with"):
        svc.set_config("redis", "logs", {"url": "http://example.com"})
    redis_client.set(config.config_key("redis", "logs"), json.dumps({"bogus": 1}))
    config.clear_local_cache()
    with pytest.raises(ComponentConnectionError, match="bogus"):
        svc.component_client("logs")
