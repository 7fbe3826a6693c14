import math
import threading
import time

import pytest

from redisparts_app import faces
from redisparts_app.connection import slot_client
from redisparts_app.exceptions import InvalidArgument, RedisPartsError
from redisparts_app.services.lease import Lease
from redisparts_app.testing import wait_until
from redisparts_app.validation import check_seconds
from tests.counting import CountingRedis, counting_like

pytestmark = pytest.mark.cluster

KEY = "rp:job:{nightly}:lease"


def test_acquire_is_one_set_nx_px_with_a_unique_token(redis_client):
    counting = counting_like(redis_client)
    lease = Lease(KEY, 2.0, client=counting)
    assert lease.acquire()
    assert counting.commands == ["SET"]
    assert redis_client.get(KEY) == lease.token.encode()
    assert 0 < redis_client.pttl(KEY) <= 2000
    assert lease.fence is None
    other = Lease(KEY, 2.0, client=redis_client)
    assert other.token != lease.token
    assert not other.acquire()  # timeout 0: one attempt
    assert redis_client.get(KEY) == lease.token.encode()


def test_extend_and_release_only_by_the_owner(redis_client):
    owner = Lease(KEY, 1.0, client=redis_client)
    assert owner.acquire()
    intruder = Lease(KEY, 1.0, client=redis_client)
    assert intruder.extend(60) is False
    assert intruder.release() is False
    assert redis_client.get(KEY) == owner.token.encode()
    assert redis_client.pttl(KEY) <= 1000
    assert owner.extend(60) is True
    assert redis_client.pttl(KEY) > 1000
    assert 1 < owner.remaining() <= 60
    assert owner.release() is True
    assert redis_client.exists(KEY) == 0
    assert owner.remaining() is None
    assert owner.release() is False
    assert owner.lost.is_set()


def test_fenced_lease_draws_increasing_tokens_from_its_counter(redis_client):
    fence_key = "rp:job:{nightly}:fence"
    fences = []
    for _ in range(3):
        lease = Lease(KEY, 1.0, client=redis_client, fence_key=fence_key)
        assert lease.acquire()
        fences.append(lease.fence)
        assert lease.release()
    assert fences == [1, 2, 3]
    assert redis_client.ttl(fence_key) == -1  # the counter never expires


def server_expiry_ms(client, key: str) -> int:
    """The key's expiry as an absolute time on the clock of the server holding it, in ms."""
    with slot_client(client, key).pipeline(transaction=True) as pipe:
        (seconds, micros), pttl = pipe.time().pttl(key).execute()
    assert pttl > 0
    return seconds * 1000 + micros // 1000 + pttl


def test_heartbeat_keeps_the_lease_past_its_ttl(redis_client):
    # The TTL is long so that no stall of a loaded machine can let it lapse between two
    # beats; that the heartbeat carries the lease past its first TTL shows in the server's
    # own expiry time, which each renewal moves later (no wall-clock race in the test).
    lease = Lease(KEY, 30.0, client=redis_client)
    assert lease.acquire()
    first_expiry = server_expiry_ms(redis_client, KEY)
    lease.start_heartbeat(0.05)
    try:
        wait_until(lambda: lease.renewals >= 3, 60, "three heartbeat renewals")
        assert server_expiry_ms(redis_client, KEY) > first_expiry
        assert lease.owned()
    finally:
        assert lease.release()
    assert not lease.lost.is_set()


def test_heartbeat_reports_a_stolen_lease_once(redis_client):
    calls = []
    lease = Lease(KEY, 0.6, client=redis_client, on_lost=calls.append)
    assert lease.acquire()
    lease.start_heartbeat(0.1)
    redis_client.set(KEY, "someone-else", px=5000)
    assert lease.lost.wait(10)
    assert not lease.held
    assert lease.release() is False
    assert calls == [lease]
    assert redis_client.get(KEY) == b"someone-else"


def test_renewal_cap_lets_the_lease_expire_and_reports_it(redis_client):
    lost = threading.Event()
    lease = Lease(KEY, 1.0, client=redis_client, on_lost=lambda _: lost.set())
    assert lease.acquire()
    lease.start_heartbeat(0.1, max_renewals=2)
    assert lost.wait(10)
    assert lease.renewals == 2
    assert redis_client.exists(KEY) == 0
    assert lease.lost.is_set()


