"""Rate limits: the service (exact under concurrent processes, sliding window, hostile
subjects). The demo site's limits are in tests/demo/test_ratelimit.py."""

import time

import pytest
from redis.crc import key_slot

from redisparts_app.services.ratelimit import RateLimit
from tests.processes import run_in_processes

pytestmark = [pytest.mark.django_db, pytest.mark.cluster]


def admitted_in_process(limit: int, window: float, subject: str, attempts: int) -> int:
    """Hit one limit ``attempts`` times as fast as possible; count the admissions seen."""
    limiter = RateLimit("burst", limit, window)
    return sum(limiter.hit(subject).allowed for _ in range(attempts))


def test_concurrent_processes_get_exactly_the_limit(redis_client):
    # 4 processes x 30 attempts at a limit of 25 in a minute: exactly 25 admitted in
    # total, counted by the processes themselves (not read back from Redis).
    admitted = run_in_processes(admitted_in_process, [(25, 60.0, "shared", 30)] * 4)
    assert sum(admitted) == 25
    # Another subject has its own count.
    assert admitted_in_process(25, 60.0, "other", 30) == 25


def test_refusal_says_when_to_retry_and_refusals_are_not_counted(redis_client, face):
    limiter = face(RateLimit("retry", 3, 0.5))
    decisions = [limiter.hit("s") for _ in range(3)]
    assert [d.remaining for d in decisions] == [2, 1, 0]
    assert all(d.allowed and d.retry_after == 0 for d in decisions)
    refused = [limiter.hit("s") for _ in range(20)]
    assert not any(d.allowed for d in refused)
    assert all(0 < d.retry_after <= 0.5 for d in refused)
    # The window slides past the admitted events; the 20 refusals did not extend it.
    time.sleep(0.55)
    assert [limiter.hit("s").allowed for _ in range(4)] == [True, True, True, False]


def test_window_slides_instead_of_resetting(redis_client, face):
    limiter = face(RateLimit("slide", 2, 0.6))
    assert limiter.hit("s").allowed
    time.sleep(0.35)
    assert limiter.hit("s").allowed
    assert not limiter.hit("s").allowed
    # 0.65 s after the first event only it has left the window: one place frees up.
    time.sleep(0.3)
    assert limiter.hit("s").allowed
    assert not limiter.hit("s").allowed


HOSTILE_SUBJECTS = ["", "a:b*?[x]{y}", "\x00\n\r\t", "<script>", "x" * 100_000, "\ud800"]


@pytest.mark.parametrize("subject", HOSTILE_SUBJECTS, ids=range(len(HOSTILE_SUBJECTS)))
def test_any_subject_gets_one_key_of_fixed_shape(subject, redis_client):
    limiter = RateLimit("login", 1, 60)
    assert limiter.hit(subject).allowed
    assert not limiter.hit(subject).allowed
    [key] = redis_client.scan_iter(match="rp:ratelimit:*")
    assert len(key) == len("rp:ratelimit:{login/}") + 32
    assert 0 < redis_client.pttl(key) <= 60_000
    assert key_slot(key) == key_slot(limiter.key(subject).encode())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("Login", 1, 60), "scope .*: must be a lower-case identifier"),
        (("a:b", 1, 60), "scope .*: must be a lower-case identifier"),
        (("login", 0, 60), "invalid rate limit .*: must be an integer of at least 1"),
        (("login", 1.5, 60), "invalid rate limit .*: must be an integer of at least 1"),
        (("login", True, 60), "invalid rate limit .*: must be an integer of at least 1"),
        (("login", 1, 0), "invalid rate limit window"),
        (("login", 1, float("nan")), "invalid rate limit window"),
        (("login", 1, 10**9), "invalid rate limit window"),
    ],
)
def test_bad_limits_are_refused_before_redis(args, message, redis_client):
    with pytest.raises(ValueError, match=message):
        RateLimit(*args)


def test_non_string_subject_is_a_type_error(redis_client):
    with pytest.raises(TypeError, match=r"invalid rate limit subject 42: must be a string"):
        RateLimit("login", 1, 60).hit(42)
