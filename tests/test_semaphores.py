import io
import json
import math
import os
import signal
import time

import pytest
import redis
from django.core.management import CommandError, call_command
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from redisparts_app import keys
from redisparts_app.exceptions import (
    InvalidArgument,
    SemaphoreFull,
    SemaphoreLost,
    SemaphoreTimeout,
)
from redisparts_app.services.semaphores import (
    FairSemaphore,
    Semaphore,
    holders,
    semaphore_names,
)
from tests.processes import CONTEXT, run_in_processes

pytestmark = pytest.mark.cluster

# Counts the holders inside the critical section and keeps the highest count seen.
ENTER_LUA = """
local n = redis.call('INCR', KEYS[1])
if n > tonumber(redis.call('GET', KEYS[2]) or '0') then
  redis.call('SET', KEYS[2], n)
end
return n
"""
# One hash tag: the test's own script updates both on a Redis Cluster too.
ACTIVE, HIGHEST = "test:{sem}:active", "test:{sem}:highest"


class FakeClock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def key(name: str, role: str) -> str:
    return keys.make_key("semaphore", name, role)


# --- limit, expiry, release ---------------------------------------------------------------


def test_basic_fourth_acquire_fails_until_release_or_timeout(face):
    clock = FakeClock()
    sem = face(Semaphore("reports", 3, timeout=10, clock=clock))
    first, second, third = (sem.acquire() for _ in range(3))
    assert None not in (first, second, third)
    assert len({first, second, third}) == 3
    assert sem.acquire() is None

    assert sem.release(second) is True
    fourth = sem.acquire()
    assert fourth is not None
    assert sem.acquire() is None

    clock.now += 9.999
    assert sem.acquire() is None
    clock.now += 0.002  # past the timeout of all four: nobody released, all expired
    fifth = sem.acquire()
    assert fifth is not None
    assert [h.id for h in sem.holders()] == [fifth]
    assert sem.release(first) is False


def test_fair_fourth_acquire_fails_until_release(face):
    sem = face(FairSemaphore("reports", 3, timeout=60))
    held = [sem.acquire() for _ in range(3)]
    assert None not in held
    assert sem.acquire() is None
    assert sem.release(held[0]) is True
    assert sem.acquire() is not None
    assert sem.acquire() is None


def test_fair_permits_expire_after_the_timeout_without_release(face):
    sem = face(FairSemaphore("reports", 3, timeout=0.3))
    held = [sem.acquire() for _ in range(3)]
    assert None not in held
    # Nobody releases: the only way in is the permits expiring on the server's clock. Three
    # newcomers take all three slots, so every old permit must have expired, however far
    # apart a loaded machine spread the acquires (one newcomer alone may get in while a
    # later-acquired permit still lives).
    newcomers = [face(FairSemaphore("reports", 3, timeout=60)).acquire(wait=30) for _ in range(3)]
    assert None not in newcomers
    assert sorted(h.id for h in holders("reports")) == sorted(newcomers)
    assert all(sem.refresh(holder_id) is False for holder_id in held)


def test_keys_share_one_slot_and_expire_when_abandoned(redis_client):
    sem = FairSemaphore("reports", 2, timeout=5)
    holder_id = sem.acquire()
    sem.release(sem.acquire())
    roles = ("holders", "info", "counter", "wake")
    assert len({keys.slot_of(key("reports", role)) for role in roles}) == 1
    for role in ("holders", "info", "wake"):
        assert 0 < redis_client.pttl(key("reports", role)) <= 5000
    # Tickets must only grow, so the counter is the one key kept.
    assert redis_client.pttl(key("reports", "counter")) == -1
    assert sem.ticket(holder_id) == 1


def test_release_leaves_at_most_limit_wake_tokens(redis_client, face):
    sem = face(Semaphore("reports", 3))
    for _ in range(5):
        sem.release(sem.acquire())
    assert redis_client.llen(key("reports", "wake")) == 3


