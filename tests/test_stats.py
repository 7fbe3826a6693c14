import logging
import math
import statistics

import pytest
from django.http import HttpResponse
from django.test import Client, override_settings
from django.urls import include, path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from redisparts_app.connection import get_redis
from redisparts_app.exceptions import InvalidArgument
from redisparts_app.keys import scan_keys, slot_of
from redisparts_app.middleware import ResponseTimeMiddleware
from redisparts_app.services import counters, logs, stats
from redisparts_app.services.counters import (
    clean_counters,
    counter_key,
    known_counters,
)
from redisparts_app.services.stats import (
    get_stats,
    slowest_views,
    stats_key,
    update_stats,
)
from tests.processes import run_in_processes

pytestmark = pytest.mark.cluster

H = 1_800_000_000 - 1_800_000_000 % 3600  # the start of some hour (epoch seconds)


def at(seconds: float):
    return lambda: seconds


def close(a: float, b: float, scale: float) -> bool:
    # Sums of squares lose about half the digits of the data's magnitude.
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6 * (scale + 1))


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(
        st.floats(min_value=-1e6, max_value=1e6, allow_nan=False) | st.integers(-1000, 1000),
        min_size=1,
        max_size=40,
    )
)
def test_stats_match_the_statistics_module(redis_client, face, values):
    st = face(stats)
    redis_client.flushdb()
    for value in values:
        st.update_stats("shop", "amount", value, clock=at(H + 1))
    found = st.get_stats("shop", "amount", clock=at(H + 2))
    scale = max(abs(v) for v in values)
    assert found.count == len(values)
    assert found.min == min(values)
    assert found.max == max(values)
    assert close(found.sum, math.fsum(values), scale * len(values))
    assert close(found.mean, statistics.fmean(values), scale)
    # stddev is the sample standard deviation (n - 1), pstddev the population one (n)
    assert close(found.pstddev, statistics.pstdev(values), scale)
    if len(values) > 1:
        assert close(found.stddev, statistics.stdev(values), scale)
    else:
        assert found.stddev == 0.0


def test_update_returns_the_hour_so_far_and_keys_share_a_slot(redis_client, face):
    st = face(stats)
    st.update_stats("shop", "amount", 2, clock=at(H))
    found = st.update_stats("shop", "amount", 4.5, clock=at(H + 10))
    assert (found.hour, found.count, found.sum, found.min, found.max) == (H, 2, 6.5, 2, 4.5)
    assert found.sumsq == 4 + 4.5**2
    assert found.mean == 3.25
    key = stats_key("shop", "amount")
    assert slot_of(key) == slot_of(f"{key}:last")
    assert 0 < redis_client.ttl(key) <= 7200


def test_rollover_at_the_hour_keeps_the_previous_hour(redis_client, face):
    st = face(stats)
    for value in (1, 2, 3):
        st.update_stats("shop", "amount", value, clock=at(H + 3599))
    after = st.update_stats("shop", "amount", 10, clock=at(H + 3600))
    assert (after.hour, after.count, after.sum) == (H + 3600, 1, 10)
    previous = st.get_stats("shop", "amount", previous=True, clock=at(H + 3700))
    assert (previous.hour, previous.count, previous.mean, previous.max) == (H, 3, 2, 3)
    assert st.get_stats("shop", "amount", clock=at(H + 3700)).count == 1
    # reading after a quiet hour: the current hour is empty, its data is the previous one
    assert st.get_stats("shop", "amount", clock=at(H + 7200)) is None
    assert st.get_stats("shop", "amount", previous=True, clock=at(H + 7200)).sum == 10
    assert st.get_stats("shop", "amount", previous=True, clock=at(H + 10800)) is None
    # a write after a silent hour leaves no stale previous hour
    st.update_stats("shop", "amount", 5, clock=at(H + 10800))
    assert st.get_stats("shop", "amount", previous=True, clock=at(H + 10800)) is None
    assert st.get_stats("shop", "amount", clock=at(H + 10800)).count == 1


def _update_across_the_hour(worker: int, updates: int) -> int:
    for i in range(updates):
        now = H + 3599 if i < updates // 2 else H + 3600
        update_stats("shop", "amount", worker * 1000 + i, clock=at(now))
    return sum(worker * 1000 + i for i in range(updates))


