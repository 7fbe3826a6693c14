"""Who is online: users active in the last few minutes, and which of a user's friends are.

Import: ``from redisparts_app.services.presence import record_activity, online_friends``.

A user is online from any activity until the end of the window: the current minute and the
``PRESENCE_WINDOW_MINUTES - 1`` whole minutes before it. Two methods give the same set:
per-minute sets (``method="minutes"``, SUNION of the window's sets) and a last-seen sorted
set (``method="seen"``). Keys, all under the one hash tag ``{presence}`` so that the friends
intersection and logout are single scripts on a Redis Cluster too (on one node):

- ``rp:presence:{presence}:minute:<n>`` set of users active in minute n (Unix seconds // 60)
- ``rp:presence:{presence}:seen`` sorted set: user → last activity (Unix seconds)
- ``rp:presence:{presence}:devices:<user>`` sorted set: device id → last activity
- ``rp:presence:{presence}:friends:<user>`` set of friends (friendship is mutual)

Guarantee: several devices of one user are one presence; ``logout(user, device)`` shows the
user offline at once unless another device was active in the window. Times are Unix seconds
from ``clock``; hosts should keep their clocks in sync to the second. Every function has an
async twin named with an ``a`` on the same core (``faces``).
"""

import time
from collections.abc import Callable
from typing import Any, Literal

from .. import faces
from ..conf import app_settings
from ..connection import Client, resolve_client
from ..exceptions import InvalidArgument
from ..keys import make_key, validate_key_part
from ..validation import check_choice, check_count, check_int

__all__ = [
    "aadd_friend",
    "add_friend",
    "afriends",
    "ais_online",
    "alogout",
    "aonline_friends",
    "aonline_page",
    "aonline_users",
    "arecord_activity",
    "aremove_friend",
    "devices_key",
    "friends",
    "friends_key",
    "is_online",
    "logout",
    "minute_key",
    "online_friends",
    "online_page",
    "online_users",
    "record_activity",
    "remove_friend",
    "seen_key",
]

COMPONENT = "presence"
TAG = "presence"
DEFAULT_DEVICE = "default"
MAX_PAGE = 1000  # users in one page of online_page

Clock = Callable[[], float]
Method = Literal["minutes", "seen"]
METHODS: tuple[Method, ...] = ("minutes", "seen")


def minute_key(minute: int) -> str:
    return make_key(COMPONENT, TAG, "minute", str(minute))


def seen_key() -> str:
    return make_key(COMPONENT, TAG, "seen")


def devices_key(user: str) -> str:
    return make_key(COMPONENT, TAG, "devices", user)


def friends_key(user: str) -> str:
    return make_key(COMPONENT, TAG, "friends", user)