# --- refresh -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [Semaphore, FairSemaphore])
def test_one_try_and_release_load_their_scripts_again_after_a_script_flush(kind, redis_client):
    semaphore = kind("reports", 2)
    for _ in range(2):  # the second round takes the hot path (the name noted lately)
        redis_client.script_flush()  # as after a restart: the acquire's EVALSHA misses
        holder_id = semaphore.acquire()
        assert holder_id is not None
        assert redis_client.zscore(key("reports", "holders"), holder_id) is not None
        redis_client.script_flush()  # and now the release's
        assert semaphore.release(holder_id) is True
        assert redis_client.zcard(key("reports", "holders")) == 0


def test_basic_refresh_keeps_a_permit_past_its_timeout_and_reports_expiry(face):
    clock = FakeClock()
    sem = face(Semaphore("export", 1, timeout=10, clock=clock))
    holder_id = sem.acquire()
    clock.now += 8
    assert sem.refresh(holder_id) is True
    clock.now += 7  # 15 s after acquire, 7 s after the refresh
    assert sem.acquire() is None
    assert sem.refresh(holder_id) is True
    clock.now += 10.5
    assert sem.refresh(holder_id) is False
    assert sem.holders() == []
    assert sem.release(holder_id) is False
    assert sem.acquire() is not None


def test_fair_refresh_keeps_a_permit_past_its_timeout(face):
    sem = face(FairSemaphore("export", 1, timeout=3))
    holder_id = sem.acquire()
    started = time.monotonic()
    while time.monotonic() - started < 3.5:  # refreshes well within the timeout
        time.sleep(0.3)
        assert sem.refresh(holder_id) is True
    # More than 3 s after acquire: without the refreshes the permit would be gone.
    assert sem.acquire() is None
    assert [h.id for h in sem.holders()] == [holder_id]
    assert sem.release(holder_id) is True


def test_fair_refresh_after_expiry_returns_false(redis_client, face):
    sem = face(FairSemaphore("export", 1, timeout=0.2))
    holder_id = sem.acquire()
    time.sleep(0.5)
    assert sem.refresh(holder_id) is False
    assert sem.holders() == []
    left = [k for k in redis_client.scan_iter() if not k.startswith(b"rp:registry:")]
    assert left == [key("export", "counter").encode()]


def test_refresh_after_expiry_drops_a_permit_not_yet_swept(redis_client, face):
    clock = FakeClock()
    sem = face(Semaphore("export", 2, timeout=10, clock=clock))
    holder_id = sem.acquire()
    clock.now += 11
    assert redis_client.zscore(key("export", "holders"), holder_id) is not None
    assert sem.refresh(holder_id) is False
    assert redis_client.zscore(key("export", "holders"), holder_id) is None
    assert redis_client.hget(key("export", "info"), holder_id) is None


def test_refresh_of_an_unknown_holder_is_false(face):
    assert face(Semaphore("export", 1)).refresh("0" * 32) is False
    assert face(FairSemaphore("export", 1)).refresh("0" * 32) is False


# --- context manager ---------------------------------------------------------------------


def test_hold_releases_on_exit_and_on_error(face):
    sem = face(FairSemaphore("market", 1))
    with sem.hold(wait=0) as holder_id:
        assert [h.id for h in sem.holders()] == [holder_id]
    assert sem.holders() == []
    with pytest.raises(KeyError), sem.hold(wait=0):
        raise KeyError("boom")
    assert sem.holders() == []


def test_hold_raises_full_without_wait_and_timeout_with_wait(face):
    sem = face(FairSemaphore("market", 1))
    with sem.hold(wait=0):
        with pytest.raises(SemaphoreFull, match="'market' is full") as full, sem.hold(wait=0):
            pass
        assert not isinstance(full.value, SemaphoreTimeout)
        with pytest.raises(SemaphoreTimeout, match="stayed full") as timed_out, sem.hold(wait=0.2):
            pass
        assert timed_out.value.limit == 1
        assert timed_out.value.waited >= 0.2


def test_hold_raises_lost_when_the_permit_expired_inside_the_block(face):
    clock = FakeClock()
    sem = face(Semaphore("market", 1, timeout=5, clock=clock))
    with pytest.raises(SemaphoreLost, match="expired before release"), sem.hold(wait=0):
        clock.now += 6
    assert sem.holders() == []


