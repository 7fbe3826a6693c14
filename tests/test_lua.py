import re
from importlib.resources import files

import pytest
import redis

from redisparts_app import lua
from redisparts_app.services import market
from tests.lua import load_script


def test_script_runs_and_survives_a_script_flush(redis_client):
    script = load_script(redis_client, "echo_keys")
    assert script(keys=["a", "b"], args=["x"]) == [b"a", b"b", b"x"]
    redis_client.script_flush()  # as after a restart: EVALSHA misses, the call reloads it
    assert script(keys=["c"], args=[]) == [b"c"]


def test_script_in_a_pipeline_is_loaded_before_it_runs(redis_client):
    script = load_script(redis_client, "echo_keys")
    redis_client.script_flush()  # the pipeline must load it: EVALSHA alone would fail
    with redis_client.pipeline(transaction=False) as pipe:
        script(keys=["{t}a"], args=["x"], client=pipe)
        pipe.get("{t}a")
        assert pipe.execute() == [[b"{t}a", b"x"], None]


def test_script_called_with_another_client_runs_there(redis_client, redis_server_factory):
    other = redis_server_factory().client()
    script = load_script(redis_client, "echo_keys")
    assert script(keys=["k"], args=[], client=other) == [b"k"]
    assert other.script_exists(script.sha) == [True]


def test_missing_script_is_named():
    with pytest.raises(FileNotFoundError, match="no_such_script"):
        lua.source("no_such_script")


@pytest.fixture
def full_redis(redis_server_factory, settings):
    """The services on a server of their own; ``fill()`` then sets its maxmemory under the
    memory it uses, under noeviction: every command that may grow memory is refused."""
    server = redis_server_factory(args=["--maxmemory-policy", "noeviction"])
    settings.REDISPARTS = {**settings.REDISPARTS, "CONNECTIONS": {"default": server.url}}
    admin = server.client()

    def fill() -> dict[bytes, bytes]:
        admin.config_set("maxmemory", admin.info("memory")["used_memory"] - 256 * 1024)
        with pytest.raises(redis.OutOfMemoryError):
            admin.set("test:probe", "x")
        return dumps()

    def dumps() -> dict[bytes, bytes]:
        return {key: admin.dump(key) for key in admin.scan_iter()}

    yield fill, dumps
    admin.close()


@pytest.mark.parametrize("strategy", market.STRATEGIES)
def test_a_full_redis_refuses_a_market_call_whole_with_out_of_memory_error(
    full_redis, face, strategy
):
    """Scripts (which Redis 6.2 refuses with a ResponseError naming the script), MULTI and
    locks alike: redis.OutOfMemoryError, and nothing written."""
    fill, dumps = full_redis
    for user, funds in (("ann", 5_000), ("bob", 0)):
        market.create_user(user, funds)
        market.give_item(user, f"{user}'s cap")
    market.list_item("bob", "bob's cap", 300)
    before = fill()
    m = face(market)
    with pytest.raises(redis.OutOfMemoryError):
        m.purchase("ann", "bob's cap", "bob", 300, strategy=strategy)
    with pytest.raises(redis.OutOfMemoryError):
        m.cancel_listing("bob", "bob's cap")  # its first write used to free memory
    with pytest.raises(redis.OutOfMemoryError):
        m.list_item("ann", "ann's cap", 100)
    assert dumps() == before


def test_plain_error_tells_a_relayed_memory_refusal_only():
    relayed = redis.ResponseError(
        "Error running script (call to f_1): @user_script:9: @user_script: 9: -OOM command "
        "not allowed when used memory > 'maxmemory'."
    )
    assert type(lua.plain_error(relayed)) is redis.OutOfMemoryError
    other = redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind")
    assert lua.plain_error(other) is other


# Scripts whose first write (in the text) frees memory although a later one may add data:
# Redis runs them whole even over maxmemory. Each on purpose.
RUN_WHEN_FULL = {
    # The worker and the scheduler take a task first: they drain the queues of a full Redis.
    "queue_dequeue", "queue_reap", "queue_release", "queue_schedule", "queue_settle",
    # A lock's release deletes it, then leaves its waiters a wake-up (one expiring entry).
    "lease_release",
    # A full semaphore sweeps its expired permits before taking one; a refresh of an
    # expired permit deletes it and stops (else a ZADD of a member it holds).
    "semaphore_acquire", "semaphore_refresh",
    # Bookkeeping: the hourly rotations (RENAME) of logs and response times, the rate
    # limiter's trim before its record.
    "log_common", "stats_update", "rate_limit",
}  # fmt: skip
CALL = re.compile(r"""\bp?call\(\s*['"](\w+)['"]""")


def test_a_script_that_may_add_data_writes_first_with_a_command_refused_when_full(
    redis_admin,
):
    """Redis checks maxmemory at a script's first write only, and only for the commands
    it flags denyoom (those that may grow memory): such a command must come first, or
    the script be one of RUN_WHEN_FULL. The order read is the text's."""
    flags = {name: set(info["flags"]) for name, info in redis_admin.command().items()}
    runs_when_full = set()
    for path in files(lua).iterdir():
        if path.name.endswith(".lua"):
            writes = [
                c for c in map(str.lower, CALL.findall(path.read_text())) if "write" in flags[c]
            ]
            grows = [c for c in writes if "denyoom" in flags[c]]
            if grows and writes[0] not in grows:
                runs_when_full.add(path.name.removesuffix(".lua"))
    assert runs_when_full == RUN_WHEN_FULL
