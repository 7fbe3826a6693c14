"""The landing page."""

from django.shortcuts import render
from redis.cluster import RedisCluster

from redisparts_app.connection import get_redis

from ..demo_data import ACCOUNTS

PARTS = [
    ("Autocomplete", "Recent contacts and guild member completion, any script."),
    ("Locks", "Owner-only release, fencing tokens, wake-up on release."),
    ("Semaphores", "Counting and fair semaphores, never above the limit."),
    ("Task queues", "Priority queues, delayed tasks, nothing lost when a worker dies."),
    ("Messaging", "Guild mail, and group chat pushed as server-sent events, polling as fallback."),
    ("File distribution", "Log files through Redis to many processors."),
    ("Transactions", "Market purchases with WATCH, locks or one Lua script."),
    ("Counters and stats", "Counters at several precisions, response-time statistics."),
    ("Logs", "Recent and common logs fed by Django's logging."),
    ("Configuration", "Maintenance flag and JSON configuration with local caching."),
    ("Presence", "Who is online, and which friends."),
    ("IP to city", "GeoLite-format lookups."),
]


def server_address(client) -> str:
    """The unix socket or host:port of a client; a cluster's nodes for a cluster client."""
    if isinstance(client, RedisCluster):
        return "cluster: " + ", ".join(sorted(node.name for node in client.get_nodes()))
    kwargs = client.connection_pool.connection_kwargs
    return kwargs.get("path") or "{host}:{port}".format(**kwargs)


def home(request):
    """Landing page: the demo accounts, what the demo shows and the Redis server it runs on."""
    client = get_redis()
    info = client.info()
    server = {
        "version": info.get("redis_version"),
        "mode": info.get("redis_mode"),
        "aof": "on" if info.get("aof_enabled") else "off",
        "memory": info.get("used_memory_human"),
        "keys": sum(v.get("keys", 0) for k, v in info.items() if k.startswith("db")),
        "address": server_address(client),
    }
    context = {"server": server, "parts": PARTS, "accounts": ACCOUNTS}
    return render(request, "marketplace/home.html", context)