# --- holders and names -------------------------------------------------------------------


def test_holders_lists_id_age_reason_and_expiry():
    clock = FakeClock()
    sem = Semaphore("jobs", 3, timeout=10, clock=clock)
    first = sem.acquire(reason="nightly export 导出")
    clock.now += 2
    second = sem.acquire()
    clock.now += 3
    listed = holders("jobs", clock=clock)
    assert [(h.id, h.age, h.expires_in, h.reason, h.ticket) for h in listed] == [
        (first, 5.0, 5.0, "nightly export 导出", None),
        (second, 3.0, 7.0, "", None),
    ]
    assert sem.holders() == listed


def test_fair_holders_use_the_server_clock_and_carry_increasing_tickets():
    sem = FairSemaphore("jobs", 3, timeout=30, clock=lambda: time.time() + 3600)
    first = sem.acquire(reason="a")
    second = sem.acquire(reason="b")
    listed = holders("jobs")
    assert {h.id: (h.reason, h.ticket) for h in listed} == {first: ("a", 1), second: ("b", 2)}
    for holder in listed:
        assert 0 <= holder.age < 10
        assert 20 < holder.expires_in <= 30


def test_semaphore_names_lists_semaphores_with_holders():
    Semaphore("alpha", 1).acquire()
    FairSemaphore("beta gamma", 1).acquire()
    assert semaphore_names() == ["alpha", "beta gamma"]


# --- clocks ------------------------------------------------------------------------------


def test_basic_trusts_client_clocks_but_fair_ignores_them(face):
    """A host whose clock runs past another holder's timeout takes its slot (basic only)."""

    def ahead() -> float:
        return time.time() + 11

    basic = face(Semaphore("clocks", 1, timeout=10))
    assert basic.acquire() is not None
    assert face(Semaphore("clocks", 1, timeout=10, clock=ahead)).acquire() is not None  # stolen

    fair = face(FairSemaphore("fair clocks", 1, timeout=10))
    assert fair.acquire() is not None
    assert face(FairSemaphore("fair clocks", 1, timeout=10, clock=ahead)).acquire() is None


# --- against a model ---------------------------------------------------------------------

OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("acquire"), st.integers(0, 3)),
        st.tuples(st.just("release"), st.integers(0, 20)),
        st.tuples(st.just("refresh"), st.integers(0, 20)),
        st.tuples(st.just("advance"), st.sampled_from([1, 999, 1000, 4000, 9999, 10_000])),
    ),
    max_size=40,
)


# The client fixture only flushes: nothing of it is per example.
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=OPERATIONS)
def test_basic_semaphore_behaves_like_its_model(redis_client, operations):
    """Acquire, refresh, release and expiry match a dict of id -> deadline, step by step."""
    redis_client.flushdb()  # an admin's command under REDISPARTS_TEST_ACL
    now_ms = [1_000_000]
    sem = Semaphore("model", 3, timeout=10, clock=lambda: now_ms[0] / 1000)
    live: dict[str, int] = {}  # holder id -> deadline (ms) in the model
    seen: list[str] = []
    for op, arg in operations:
        if op == "advance":
            now_ms[0] += arg
            continue
        if op == "acquire":
            live = {h: d for h, d in live.items() if d > now_ms[0]}
            got = sem.acquire(reason=f"r{arg}")
            if len(live) < 3:
                assert got is not None
                live[got] = now_ms[0] + 10_000
                seen.append(got)
            else:
                assert got is None
        elif seen:
            holder_id = seen[arg % len(seen)]
            alive = live.get(holder_id, 0) > now_ms[0]
            if op == "release":
                assert sem.release(holder_id) is alive
                live.pop(holder_id, None)
            else:
                assert sem.refresh(holder_id) is alive
                if alive:
                    live[holder_id] = now_ms[0] + 10_000
                else:
                    live.pop(holder_id, None)
        listed = {h.id: round(h.expires_in, 3) for h in sem.holders()}
        assert listed == {h: (d - now_ms[0]) / 1000 for h, d in live.items() if d > now_ms[0]}
        assert len(listed) <= 3


