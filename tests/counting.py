"""A real Redis client that records the commands it sends (no mock: it talks to the server)."""

import redis
from redis.cluster import ClusterNode, RedisCluster


class CountingRedis(redis.Redis):
    """Record the name of every command sent, e.g. to prove a waiter does not poll."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands: list[str] = []

    def execute_command(self, *args, **options):
        self.commands.append(str(args[0]).upper())
        return super().execute_command(*args, **options)


class CountingRedisCluster(RedisCluster):
    """CountingRedis for a Redis Cluster: the commands sent through the cluster client."""

    def __init__(self, *args, **kwargs) -> None:
        self.commands: list[str] = []  # first: the constructor already sends commands
        super().__init__(*args, **kwargs)
        self.commands.clear()

    def execute_command(self, *args, **options):
        self.commands.append(str(args[0]).upper())
        return super().execute_command(*args, **options)


def counting_like(client) -> CountingRedis | CountingRedisCluster:
    """A client of the same server, or the same cluster, as ``client`` recording its commands."""
    if isinstance(client, RedisCluster):
        nodes = [ClusterNode(node.host, node.port) for node in client.get_primaries()]
        return CountingRedisCluster(startup_nodes=nodes)
    return CountingRedis(connection_pool=client.connection_pool)


def command_calls(client, *names: str) -> int:
    """Calls of the commands ``names`` (lower case) the server has run (INFO commandstats).

    Summed over the primaries of a Redis Cluster client; replicas are left out, since
    they run every write again.
    """
    if isinstance(client, RedisCluster):
        per_node = client.info("commandstats", target_nodes=RedisCluster.PRIMARIES)
        stats = list(per_node.values())
    else:
        stats = [client.info("commandstats")]
    return sum(s.get(f"cmdstat_{name}", {}).get("calls", 0) for s in stats for name in names)
