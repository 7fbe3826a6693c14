import pytest

from redisparts_app import lua


def test_script_runs_and_survives_a_script_flush(redis_client):
    script = lua.script(redis_client, "echo_keys")
    assert script(keys=["a", "b"], args=["x"]) == [b"a", b"b", b"x"]
    redis_client.script_flush()  # as after a restart: EVALSHA misses, the call reloads it
    assert script(keys=["c"], args=[]) == [b"c"]


def test_missing_script_is_named():
    with pytest.raises(FileNotFoundError, match="no_such_script"):
        lua.source("no_such_script")