# --- bad input ---------------------------------------------------------------------------


@pytest.fixture
def unreachable():
    """A client no call can reach: any Redis call would raise ConnectionError."""
    return redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)


@pytest.mark.parametrize("name", ["", "a:b", "{tag}", "x*", "line\nbreak", "x" * 1000, " pad"])
def test_bad_names_are_refused_before_any_redis_call(name, unreachable):
    with pytest.raises(InvalidArgument, match="semaphore name"):
        Semaphore(name, 3, client=unreachable)
    with pytest.raises(InvalidArgument):
        holders(name, client=unreachable)


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "3", None, 10**9])
def test_bad_limits_are_refused(limit, unreachable):
    with pytest.raises(InvalidArgument, match="limit"):
        FairSemaphore("ok", limit, client=unreachable)


@pytest.mark.parametrize("timeout", [0, -1, math.nan, math.inf, "10", None, 10**7])
def test_bad_timeouts_are_refused(timeout, unreachable):
    with pytest.raises(InvalidArgument, match="timeout"):
        Semaphore("ok", 3, timeout=timeout, client=unreachable)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda sem: sem.acquire(wait=-1), "wait"),
        (lambda sem: sem.acquire(wait=math.nan), "wait"),
        (lambda sem: sem.acquire(reason="x" * 201), "reason"),
        (lambda sem: sem.acquire(reason="a\x00b"), "reason"),
        (lambda sem: sem.acquire(reason=5), "reason"),
        (lambda sem: sem.refresh("nope"), "holder id"),
        (lambda sem: sem.release(123), "holder id"),
        (lambda sem: sem.release("G" * 32), "holder id"),
        (lambda sem: sem.release(" " + "a" * 31), "holder id"),
        (lambda sem: sem.hold(wait=-1).__enter__(), "wait"),
    ],
)
def test_bad_call_arguments_are_refused(call, match, unreachable):
    for kind in (Semaphore, FairSemaphore):
        with pytest.raises(InvalidArgument, match=match):
            call(kind("ok", 3, client=unreachable))


def test_a_holder_id_is_checked_unless_it_is_the_one_just_handed_out(redis_client):
    for kind in (Semaphore, FairSemaphore):
        semaphore = kind("ids", 2, client=redis_client)
        holder = semaphore.acquire()
        with pytest.raises(InvalidArgument, match="holder id"):
            semaphore.release(holder.upper())
        equal = holder[:16] + holder[16:]  # the same id, another string: checked
        assert equal is not holder
        assert semaphore.release(equal)
        assert not semaphore.release(holder)  # handed out last, but no longer held


def test_bad_input_is_a_value_error_and_writes_nothing(redis_client, face):
    with pytest.raises(ValueError, match="limit"):
        face(Semaphore("ok", 0))
    with pytest.raises(ValueError, match="reason"):
        face(Semaphore("ok", 1)).acquire(reason="\n")
    assert redis_client.dbsize() == 0


# --- several processes -------------------------------------------------------------------


def contend(kind: str, seconds: float, offset: float) -> int:
    """Enter the critical section as often as possible; return the number of entries."""
    from redisparts_app.connection import get_redis

    client = get_redis()
    enter = client.register_script(ENTER_LUA)
    cls = FairSemaphore if kind == "fair" else Semaphore
    sem = cls("contended", 3, timeout=10, client=client, clock=lambda: time.time() + offset)
    entries = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        with sem.hold(wait=20):
            enter(keys=[ACTIVE, HIGHEST])
            time.sleep(0.01)
            client.decr(ACTIVE)
        entries += 1
    return entries


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["basic", "fair"])
def test_eight_processes_never_exceed_the_limit(kind, redis_client):
    entries = run_in_processes(contend, [(kind, 3.0, 0.0)] * 8)
    assert int(redis_client.get(HIGHEST)) == 3
    assert int(redis_client.get(ACTIVE)) == 0
    assert all(count > 0 for count in entries), entries
    assert holders("contended") == []


