"""Session-token bookkeeping, written with plain calls and with one pipeline.

Import: ``from redisparts_app.services.sessions import update_token``.

The example of pipelining: ``update_token`` sends each command on its own round trip (two,
or six with an item), ``update_token_pipelined`` sends the same commands in one
non-transactional pipeline, one round trip. Same signature, same effects.

Keys (one hash tag, ``{session}``; a pipeline needs none, but one slot keeps a Cluster
pipeline to one node):

- ``rp:session:{session}:login`` hash: token → user.
- ``rp:session:{session}:recent`` sorted set: token scored by its last use (seconds).
- ``rp:session:{session}:viewed:<token>`` sorted set: the ``VIEWED_LIMIT`` items the token
  viewed most recently, scored by time (seconds); expires ``SESSION_TTL`` after the last view.
- ``rp:session:{session}:views`` sorted set: item → number of views.

Neither variant is atomic: another client may see some of the writes of one call before the
others. Removing stale sessions is left to the caller, as in the book's session cleaner.
Async twins: ``aupdate_token``, ``aupdate_token_pipelined`` send the same commands.
"""

import time
from collections.abc import Callable
from functools import cache
from typing import Any

from ..conf import app_settings
from ..connection import Client, resolve_async_client, resolve_client
from ..keys import make_key, validate_key_part

__all__ = [
    "aupdate_token",
    "aupdate_token_pipelined",
    "login_key",
    "recent_key",
    "update_token",
    "update_token_pipelined",
    "viewed_key",
    "views_key",
]

COMPONENT = "session"
TAG = "session"
# Items kept per token in its viewed list.
VIEWED_LIMIT = 25


def login_key() -> str:
    return make_key(COMPONENT, TAG, "login")


def recent_key() -> str:
    return make_key(COMPONENT, TAG, "recent")


def viewed_key(token: str) -> str:
    return make_key(COMPONENT, TAG, "viewed", token)


def views_key() -> str:
    return make_key(COMPONENT, TAG, "views")


def update_token(
    token: str,
    user: str,
    item: str | None = None,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> None:
    """Record that ``user`` used ``token`` (and viewed ``item``), one command per round trip."""
    client = resolve_client(client)
    for command in _commands(token, user, item, clock):
        client.execute_command(*command)


async def aupdate_token(
    token: str,
    user: str,
    item: str | None = None,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> None:
    """The async twin of ``update_token`` (``client``: a redis.asyncio client or None)."""
    client = resolve_async_client(client)
    for command in _commands(token, user, item, clock):
        await client.execute_command(*command)


def update_token_pipelined(
    token: str,
    user: str,
    item: str | None = None,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> None:
    """Do what update_token does, in one round trip (a pipeline without MULTI)."""
    pipe = resolve_client(client).pipeline(transaction=False)
    for command in _commands(token, user, item, clock):
        pipe.execute_command(*command)
    pipe.execute()


async def aupdate_token_pipelined(
    token: str,
    user: str,
    item: str | None = None,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> None:
    """The async twin of ``update_token_pipelined``."""
    async with resolve_async_client(client).pipeline(transaction=False) as pipe:
        for command in _commands(token, user, item, clock):
            pipe.execute_command(*command)
        await pipe.execute()


@cache
def _shared_keys(prefix: str) -> tuple[str, str, str]:
    # The keys every update writes, built once per key prefix (``prefix`` is the
    # cache key: a changed KEY_PREFIX builds them again).
    return login_key(), recent_key(), views_key()


def _commands(
    token: str, user: str, item: str | None, clock: Callable[[], float]
) -> list[tuple[Any, ...]]:
    """Return the commands of one update, the one list every variant sends.

    Commands as they go on the wire, sent by each variant's own short loop rather than
    a ``faces`` core or redis-py's helpers (hset, zadd, ...): the pipelining example
    compares round trips, so nothing else should weigh on either variant.
    """
    token = validate_key_part(token, "token")
    user = validate_key_part(user, "user")
    if item is not None:
        item = validate_key_part(item, "item")
    now = clock()
    login, recent, views = _shared_keys(app_settings.KEY_PREFIX)
    commands: list[tuple[Any, ...]] = [("HSET", login, token, user), ("ZADD", recent, now, token)]
    if item is not None:
        viewed = viewed_key(token)
        commands += [
            ("ZADD", viewed, now, item),
            # Keep the VIEWED_LIMIT most recent: ranks 0 … -(limit+1) are the oldest.
            ("ZREMRANGEBYRANK", viewed, 0, -(VIEWED_LIMIT + 1)),
            ("EXPIRE", viewed, app_settings.SESSION_TTL),
            ("ZINCRBY", views, 1, item),
        ]
    return commands
