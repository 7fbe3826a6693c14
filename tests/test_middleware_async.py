"""The app's middleware in an async chain: under ASGI (Django's AsyncClient) with an async
view, each one runs as a coroutine (no sync adaptation of the chain) and does its work:
presence recorded, response time recorded, maintenance page, 503 when Redis is away."""

import pytest
from asgiref.sync import async_to_sync, iscoroutinefunction
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.test import override_settings

from redisparts_app import middleware
from redisparts_app.services import config, presence
from redisparts_app.services.stats import ACCESS_TIME, get_stats

pytestmark = pytest.mark.django_db

MIDDLEWARE = [
    middleware.RedisUnavailableMiddleware,
    middleware.MaintenanceMiddleware,
    middleware.PresenceMiddleware,
    middleware.ResponseTimeMiddleware,
]


@pytest.mark.parametrize("kind", MIDDLEWARE, ids=lambda kind: kind.__name__)
def test_each_middleware_is_a_coroutine_in_an_async_chain_and_plain_in_a_sync_one(kind):
    async def async_view(request):
        return HttpResponse()

    assert kind.sync_capable
    assert kind.async_capable
    assert iscoroutinefunction(kind(async_view))
    assert not iscoroutinefunction(kind(lambda request: HttpResponse()))


def get(async_client, path: str, user: User | None = None):
    async def request():
        if user is not None:
            await async_client.aforce_login(user)
        return await async_client.get(path)

    return async_to_sync(request)()


def test_an_async_view_records_presence_and_its_response_time(async_client, caplog):
    user = User.objects.create_user("ada", password="x")
    # With DEBUG on, Django logs each middleware it has to adapt to the chain's mode.
    with caplog.at_level("DEBUG", logger="django.request"), override_settings(DEBUG=True):
        response = get(async_client, "/async/", user)
    assert response.status_code == 200
    adapted = [r.getMessage() for r in caplog.records if "adapted" in r.getMessage()]
    assert not [message for message in adapted if "redisparts_app" in message], adapted
    assert presence.is_online("ada")
    timing = get_stats("async_page", ACCESS_TIME)
    assert timing is not None
    assert timing.count == 1


def test_maintenance_answers_async_requests_and_lets_staff_through(async_client):
    config.set_maintenance(message="Back at noon")
    config.clear_local_cache()
    try:
        turned_away = get(async_client, "/async/")
        assert turned_away.status_code == 503
        assert "Back at noon" in turned_away.content.decode()
        staff = User.objects.create_user("root", password="x", is_staff=True)
        assert get(async_client, "/async/", staff).status_code == 200
    finally:
        config.clear_maintenance()
        config.clear_local_cache()


def test_the_async_chain_reads_the_flag_with_the_async_twin(async_client, monkeypatch):
    def sync_read(**options):
        raise AssertionError("the sync face read the flag in an async chain")

    monkeypatch.setattr(middleware, "maintenance_status", sync_read)
    config.clear_local_cache()
    assert get(async_client, "/async/").status_code == 200
    config.set_maintenance(message="Back at noon")
    config.clear_local_cache()
    try:
        assert get(async_client, "/async/").status_code == 503
    finally:
        config.clear_maintenance()
        config.clear_local_cache()


def test_the_async_chain_records_with_the_async_twins(async_client, monkeypatch):
    def sync_call(*args, **options):
        raise AssertionError("a sync Redis call in an async chain")

    monkeypatch.setattr(middleware, "record_activity", sync_call)
    monkeypatch.setattr(middleware, "record_access_time", sync_call)
    user = User.objects.create_user("ada", password="x")
    assert get(async_client, "/async/", user).status_code == 200
    assert presence.is_online("ada")
    assert get_stats("async_page", ACCESS_TIME).count == 1


def test_with_redis_unreachable_the_async_chain_serves_normally(async_client, tmp_path, caplog):
    config.clear_local_cache()
    down = override_settings(REDISPARTS={"CONNECTIONS": {"default": f"unix://{tmp_path}/no.sock"}})
    with down, caplog.at_level("WARNING", logger="redisparts"):
        response = get(async_client, "/async/")
    assert response.status_code == 200
    assert "maintenance flag unreadable" in caplog.text


def test_redis_going_away_in_an_async_view_is_a_503(async_client):
    response = get(async_client, "/async/?redis=down")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
