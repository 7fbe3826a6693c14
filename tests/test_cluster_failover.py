"""A primary of a Redis Cluster dies: the services' transactions follow its replica."""

import time

import pytest
import redis
from django.test import override_settings

from redisparts_app.connection import get_redis
from redisparts_app.services import market, presence
from redisparts_app.testing import LocalCluster, wait_until


def _retry_until_done(call, timeout: float):
    """Call ``call()`` until it stops raising Redis errors; return its value and the failures."""
    failures = 0
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call(), failures
        except redis.RedisError:
            failures += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.slow
def test_watch_transactions_reach_the_promoted_replica_after_a_primary_dies(tmp_path):
    with LocalCluster(tmp_path / "cluster", masters=3, replicas=1, node_timeout_ms=1000) as cluster:
        connections = {"default": {"CLUSTER": cluster.startup_nodes, "OPTIONS": {
            "socket_connect_timeout": 1, "socket_timeout": 2}}}  # fmt: skip
        with override_settings(REDISPARTS={"CONNECTIONS": connections}):
            client = get_redis()
            market.create_user("ann", 1_000)
            market.create_user("bob", 1_000)
            for n in range(3):
                market.give_item("ann", f"sword{n}")
                market.list_item("ann", f"sword{n}", 100)
            owner = client.get_node_from_key(market.listings_key())
            [primary] = [node for node in cluster.nodes if node.port == owner.port]
            [replica] = [
                node
                for node in cluster.nodes
                if node is not primary
                and node.client().info("replication").get("master_port") == primary.port
            ]
            with primary.client() as old, replica.client() as new:
                # Every write made so far is on the replica, so the failover loses none.
                offset = old.info("replication")["master_repl_offset"]
                wait_until(
                    lambda: new.info("replication")["slave_repl_offset"] >= offset,
                    30,
                    "replication of the market",
                )
            primary.kill()
            with cluster.nodes[0 if primary is not cluster.nodes[0] else 1].client() as other:
                wait_until(
                    lambda: other.execute_command("CLUSTER INFO")["cluster_state"] == "ok",
                    60,
                    "the replica's promotion",
                )
            # WATCH/MULTI go to the slot's primary through on_slot: the first attempts meet
            # the dead one, then the cluster client's refreshed map names the replica.
            bought, _failures = _retry_until_done(
                lambda: market.purchase("bob", "sword0", "ann", 100, strategy="watch"), 60
            )
            assert bought.price == 100
            assert client.get_node_from_key(market.listings_key()).port == replica.port
            assert market.purchase("bob", "sword1", "ann", 100, strategy="item_lock").price == 100
            presence.add_friend("ann", "bob")  # a MULTI on the presence slot's primary
            presence.record_activity("ann")
            assert presence.online_friends("bob") == {"ann"}
            assert market.get_funds("ann") + market.get_funds("bob") == 2_000
            assert sorted(market.get_inventory("bob")) == ["sword0", "sword1"]
            client.close()
