import pytest

from redisparts_app import lua
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