def test_waiting_without_signal_key_takes_the_lease_when_it_expires(redis_client):
    holder = Lease(KEY, 0.5, client=redis_client)
    assert holder.acquire()
    waiter = Lease(KEY, 1.0, client=redis_client)
    assert waiter.acquire(timeout=10)
    assert redis_client.get(KEY) == waiter.token.encode()
    assert holder.extend() is False


def test_a_fenced_waiter_waits_for_the_holders_ttl_or_its_whole_timeout_without_one(
    redis_client,
):
    fence_key, signal_key = "rp:job:{nightly}:fence", "rp:job:{nightly}:signal"
    counting = counting_like(redis_client)
    redis_client.set(KEY, "another holder", px=300)
    started = time.monotonic()
    waiter = Lease(KEY, 1.0, client=counting, fence_key=fence_key, signal_key=signal_key)
    assert waiter.acquire(timeout=20)  # as soon as the holder's 300 ms run out
    assert time.monotonic() - started < 5
    assert counting.commands.count("BLPOP") <= 2
    assert waiter.release()
    redis_client.delete(signal_key)  # the release's wake-up, which nobody waited for
    redis_client.set(KEY, "a holder without a ttl")
    counting.commands.clear()
    started = time.monotonic()
    assert not Lease(KEY, 1.0, client=counting, fence_key=fence_key).acquire(timeout=0.3)
    assert time.monotonic() - started >= 0.3
    assert counting.commands == ["EVALSHA", "EVALSHA"]  # one sleep for the whole wait


@pytest.mark.parametrize("seconds", [0.0, 0.0004, 0.001, 0.0014, 0.0026])
def test_a_waiter_whose_holder_has_about_a_millisecond_left_is_not_blocked_for_ever(
    redis_client, seconds
):
    # Redis 6.x reads a BLPOP timeout of 0.001 s as 0 ms, which blocks until a push.
    waiter = Lease(KEY, 1.0, client=redis_client, signal_key="rp:job:{nightly}:signal")
    result: list[bool] = []
    pause = threading.Thread(
        target=lambda: result.append(faces.run(waiter._pause(seconds), redis_client))
    )
    pause.start()
    pause.join(5)
    alive = pause.is_alive()
    if alive:  # end the wait, so the test ends too
        redis_client.lpush("rp:job:{nightly}:signal", "1")
        pause.join(5)
    assert not alive
    assert result == [False]


def test_a_held_lease_cannot_be_acquired_twice(redis_client):
    lease = Lease(KEY, 1.0, client=redis_client)
    assert lease.acquire()
    with pytest.raises(RuntimeError, match="already held"):
        lease.acquire()


@pytest.mark.parametrize(
    ("value", "allow_zero"),
    [
        (0, False),
        (-1, True),
        (True, False),
        ("5", False),
        (None, False),
        (math.nan, False),
        (math.inf, False),
        (0.0001, False),
        (1e30, False),
    ],
)
def test_bad_durations_are_refused(value, allow_zero):
    with pytest.raises(InvalidArgument) as caught:
        check_seconds(value, "ttl", allow_zero=allow_zero)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, RedisPartsError)
    assert "ttl" in str(caught.value)


def test_good_durations_are_seconds():
    assert check_seconds(2, "ttl") == 2.0
    assert check_seconds(0, "timeout", allow_zero=True) == 0.0
    assert check_seconds(0.25, "ttl") == 0.25


def test_bad_ttl_is_refused_before_any_redis_call(redis_url):
    counting = CountingRedis.from_url(redis_url)
    with pytest.raises(InvalidArgument):
        Lease(KEY, -1, client=counting)
    lease = Lease(KEY, 1.0, client=counting)
    with pytest.raises(InvalidArgument):
        lease.acquire(timeout=-1)
    assert counting.commands == []


def test_heartbeat_reports_the_lease_lost_when_redis_stays_unreachable_for_a_ttl(
    redis_server_factory,
):
    server = redis_server_factory()
    client = server.client(socket_timeout=1)
    calls = []
    lease = Lease(KEY, 1.0, client=client, on_lost=calls.append)
    assert lease.acquire()
    lease.start_heartbeat(0.2)
    server.kill()  # no confirmation is possible any more
    assert lease.lost.wait(15)
    assert calls == [lease]
    assert not lease.held