@pytest.mark.slow
def test_fair_semaphore_holds_with_a_different_clock_offset_per_process(redis_client):
    offsets = [-1.0, -0.7, -0.4, -0.1, 0.1, 0.4, 0.7, 1.0]
    entries = run_in_processes(contend, [("fair", 3.0, offset) for offset in offsets])
    assert int(redis_client.get(HIGHEST)) == 3
    assert int(redis_client.get(ACTIVE)) == 0
    assert all(count > 0 for count in entries), entries


def hold_until_killed(ready_key: str) -> None:
    from redisparts_app.connection import get_redis

    client = get_redis()
    sem = FairSemaphore("crash", 1, timeout=3, client=client)
    holder_id = sem.acquire()
    client.set(ready_key, holder_id or "")
    while True:  # keeps the permit alive until SIGKILL
        sem.refresh(holder_id)
        time.sleep(0.2)


@pytest.mark.slow
def test_a_killed_holder_permit_expires_after_the_timeout(redis_client):
    child = CONTEXT.Process(target=hold_until_killed, args=("test:sem:ready",), daemon=True)
    child.start()
    try:
        deadline = time.monotonic() + 30
        while not redis_client.get("test:sem:ready"):
            assert time.monotonic() < deadline, "the child never acquired"
            time.sleep(0.02)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
    crashed = redis_client.get("test:sem:ready").decode()
    sem = FairSemaphore("crash", 1, timeout=3)
    assert [h.id for h in sem.holders()] == [crashed]
    assert sem.acquire() is None
    newcomer = sem.acquire(wait=20)
    assert newcomer is not None
    assert [h.id for h in sem.holders()] == [newcomer]


# --- management command ------------------------------------------------------------------


def test_rp_semaphores_lists_holders_as_text_and_json():
    first = FairSemaphore("market alice", 2).acquire(reason="buy 42")
    Semaphore("market bob", 2).acquire()
    out = io.StringIO()
    call_command("rp_semaphores", stdout=out)
    text = out.getvalue()
    assert "market alice: 1 holder(s)" in text
    assert "market bob: 1 holder(s)" in text
    assert first in text
    assert "buy 42" in text

    out = io.StringIO()
    call_command("rp_semaphores", "market alice", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert list(data) == ["market alice"]
    assert data["market alice"][0]["id"] == first
    assert data["market alice"][0]["reason"] == "buy 42"
    assert data["market alice"][0]["ticket"] == 1


def test_rp_semaphores_refuses_a_bad_name_with_exit_status_2():
    with pytest.raises(CommandError, match="invalid semaphore name") as error:
        call_command("rp_semaphores", "a:b")
    assert error.value.returncode == 2


@pytest.mark.single_server  # points CACHES at a dead server
def test_rp_semaphores_reports_an_unreachable_redis_with_exit_status_3():
    url = "redis://127.0.0.1:1/0"
    caches = {"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": url}}
    with override_settings(CACHES=caches), pytest.raises(CommandError, match="cannot reach") as e:
        call_command("rp_semaphores")
    assert e.value.returncode == 3


# --- Redis Cluster -----------------------------------------------------------------------


def test_both_kinds_on_several_slots(redis_client):
    client = redis_client
    names = ["alpha", "beta", "gamma", "delta"]  # spread over the masters' slots
    assert len({keys.slot_of(key(name, "holders")) for name in names}) == len(names)
    for kind, name in zip([Semaphore, FairSemaphore] * 2, names, strict=True):
        sem = kind(name, 2, timeout=30, client=client)
        first = sem.acquire(reason="on the cluster")
        second = sem.acquire()
        assert sem.acquire(wait=0.1) is None  # waits on BLPOP through the cluster client
        assert sem.refresh(first) is True
        assert sorted(h.reason for h in sem.holders()) == ["", "on the cluster"]
        assert sem.release(second) is True
        with sem.hold(wait=1) as holder_id:
            assert holder_id in {h.id for h in holders(name, client=client)}
    assert semaphore_names(client=client) == sorted(names)
