import itertools

import pytest

from redisparts_app.exceptions import InvalidArgument
from redisparts_app.keys import scan_keys
from redisparts_app.services import sessions
from tests.counting import command_calls

pytestmark = pytest.mark.cluster


@pytest.fixture(params=["update_token", "update_token_pipelined"])
def update(request, face):
    """One variant of the update, on the sync face and then on the async face."""
    return getattr(face(sessions), request.param)


def dump(client) -> dict:
    """Every key with its type, value and whether it expires."""
    result = {}
    for key in scan_keys(client, "*"):
        kind = client.type(key).decode()
        if kind == "hash":
            value = client.hgetall(key)
        elif kind == "zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == "string":
            value = client.get(key)
        else:
            raise AssertionError(f"unexpected {kind} key {key!r}")
        result[key] = (kind, value, client.ttl(key) > 0)
    return result


def workload(update) -> None:
    """Three tokens viewing 40 items with repeats, on a clock that ticks one second a call."""
    ticks = itertools.count(1_700_000_000)
    clock = lambda: float(next(ticks))  # noqa: E731
    for n in range(120):
        token = f"token-{n % 3}"
        item = None if n % 7 == 0 else f"item-{(n * 13) % 40}"
        update(token, f"user-{n % 3}", item, clock=clock)


def test_each_variant_records_login_recent_viewed_and_counts(redis_client, update):
    update("t1", "alice", "book", clock=lambda: 100.0)
    update("t1", "alice", "lamp", clock=lambda: 101.0)
    update("t2", "bob", clock=lambda: 102.0)
    assert redis_client.hgetall(sessions.login_key()) == {b"t1": b"alice", b"t2": b"bob"}
    # Pairs are tuples in redis-py's RESP2 shapes, lists in its RESP3 ones (protocol=3).
    recent = redis_client.zrange(sessions.recent_key(), 0, -1, withscores=True)
    assert [tuple(pair) for pair in recent] == [(b"t1", 101.0), (b"t2", 102.0)]
    assert redis_client.zrange(sessions.viewed_key("t1"), 0, -1) == [b"book", b"lamp"]
    assert redis_client.exists(sessions.viewed_key("t2")) == 0
    assert redis_client.zscore(sessions.views_key(), "book") == 1.0
    assert 0 < redis_client.ttl(sessions.viewed_key("t1")) <= 7 * 24 * 3600


def test_viewed_items_keep_the_25_most_recent(redis_client, update):
    for n in range(30):
        update("t1", "alice", f"item-{n}", clock=lambda n=n: 1000.0 + n)
    viewed = redis_client.zrange(sessions.viewed_key("t1"), 0, -1)
    assert viewed == [f"item-{n}".encode() for n in range(5, 30)]


def test_both_variants_leave_identical_data(redis_client, face):
    """The face's two variants leave what the sync update_token leaves."""
    dumps = []
    for update in (
        sessions.update_token,
        face(sessions).update_token,
        face(sessions).update_token_pipelined,
    ):
        redis_client.flushdb()
        workload(update)
        dumps.append(dump(redis_client))
    assert len(dumps[0]) == 6  # login, recent, views and three viewed lists
    assert dumps[0] == dumps[1] == dumps[2]


def test_both_variants_send_the_same_six_commands(redis_client, face):
    """Count the commands the server received (INFO commandstats deltas)."""

    def calls() -> int:
        return command_calls(redis_client, "hset", "zadd", "zremrangebyrank", "expire", "zincrby")

    before = calls()
    face(sessions).update_token("t", "u", "i")
    plain = calls() - before
    before = calls()
    face(sessions).update_token_pipelined("t", "u", "i")
    assert calls() - before == plain == 6


@pytest.mark.parametrize(
    ("token", "user", "item"),
    [("", "u", None), ("a:b", "u", None), ("t", "", None), ("t", "u", "x{y}"), ("t", "u", "")],
)
def test_bad_input_raises_before_anything_is_written(redis_client, update, token, user, item):
    with pytest.raises(InvalidArgument):
        update(token, user, item)
    assert redis_client.dbsize() == 0


def test_a_changed_key_prefix_is_followed_at_once(redis_client, settings, update):
    update("t1", "alice", "book", clock=lambda: 100.0)
    settings.REDISPARTS = {"KEY_PREFIX": "shop"}
    update("t2", "bob", "lamp", clock=lambda: 101.0)
    prefixes = {key.split(b":", 1)[0] for key in scan_keys(redis_client, "*")}
    assert prefixes == {b"rp", b"shop"}
    assert redis_client.hgetall(sessions.login_key()) == {b"t2": b"bob"}
    assert redis_client.zscore(sessions.views_key(), "lamp") == 1.0
