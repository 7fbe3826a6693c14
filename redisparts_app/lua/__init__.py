"""Lua scripts, one ``<name>.lua`` file each beside this module.

Import: ``from redisparts_app import lua``.

Each file starts with a header naming its ``KEYS[]`` and ``ARGV[]`` slots and
what it returns. Scripts touch only keys passed in ``KEYS`` (all with one hash
tag), so they run unchanged on a Redis Cluster.

    script = lua.script(client, "lock_release")
    released = script(keys=[lock_key], args=[token])

A script sends EVALSHA and, when the server does not know it yet (after a restart
or a failover), loads it with SCRIPT LOAD and sends EVALSHA again.

On a Redis over its ``maxmemory`` (noeviction), a script is refused at its first write,
when that command may grow memory (SET, HSET, ZADD, INCR...: the commands Redis flags
``denyoom``); a script that has written once runs to its end. So a script that may add
data writes first with such a command, and is refused whole (``OutOfMemoryError``,
``plain_error``); one whose first write frees memory (DEL, ZREM...) runs even then.
"""

import hashlib
from collections.abc import Iterable, Sequence
from functools import cache
from importlib.resources import files
from typing import Any

from redis.commands.core import Script
from redis.exceptions import NoScriptError, OutOfMemoryError, ResponseError

from ..connection import Client, is_pipeline, is_pipeline_class

__all__ = ["LuaScript", "call", "plain_error", "script", "sha", "source"]

# How Redis 6.2 relays a memory refusal met by a script's command, inside its own error:
# "Error running script (call to f_<sha>): @user_script:9: @user_script: 9: -OOM command
# not allowed when used memory > 'maxmemory'." Redis 7 and Valkey answer the command's
# own error ("OOM command not allowed ..."), which redis-py raises as OutOfMemoryError.
RELAYED_OOM = ": -OOM command not allowed"


def plain_error(exc: Exception) -> Exception:
    """Return ``exc``, or an OutOfMemoryError for a memory refusal a script relayed."""
    if type(exc) is ResponseError and RELAYED_OOM in str(exc):
        return OutOfMemoryError(str(exc))
    return exc


@cache
def source(name: str) -> str:
    """Return the text of ``<name>.lua``; FileNotFoundError names a missing script."""
    resource = files(__name__) / f"{name}.lua"
    if not resource.is_file():
        raise FileNotFoundError(f"no Lua script {name!r} in redisparts_app/lua/")
    return resource.read_text(encoding="utf-8")


@cache
def sha(name: str) -> str:
    """Return the SHA1 of ``<name>.lua`` (what EVALSHA takes), computed once per process."""
    return hashlib.sha1(source(name).encode("utf-8"), usedforsecurity=False).hexdigest()


class LuaScript(Script):
    """redis-py's Script for a Lua source, with a SHA computed once by the caller."""

    def __init__(self, client: Client, text: str, sha: str | None = None) -> None:
        self.registered_client: Client = client
        self.script = text
        self.sha = sha or hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()

    def __call__(
        self,
        keys: Sequence[Any] | None = (),
        args: Iterable[Any] | None = (),
        client: Client | None = None,
    ) -> Any:
        """Run the script on ``client`` (default: the registered one) and return its reply.

        On a client, EVALSHA goes straight to ``execute_command``: redis-py's
        ``Script.__call__`` adds an import, a Protocol isinstance check and tuple
        copies per call, on single-round-trip paths such as a lock's acquire. Pipelines
        go through redis-py's own path, which loads the script before the pipeline runs.
        """
        client = self.registered_client if client is None else client
        if is_pipeline(client):
            return super().__call__(keys, args, client)
        keys, args = keys or (), args or ()
        try:
            try:
                return client.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)
            except NoScriptError:
                self.sha = client.script_load(self.script)
                return client.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)
        except ResponseError as exc:
            raise plain_error(exc) from None


def script(client: Client, name: str) -> LuaScript:
    """Return ``<name>.lua`` registered on ``client`` (a client, cluster client or pipeline).

    What ``client.register_script(source(name))`` gives, built without encoding and
    hashing the source again (its SHA is computed once per process):
    services build one on every call, on their hot paths. redis-py loads the script
    lazily on first use; a client with a non-UTF-8 encoding gets a NoScriptError on
    the first EVALSHA, and redis-py then loads the script and keeps the server's SHA.
    """
    return LuaScript(client, source(name), sha(name))


def call(client: Client, name: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
    """Run ``<name>.lua`` on ``client`` with ``keys`` and ``args``; return its reply.

    What ``script(client, name)(keys=keys, args=args)`` does, without building the
    script object on a client: EVALSHA straight away, and only after a NOSCRIPT the
    object, which loads the script and sends it again.
    """
    kind: type = type(client)
    if not is_pipeline_class(kind):  # not is_pipeline(): one call less per script
        try:
            return client.execute_command("EVALSHA", sha(name), len(keys), *keys, *args)
        except NoScriptError:
            pass
        except ResponseError as exc:
            raise plain_error(exc) from None
    return script(client, name)(keys=keys, args=args)
