"""Throwaway redis-server and PostgreSQL processes for test suites (this project's and yours).

    from redisparts_app.testing import LocalCluster, PostgresServer, RedisServer, SentinelSetup

Each server is a child process bound to loopback (or a unix socket only), with its
files in a folder the caller owns (PostgresServer: a temporary folder of its own).
"""

from .postgres import PostgresServer, find_postgres_bindir
from .servers import (
    LocalCluster,
    RedisServer,
    SentinelServer,
    SentinelSetup,
    TLSFiles,
    free_port,
    server_choice,
    start_replica,
    tls_binary,
    wait_until,
)

__all__ = [
    "LocalCluster",
    "PostgresServer",
    "RedisServer",
    "SentinelServer",
    "SentinelSetup",
    "TLSFiles",
    "find_postgres_bindir",
    "free_port",
    "server_choice",
    "start_replica",
    "tls_binary",
    "wait_until",
]
