"""Throwaway redis-server processes for test suites (this project's and yours).

    from redisparts_app.testing import LocalCluster, RedisServer, SentinelSetup

Each server is a child process bound to loopback (or a unix socket only), with its
files in a folder the caller owns.
"""

from .servers import (
    LocalCluster,
    RedisServer,
    SentinelServer,
    SentinelSetup,
    free_port,
    server_choice,
    start_replica,
    wait_until,
)

__all__ = [
    "LocalCluster",
    "RedisServer",
    "SentinelServer",
    "SentinelSetup",
    "free_port",
    "server_choice",
    "start_replica",
    "wait_until",
]
