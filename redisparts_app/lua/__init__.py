"""Lua scripts, one ``<name>.lua`` file each beside this module.

Each file starts with a header naming its ``KEYS[]`` and ``ARGV[]`` slots and
what it returns. Scripts touch only keys passed in ``KEYS`` (all with one hash
tag), so they run unchanged on a Redis Cluster.

    script = lua.script(client, "lock_release")
    released = script(keys=[lock_key], args=[token])

redis-py's ``Script`` sends EVALSHA and falls back to EVAL once when the server
does not know the script yet (after a restart or a failover).
"""

from functools import cache
from importlib.resources import files

from redis.commands.core import Script


@cache
def source(name: str) -> str:
    """Return the text of ``<name>.lua``; FileNotFoundError names a missing script."""
    resource = files(__name__) / f"{name}.lua"
    if not resource.is_file():
        raise FileNotFoundError(f"no Lua script {name!r} in redisparts_app/lua/")
    return resource.read_text(encoding="utf-8")


def script(client, name: str) -> Script:
    """Return ``<name>.lua`` registered on ``client`` (a client, cluster client or pipeline).

    The object is cheap to build: redis-py computes the SHA once per call here
    and loads the script lazily on first use.
    """
    return client.register_script(source(name))