@pytest.mark.slow
def test_concurrent_updates_across_the_hour_lose_nothing(redis_client):
    totals = run_in_processes(_update_across_the_hour, [(w, 300) for w in range(4)])
    now = H + 3600
    current = get_stats("shop", "amount", clock=at(now))
    previous = get_stats("shop", "amount", previous=True, clock=at(now))
    assert current.count + previous.count == 4 * 300
    assert current.sum + previous.sum == sum(totals)
    assert min(current.min, previous.min) == 0
    assert max(current.max, previous.max) == 3000 + 299


def test_bad_input_is_refused_before_any_write(redis_client, face):
    st = face(stats)
    for value in (math.nan, math.inf, -math.inf, 1e101, True, "3", None):
        with pytest.raises(InvalidArgument, match="value"):
            st.update_stats("shop", "amount", value)
    for context, kind in (("", "a"), ("a:b", "a"), ("a", "{b}"), ("a", "b*"), (1, "a")):
        with pytest.raises(InvalidArgument):
            st.update_stats(context, kind, 1)
    for seconds in (-0.1, "1", None):
        with pytest.raises(InvalidArgument, match="seconds"):
            st.record_access_time("home", seconds)
    with pytest.raises(InvalidArgument, match="limit"):
        st.slowest_views(0)
    assert redis_client.dbsize() == 0


def test_slowest_views_are_ranked_by_average(redis_client, face):
    st = face(stats)
    for view, seconds in [("home", 0.1), ("home", 0.3), ("search", 1.5), ("cart", 0.5)]:
        st.record_access_time(view, seconds, clock=at(H))
    ranked = st.slowest_views(10)
    assert [view for view, _ in ranked] == ["search", "cart", "home"]
    assert ranked[2][1] == pytest.approx(0.2)
    assert st.slowest_views(1) == [("search", 1.5)]
    with override_settings(REDISPARTS={"SLOWEST_VIEWS_LIMIT": 2}):
        st.record_access_time("login", 0.01, clock=at(H))
    assert [view for view, _ in st.slowest_views()] == ["search", "cart"]


class Ticks:
    """A timer that advances by fixed steps, so durations are exact."""

    def __init__(self, *steps: float) -> None:
        self.now, self.steps = 0.0, list(steps)

    def __call__(self) -> float:
        self.now += self.steps.pop(0)
        return self.now


def test_access_time_as_context_manager_and_decorator(redis_client, face):
    st = face(stats)
    with st.access_time("report", timer=Ticks(1, 2.5), clock=at(H)):
        pass
    if face.is_async:

        @stats.aaccess_time("report", clock=at(H))
        async def abuild() -> str:
            return "built"

        def build() -> str:
            return face.run(abuild())

    else:

        @stats.access_time("report", clock=at(H))
        def build() -> str:
            return "built"

    assert build() == "built"
    assert build() == "built"
    timed = st.access_time("report", timer=Ticks(0, 4), clock=at(H))
    with pytest.raises(ZeroDivisionError), timed:
        1 / 0  # noqa: B018  the time is recorded even when the block raises
    found = st.get_stats("report", "access_time", clock=at(H))
    assert found.count == 4
    assert found.max == 4
    assert 6.5 <= found.sum < 7.5
    with pytest.raises(InvalidArgument):
        st.access_time("bad:view").__enter__()


def test_access_time_with_redis_down_does_not_raise(tmp_path, caplog, face):
    st = face(stats)
    down = override_settings(REDISPARTS={"CONNECTIONS": {"default": f"unix://{tmp_path}/x.sock"}})
    with down, caplog.at_level(logging.WARNING, "redisparts.stats"), st.access_time("report"):
        result = "done"
    assert result == "done"
    assert "response time of report not recorded" in caplog.text


# The URLs of the middleware tests (ROOT_URLCONF points at this module).
class StepTimer:
    """A timer the views move forward by hand, so response times are exact."""

    now = 0.0

    @classmethod
    def read(cls) -> float:
        return cls.now


class SteppedResponseTimeMiddleware(ResponseTimeMiddleware):
    timer = staticmethod(StepTimer.read)