def _window(now: float) -> tuple[list[str], float]:
    """Return the window's minute keys and its start (Unix seconds)."""
    start = _window_start(now)
    first = int(start // 60)
    return [minute_key(m) for m in range(first, int(now // 60) + 1)], start


def _window_start(now: float) -> float:
    """Return the start of the window (Unix seconds): the first of its minutes."""
    return (int(now // 60) - app_settings.PRESENCE_WINDOW_MINUTES + 1) * 60.0


def _ttl() -> int:
    """Seconds a minute set or a devices set must outlive its last write."""
    return (app_settings.PRESENCE_WINDOW_MINUTES + 1) * 60


def record_activity(
    user: str,
    device: str = DEFAULT_DEVICE,
    *,
    client: Client | None = None,
    clock: Clock = time.time,
) -> None:
    """Mark ``user`` active now on ``device`` (any id of a device, tab or session)."""
    faces.run(_record_activity(user, device, clock), resolve_client(client))


async def arecord_activity(
    user: str,
    device: str = DEFAULT_DEVICE,
    *,
    client: Client | None = None,
    clock: Clock = time.time,
) -> None:
    """The async twin of ``record_activity`` (``client``: a redis.asyncio client or None)."""
    await faces.arun(_record_activity(user, device, clock), client)


def _record_activity(user: str, device: str, clock: Clock) -> faces.Op:
    user = validate_key_part(user, "user")
    device = validate_key_part(device, "device")
    now = clock()
    keys, start = _window(now)
    return faces.transaction(
        seen_key(),
        [
            faces.command("sadd", keys[-1], user),
            faces.command("expire", keys[-1], _ttl()),
            faces.command("zadd", seen_key(), {user: now}),
            faces.command("zremrangebyscore", seen_key(), "-inf", f"({start}"),
            faces.command("zadd", devices_key(user), {device: now}),
            faces.command("expire", devices_key(user), _ttl()),
        ],
        then=_none,
    )


def online_users(
    *, method: Method = "seen", client: Client | None = None, clock: Clock = time.time
) -> set[str]:
    """Return the users active in the window, by either method (same answer)."""
    return faces.run(_online_users(method, clock), resolve_client(client))


async def aonline_users(
    *, method: Method = "seen", client: Client | None = None, clock: Clock = time.time
) -> set[str]:
    """The async twin of ``online_users``."""
    return await faces.arun(_online_users(method, clock), client)


def _online_users(method: Method, clock: Clock) -> faces.Op:
    check_choice(method, "method", METHODS)
    keys, start = _window(clock())
    if method == "minutes":
        return faces.command("sunion", keys, then=_names)
    return faces.command("zrangebyscore", seen_key(), start, "+inf", then=_names)  # "seen"


def online_page(
    offset: int = 0, count: int = 100, *, client: Client | None = None, clock: Clock = time.time
) -> tuple[list[str], int]:
    """Return up to ``count`` online users from ``offset``, the most recently active first,
    and how many are online in all (the last-seen set: two commands, however many there are).
    """
    return faces.run(_online_page(offset, count, clock), resolve_client(client))


async def aonline_page(
    offset: int = 0, count: int = 100, *, client: Client | None = None, clock: Clock = time.time
) -> tuple[list[str], int]:
    """The async twin of ``online_page``."""
    return await faces.arun(_online_page(offset, count, clock), client)


def _online_page(offset: int, count: int, clock: Clock) -> faces.Op:
    offset = check_int(offset, "offset", minimum=0)
    count = check_count(count, "count", maximum=MAX_PAGE)
    _keys, start = _window(clock())

    def page(replies: list[Any]) -> tuple[list[str], int]:
        users, total = replies
        return [user.decode() for user in users], int(total)

    return faces.pipeline(
        [
            faces.command("zrevrangebyscore", seen_key(), "+inf", start, start=offset, num=count),
            faces.command("zcount", seen_key(), start, "+inf"),
        ],
        then=page,
    )


def is_online(user: str, *, client: Client | None = None, clock: Clock = time.time) -> bool:
    """Return whether ``user`` was active in the window."""
    return faces.run(_is_online(user, clock), resolve_client(client))


async def ais_online(user: str, *, client: Client | None = None, clock: Clock = time.time) -> bool:
    """The async twin of ``is_online``."""
    return await faces.arun(_is_online(user, clock), client)


def _is_online(user: str, clock: Clock) -> faces.Op:
    user = validate_key_part(user, "user")
    start = _window_start(clock())
    return faces.command(
        "zscore", seen_key(), user, then=lambda seen: seen is not None and seen >= start
    )


def logout(
    user: str,
    device: str = DEFAULT_DEVICE,
    *,
    client: Client | None = None,
    clock: Clock = time.time,
) -> bool:
    """Forget ``device``; return True if the user is now offline (no other device active)."""
    return faces.run(_logout(user, device, clock), resolve_client(client))


async def alogout(
    user: str,
    device: str = DEFAULT_DEVICE,
    *,
    client: Client | None = None,
    clock: Clock = time.time,
) -> bool:
    """The async twin of ``logout``."""
    return await faces.arun(_logout(user, device, clock), client)


def _logout(user: str, device: str, clock: Clock) -> faces.Op:
    user = validate_key_part(user, "user")
    device = validate_key_part(device, "device")
    keys, start = _window(clock())
    return faces.script(
        "presence_logout",
        [devices_key(user), seen_key(), *keys],
        [user, device, start],
        then=bool,
    )


def add_friend(user: str, friend: str, *, client: Client | None = None) -> None:
    """Make ``user`` and ``friend`` friends of each other."""
    faces.run(_change_friendship("sadd", user, friend), resolve_client(client))


async def aadd_friend(user: str, friend: str, *, client: Client | None = None) -> None:
    """The async twin of ``add_friend``."""
    await faces.arun(_change_friendship("sadd", user, friend), client)


def remove_friend(user: str, friend: str, *, client: Client | None = None) -> None:
    """End the friendship of ``user`` and ``friend`` (both directions)."""
    faces.run(_change_friendship("srem", user, friend), resolve_client(client))


async def aremove_friend(user: str, friend: str, *, client: Client | None = None) -> None:
    """The async twin of ``remove_friend``."""
    await faces.arun(_change_friendship("srem", user, friend), client)


def _change_friendship(command: str, user: str, friend: str) -> faces.Op:
    """Apply SADD or SREM to both friends sets in one MULTI."""
    user = validate_key_part(user, "user")
    friend = validate_key_part(friend, "friend")
    if user == friend:
        raise InvalidArgument(
            "friend", friend, "must differ from the user: nobody befriends themselves"
        )
    return faces.transaction(
        friends_key(user),
        [
            faces.command(command, friends_key(user), friend),
            faces.command(command, friends_key(friend), user),
        ],
        then=_none,
    )


def friends(user: str, *, client: Client | None = None) -> set[str]:
    """Return the friends of ``user``."""
    return faces.run(_friends(user), resolve_client(client))


async def afriends(user: str, *, client: Client | None = None) -> set[str]:
    """The async twin of ``friends``."""
    return await faces.arun(_friends(user), client)


def _friends(user: str) -> faces.Op:
    user = validate_key_part(user, "user")
    return faces.command("smembers", friends_key(user), then=_names)


def online_friends(
    user: str, *, method: Method = "minutes", client: Client | None = None, clock: Clock = time.time
) -> set[str]:
    """Return the friends of ``user`` active in the window, computed atomically in one script.

    ``minutes`` intersects the friends set with each of the window's sets; ``seen``
    checks each friend's last-seen score. Neither writes.
    """
    return faces.run(_online_friends(user, method, clock), resolve_client(client))


async def aonline_friends(
    user: str, *, method: Method = "minutes", client: Client | None = None, clock: Clock = time.time
) -> set[str]:
    """The async twin of ``online_friends``."""
    return await faces.arun(_online_friends(user, method, clock), client)


def _online_friends(user: str, method: Method, clock: Clock) -> faces.Op:
    user = validate_key_part(user, "user")
    check_choice(method, "method", METHODS)
    keys, start = _window(clock())
    if method == "minutes":
        return faces.script("presence_online_friends", [friends_key(user), *keys], [], then=_names)
    return faces.script(  # "seen"
        "presence_online_friends_seen", [friends_key(user), seen_key()], [start], then=_names
    )


def _names(members: Any) -> set[str]:
    return {member.decode() for member in members}


def _none(_reply: Any) -> None:
    return None
