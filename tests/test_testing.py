"""The throwaway servers later suites build on: a replica, a Redis Cluster, a Sentinel set-up."""

import pytest
from django.test import override_settings

from redisparts_app.connection import get_redis
from redisparts_app.embedded import server_version
from redisparts_app.exceptions import ServerBinaryNotFound
from redisparts_app.keys import make_key, slot_of
from redisparts_app.testing import RedisServer, SentinelSetup, server_choice, start_replica
from tests.lua import load_script


def test_replica_receives_the_masters_writes(redis_server_factory, tmp_path):
    master = redis_server_factory()
    replica = start_replica(master, tmp_path / "replica")
    try:
        master.client().set("greeting", "hello")
        master.client().wait(1, 5000)
        assert replica.client().get("greeting") == b"hello"
        assert replica.client().info("replication")["role"] == "slave"
    finally:
        replica.stop()


def test_replica_of_a_socket_only_server_is_refused(tmp_path):
    master = RedisServer(tmp_path / "m", unix_socket=True)
    with pytest.raises(ValueError, match="TCP"):
        start_replica(master, tmp_path / "r")


def test_local_cluster_serves_get_redis_across_slots(redis_cluster):
    cluster = redis_cluster  # the session's: 3 masters, 1 replica each
    connections = {"default": {"CLUSTER": cluster.startup_nodes}}
    with override_settings(REDISPARTS={"CONNECTIONS": connections}):
        client = get_redis()
        keys = [make_key("test", f"user{n}", "data") for n in range(30)]
        assert len({slot_of(key) // 5462 for key in keys}) == 3  # every master gets keys
        for key in keys:
            client.set(key, key)
        assert [client.get(key) for key in keys] == [key.encode() for key in keys]
        # Keys sharing a tag share a slot, so one script over them runs on the cluster.
        first, second = make_key("test", "same", "a"), make_key("test", "same", "b")
        script = load_script(client, "echo_keys")
        assert script(keys=[first, second], args=[]) == [first.encode(), second.encode()]
    roles = [node.client().info("replication")["role"] for node in cluster.nodes]
    assert sorted(roles) == ["master"] * 3 + ["slave"] * 3


@pytest.mark.slow
def test_sentinel_setup_serves_get_redis_through_the_sentinels(tmp_path):
    with SentinelSetup(tmp_path / "sentinel", replicas=1, sentinels=3) as setup:
        connections = {
            "default": {
                "SENTINELS": setup.sentinel_addresses,
                "SERVICE_NAME": setup.service_name,
            }
        }
        with override_settings(REDISPARTS={"CONNECTIONS": connections}):
            client = get_redis()
            client.set("through-sentinel", "yes")
            assert setup.master.client().get("through-sentinel") == b"yes"
        host, port = setup.sentinel().discover_master(setup.service_name)
        assert (host, port) == (setup.master.host, setup.master.port)


def test_server_choice_names_each_wheel_server_by_its_major_version():
    redis6, valkey8 = server_choice("redis6"), server_choice("valkey8")
    assert (redis6.name, server_version(redis6)[0]) == ("redis-server", 6)
    assert (valkey8.name, server_version(valkey8)[0]) == ("valkey-server", 8)


def test_server_choice_passes_over_a_redis_server_of_another_major_version(monkeypatch, tmp_path):
    # A PATH whose only redis-server is the 6.2 one: there is no Redis 7 to run.
    (tmp_path / "redis-server").symlink_to(server_choice("redis6"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ServerBinaryNotFound, match=r"redis7: no redis-server 7\.x in PATH"):
        server_choice("redis7")


def test_server_choice_refuses_what_is_neither_a_name_nor_a_binary(tmp_path):
    with pytest.raises(ServerBinaryNotFound, match="neither one of redis6, redis7, valkey8"):
        server_choice(str(tmp_path / "redis9"))