def fast(request):
    StepTimer.now += 0.25
    return HttpResponse("fast")


def slow(request):
    StepTimer.now += 2.0
    return HttpResponse("slow")


def needs_redis(request):
    get_redis().ping()
    return HttpResponse("pong")


urlpatterns = [
    path("fast/", fast, name="fast"),
    path("slow/", slow, name="slow"),
    path("plain/", fast),
    path("redis/", needs_redis, name="needs-redis"),
    path("shop/", include(([path("cart/", slow, name="cart")], "shop"))),
]
MIDDLEWARE = [
    "redisparts_app.middleware.RedisUnavailableMiddleware",
    "redisparts_app.middleware.ResponseTimeMiddleware",
]
timed = override_settings(ROOT_URLCONF=__name__, MIDDLEWARE=MIDDLEWARE)


@timed
def test_middleware_records_each_view(redis_client):
    client = Client()
    for url in ["/fast/", "/fast/", "/plain/", "/shop/cart/", "/redis/", "/missing/"]:
        assert client.get(url).status_code == (404 if url == "/missing/" else 200)
    assert get_stats("fast", "access_time").count == 2
    assert get_stats("tests.test_stats.fast", "access_time").count == 1  # unnamed: dotted path
    assert get_stats("shop.cart", "access_time").count == 1  # "shop:cart"
    assert get_stats("needs-redis", "access_time").count == 1
    assert {view for view, _ in slowest_views(10)} == {
        "fast",
        "tests.test_stats.fast",
        "shop.cart",
        "needs-redis",
    }
    assert not any(b"missing" in key for key in scan_keys(redis_client, "rp:*"))


@override_settings(ROOT_URLCONF=__name__, MIDDLEWARE=[f"{__name__}.SteppedResponseTimeMiddleware"])
def test_middleware_ranks_the_slowest_views_by_average(redis_client):
    client = Client()
    for url in ["/fast/", "/slow/", "/fast/", "/shop/cart/", "/slow/"]:
        client.get(url)
    assert slowest_views(10) == [("slow", 2.0), ("shop.cart", 2.0), ("fast", 0.25)]
    stats = get_stats("slow", "access_time")
    assert (stats.count, stats.sum, stats.min, stats.max) == (2, 4.0, 2.0, 2.0)


@timed
def test_middleware_with_redis_down_lets_the_response_out(tmp_path, caplog):
    client = Client()
    down = override_settings(REDISPARTS={"CONNECTIONS": {"default": f"unix://{tmp_path}/x.sock"}})
    with down, caplog.at_level(logging.WARNING, "redisparts.stats"):
        response = client.get("/fast/")
        unavailable = client.get("/redis/")
    assert response.status_code == 200
    assert response.content == b"fast"
    assert unavailable.status_code == 503  # the view needed Redis: the 503 page, not a 500
    assert "response time of fast not recorded" in caplog.text


def test_logs_counters_and_stats_of_several_slots(face):
    lg, ct, st = face(logs), face(counters), face(stats)
    names = ["alpha", "beta", "gamma", "delta"]
    assert len({slot_of(counter_key(name, 60)) // 5462 for name in names}) == 3
    for name in names:
        lg.log_common(name, "started", "info", clock=at(H))
        lg.log_common(name, "rotated", "info", clock=at(H + 3600))
        assert lg.common(name, previous=True, clock=at(H + 3600)) == [("started", 1)]
        assert [e.message for e in lg.recent(name)] == ["rotated", "started"]

        ct.update_counter(name, clock=at(H))
        ct.update_counter(name, 2, clock=at(H + 1))
        assert ct.get_counter(name, 60) == [(H, 3)]

        st.update_stats(name, "amount", 1, clock=at(H))
        st.update_stats(name, "amount", 3, clock=at(H + 3600))
        assert st.get_stats(name, "amount", previous=True, clock=at(H + 3600)).sum == 1
        st.record_access_time(name, 0.5, clock=at(H))
    assert set(known_counters()) == set(names)
    report = clean_counters(clock=at(H + 10**8))  # 1157 days: every sample is old
    assert report.forgotten == len(names) * 7
    assert known_counters() == {}
    assert {view for view, _ in st.slowest_views(10)} == set(names)
