"""The least-privilege Redis ACL rules of each component: the one table of them.

Import: ``from redisparts_app.acl import COMPONENTS, rules, setuser_line``.

``COMPONENTS`` names, per component, the key namespaces its keys live in (the
``component`` of ``keys.make_key``, so ``<KEY_PREFIX>:<namespace>:*``), the Lua
scripts it runs and the commands it sends itself; the commands inside the scripts
are read from the scripts, since Redis checks each ``redis.call`` of a script
against the caller's rules too. ``uses`` adds another component's rules (the market
takes locks). ``BASE`` is what every component needs: the connection handshake,
scripts, transactions, the name registry (``<prefix>:registry:*``) and a Redis
Cluster's topology.

``manage.py rp_acl`` prints the result as an ``ACL SETUSER`` line; the test suite
runs one pass as a user holding only these rules (REDISPARTS_TEST_ACL=1), so a
command or key added without its rule fails there.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass

from . import lua

__all__ = [
    "BASE",
    "COMPONENTS",
    "NEWEST",
    "REFUSED_BY",
    "Component",
    "component_names",
    "rules",
    "script_commands",
    "setuser_line",
]


@dataclass(frozen=True)
class Component:
    """What one component touches: key namespaces, Lua scripts and its own commands."""

    keys: tuple[str, ...] = ()
    scripts: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()


# Commands are lower case; ``container|sub`` grants one subcommand only.
BASE = Component(
    keys=("registry",),
    scripts=("registry_forget",),
    commands=(
        # the handshake redis-py sends (AUTH and HELLO are always allowed)
        "ping", "select", "client|setinfo", "client|setname", "echo",
        # scripts: EVALSHA, SCRIPT LOAD when the server lost them, SCRIPT EXISTS
        # before a pipeline of them (redis-py)
        "evalsha", "script|load", "script|exists",
        "multi", "exec", "discard", "watch", "unwatch",
        # the system check's version probe; server time for every clock in Redis
        "info", "time",
        # SCAN only in maintenance: rp_registry rebuilds the registries (DBSIZE: its progress)
        "scan", "dbsize",
        # the name registry (services.registry)
        "zadd", "zrange", "zrangebyscore", "zrem", "zscore", "exists",
        # a Redis Cluster client reads the topology, follows ASK, reads replicas
        "cluster|slots", "cluster|shards", "cluster|nodes", "command", "asking",
        "readonly", "readwrite",
    ),
)  # fmt: skip

COMPONENTS: dict[str, Component] = {
    "autocomplete": Component(
        keys=("ac",),
        scripts=("autocomplete_add_contact", "autocomplete_join", "autocomplete_leave",
                 "autocomplete_lex", "autocomplete_remove_contact"),
        commands=("hexists", "hkeys", "hlen", "lrange", "smembers", "zadd", "zrange",
                  "zrangebylex", "zrank", "zrem", "zrevrange", "zscan", "zscore"),
    ),
    "chat": Component(
        keys=("chat", "chat_ids", "chat_user"),
        scripts=("chat_fetch", "chat_join", "chat_leave", "chat_read", "chat_send"),
        commands=("exists", "hget", "hmget", "incrby", "xrange", "xread", "zadd", "zcard",
                  "zmscore", "zrange", "zrem", "zscore"),
    ),
    "config": Component(
        keys=("config", "maintenance"),
        commands=("get", "set", "del"),
    ),
    "counters": Component(
        keys=("counter", "counters"),
        scripts=("counter_trim",),
        commands=("exists", "expire", "hgetall", "hincrby", "zadd", "zcard", "zrem", "zscan"),
    ),
    "files": Component(
        keys=("files",),
        scripts=("files_done",),
        commands=("del", "exists", "getrange", "set"),
        uses=("chat",),
    ),
    "geoip": Component(
        keys=("geoip",),
        scripts=("geoip_find",),
        commands=("del", "expire", "hlen", "hset", "persist", "rename", "zadd", "zcard"),
    ),
    "locks": Component(
        keys=("lock",),
        scripts=("lease_acquire", "lease_extend", "lease_release"),
        commands=("blpop", "get", "pttl", "set"),
    ),
    "log_processing": Component(
        keys=("logproc",),
        commands=("del", "hgetall", "hset"),
    ),
    "logs": Component(
        keys=("log",),
        scripts=("log_common", "log_common_read", "log_recent"),
        commands=("lrange",),
    ),
    "mail": Component(
        keys=("mail",),
        scripts=("mail_delete", "mail_fetch", "mail_mark_read", "mail_send"),
        commands=("scard",),
    ),
    "market": Component(
        keys=("market",),
        scripts=("market_cancel", "market_give", "market_notice_abandon", "market_purchase"),
        commands=("exists", "get", "hget", "hincrby", "hsetnx", "sadd", "set", "sismember",
                  "smembers", "srem", "zadd", "zcard", "zmscore", "zrange", "zrem", "zscore"),
        uses=("locks", "tasks"),
    ),
    "persistence": Component(
        keys=("persist",),
        # the status and backup commands (the RDB file's path: CONFIG GET dir, dbfilename);
        # WAIT and WAITAOF for wait_for_sync, with a marker key
        commands=("bgsave", "config|get", "del", "exists", "set", "wait", "waitaof"),
    ),
    "presence": Component(
        keys=("presence",),
        scripts=("presence_logout", "presence_online_friends", "presence_online_friends_seen"),
        commands=("expire", "sadd", "smembers", "sunion", "zadd", "zcount", "zrangebyscore",
                  "zremrangebyscore", "zrevrangebyscore", "zscore"),
    ),
    "ratelimit": Component(keys=("ratelimit",), scripts=("rate_limit",)),
    "semaphores": Component(
        keys=("semaphore",),
        scripts=("semaphore_acquire", "semaphore_holders", "semaphore_refresh",
                 "semaphore_release"),
        commands=("blpop", "hget"),
    ),
    "sessions": Component(
        keys=("session",),
        commands=("hset", "zadd", "zremrangebyrank", "expire", "zincrby"),
    ),
    "stats": Component(
        keys=("stats", "stats_rank"),
        scripts=("stats_read", "stats_update"),
        commands=("zadd", "zremrangebyrank", "zrevrange"),
    ),
    "tasks": Component(
        keys=("queue",),
        scripts=("queue_cancel", "queue_delete", "queue_dequeue", "queue_enqueue", "queue_extend",
                 "queue_quarantined", "queue_reap", "queue_release", "queue_requeue",
                 "queue_schedule", "queue_settle", "periodic_fire", "result_progress"),
        commands=("blmove", "blpop", "del", "exists", "get", "hdel", "hget", "hgetall", "hmget",
                  "llen", "lrange", "set", "smembers", "wait", "zcard", "zcount", "zrange",
                  "zscore"),
        uses=("locks",),
    ),
}  # fmt: skip

# The admin pages, /health/ and /metrics read every component's keys (queue ages, lock
# TTLs, chat sizes...) and the server's INFO.
COMPONENTS["monitoring"] = Component(
    commands=("hget", "hmget", "info", "lindex", "llen", "pttl", "smembers", "time", "zcard",
              "zcount", "zrange"),
    uses=tuple(COMPONENTS),
)  # fmt: skip

# Rules for commands some servers lack, which they refuse in ACL SETUSER: the versions
# [first, last) that refuse each (Redis 6.2 takes a rule for any subcommand; 7.0
# checks them). Valkey's binary reports its own version (8.x), its INFO 7.2.4.
REFUSED_BY = {"waitaof": ((0,), (7, 2)), "client|setinfo": ((7, 0), (7, 2))}
NEWEST = (7, 2)

# A command name in the first argument of redis.call/pcall: a quoted word, or two for a
# choice such as ``redis.call(up and 'lpush' or 'rpush', ...)``.
_CALL_RE = re.compile(r"\b(?:redis\.)?p?call\(([^,)]*)")
_WORD_RE = re.compile(r"'([A-Za-z]+)'")


def script_commands(name: str) -> set[str]:
    """Return the commands the bundled script ``name`` calls, lower case.

    ValueError when a call names its command otherwise than by a quoted word: the
    rules could not list it.
    """
    found: set[str] = set()
    for call in _CALL_RE.finditer(lua.source(name)):
        words = _WORD_RE.findall(call.group(1))
        if not words:
            raise ValueError(f"script {name!r} calls a command not named by a quoted word")
        found.update(word.lower() for word in words)
    return found


def _refuses(version: tuple[int, ...], command: str) -> bool:
    first, last = REFUSED_BY.get(command, ((), ()))
    return first <= version < last


def component_names() -> list[str]:
    return sorted(COMPONENTS)


def _closure(names: Iterable[str]) -> list[Component]:
    """The components named, those they use (transitively) and BASE, without repeats."""
    seen: dict[str, Component] = {}
    pending = list(names)
    while pending:
        name = pending.pop()
        if name not in COMPONENTS:
            raise KeyError(name)
        if name not in seen:
            seen[name] = COMPONENTS[name]
            pending.extend(COMPONENTS[name].uses)
    return [BASE, *seen.values()]


def rules(
    prefix: str,
    components: Iterable[str] | None = None,
    version: tuple[int, ...] = NEWEST,
) -> list[str]:
    """Return the ACL rules for ``components`` (default: all) with keys under ``prefix``,
    for a server of ``version`` (commands it lacks left out, see REFUSED_BY).

    KeyError names an unknown component. The rules start from nothing
    (``resetkeys resetchannels -@all``), so applying them again drops stale ones.
    """
    chosen = _closure(component_names() if components is None else components)
    namespaces = sorted({namespace for part in chosen for namespace in part.keys})
    commands: set[str] = set()
    for part in chosen:
        commands.update(part.commands)
        for script in part.scripts:
            commands.update(script_commands(script))
    commands = {command for command in commands if not _refuses(version, command)}
    return [
        "resetkeys",
        "resetchannels",
        "-@all",
        *(f"~{prefix}:{namespace}:*" for namespace in namespaces),
        *(f"+{command}" for command in sorted(commands)),
    ]


def setuser_line(
    user: str,
    prefix: str,
    components: Iterable[str] | None = None,
    version: tuple[int, ...] = NEWEST,
) -> str:
    """Return ``ACL SETUSER <user> on <rules>``: the line an operator pastes.

    The password is left as it is (no ``reset``), so the line can be applied again
    after an upgrade: set it once with ``ACL SETUSER <user> ><password>``.
    """
    return " ".join(["ACL", "SETUSER", user, "on", *rules(prefix, components, version)])
