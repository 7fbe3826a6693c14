"""Who is online: users active in the last few minutes, and which of a user's friends are.

Import: ``from redisparts_app.services.presence import record_activity, online_friends``.

A user is online from any activity until the end of the window: the current
minute and the ``PRESENCE_WINDOW_MINUTES - 1`` (default 9) whole minutes before
it, so "the last 10 minutes" counted in whole minutes. Two ways to answer,
which give the same set:

- per-minute sets: each activity adds the user to the set of its minute;
  online = SUNION of the window's sets (``method="minutes"``);
- a last-seen sorted set: user → time of the last activity; online = members
  scored at or after the window start (``method="seen"``).

Keys, all under the one hash tag ``{presence}`` so that the friends
intersection and logout run as single scripts on a Redis Cluster too (the cost:
presence lives on one Cluster node):

- ``rp:presence:{presence}:minute:<n>`` set of users active in minute n (Unix
  seconds // 60); expires once it has left every window.
- ``rp:presence:{presence}:seen`` sorted set: user → last activity (Unix seconds);
  entries older than the window are trimmed on each activity.
- ``rp:presence:{presence}:devices:<user>`` sorted set: device or session id →
  last activity; expires a window after the user's last activity.
- ``rp:presence:{presence}:friends:<user>`` set of friends (friendship is mutual).
- ``rp:presence:{presence}:tmp:<random>`` exists only inside one script call.

Devices: several devices or tabs of one user are one presence, since the
structures above hold users. ``logout(user, device)`` forgets that device; if
no other device of the user was active in the window, the user is removed from
the window's minute sets and the last-seen set at once, so they show offline
immediately; otherwise they stay online through the other device.

Times are Unix seconds from ``clock`` (``time.time`` unless injected); hosts
recording activity should keep their clocks in sync to the second.
"""

import time
import uuid
from collections.abc import Callable
from typing import Any, Literal

from .. import lua
from ..conf import app_settings
from ..connection import Client, resolve_client, transaction
from ..exceptions import InvalidArgument
from ..keys import make_key, validate_key_part
from ..validation import check_choice, check_count, check_int

__all__ = [
    "add_friend",
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
    user = validate_key_part(user, "user")
    device = validate_key_part(device, "device")
    now = clock()
    keys, start = _window(now)

    def queue(pipe: Any) -> None:
        pipe.sadd(keys[-1], user)
        pipe.expire(keys[-1], _ttl())
        pipe.zadd(seen_key(), {user: now})
        pipe.zremrangebyscore(seen_key(), "-inf", f"({start}")
        pipe.zadd(devices_key(user), {device: now})
        pipe.expire(devices_key(user), _ttl())

    transaction(resolve_client(client), seen_key(), queue)


def online_users(
    *, method: Method = "seen", client: Client | None = None, clock: Clock = time.time
) -> set[str]:
    """Return the users active in the window, by either method (same answer)."""
    check_choice(method, "method", METHODS)
    keys, start = _window(clock())
    client = resolve_client(client)
    if method == "minutes":
        members = client.sunion(keys)
    else:  # "seen"
        members = client.zrangebyscore(seen_key(), start, "+inf")
    return {member.decode() for member in members}


def online_page(
    offset: int = 0, count: int = 100, *, client: Client | None = None, clock: Clock = time.time
) -> tuple[list[str], int]:
    """Return up to ``count`` online users from ``offset``, the most recently active first,
    and how many are online in all (the last-seen set: two commands, however many there are).
    """
    offset = check_int(offset, "offset", minimum=0)
    count = check_count(count, "count", maximum=MAX_PAGE)
    _keys, start = _window(clock())
    pipe = resolve_client(client).pipeline(transaction=False)
    pipe.zrevrangebyscore(seen_key(), "+inf", start, start=offset, num=count)
    pipe.zcount(seen_key(), start, "+inf")
    users, total = pipe.execute()
    return [user.decode() for user in users], int(total)


def is_online(user: str, *, client: Client | None = None, clock: Clock = time.time) -> bool:
    """Return whether ``user`` was active in the window."""
    user = validate_key_part(user, "user")
    start = _window_start(clock())
    client = resolve_client(client)
    seen = client.zscore(seen_key(), user)
    return seen is not None and seen >= start


def logout(
    user: str,
    device: str = DEFAULT_DEVICE,
    *,
    client: Client | None = None,
    clock: Clock = time.time,
) -> bool:
    """Forget ``device``; return True if the user is now offline (no other device active)."""
    user = validate_key_part(user, "user")
    device = validate_key_part(device, "device")
    keys, start = _window(clock())
    client = resolve_client(client)
    offline = lua.script(client, "presence_logout")(
        keys=[devices_key(user), seen_key(), *keys], args=[user, device, start]
    )
    return bool(offline)


def add_friend(user: str, friend: str, *, client: Client | None = None) -> None:
    """Make ``user`` and ``friend`` friends of each other."""
    _change_friendship("sadd", user, friend, client)


def remove_friend(user: str, friend: str, *, client: Client | None = None) -> None:
    """End the friendship of ``user`` and ``friend`` (both directions)."""
    _change_friendship("srem", user, friend, client)


def _change_friendship(command: str, user: str, friend: str, client: Client) -> None:
    """Apply SADD or SREM to both friends sets in one MULTI."""
    user = validate_key_part(user, "user")
    friend = validate_key_part(friend, "friend")
    if user == friend:
        raise InvalidArgument(
            "friend", friend, "must differ from the user: nobody befriends themselves"
        )

    def queue(pipe: Any) -> None:
        getattr(pipe, command)(friends_key(user), friend)
        getattr(pipe, command)(friends_key(friend), user)

    transaction(resolve_client(client), friends_key(user), queue)


def friends(user: str, *, client: Client | None = None) -> set[str]:
    """Return the friends of ``user``."""
    user = validate_key_part(user, "user")
    client = resolve_client(client)
    return {member.decode() for member in client.smembers(friends_key(user))}


def online_friends(
    user: str, *, method: Method = "minutes", client: Client | None = None, clock: Clock = time.time
) -> set[str]:
    """Return the friends of ``user`` active in the window, computed atomically in one script.

    ``minutes`` unions the window's sets into a temporary key, intersects it with
    the friends set and deletes it in the same script; ``seen`` checks each
    friend's last-seen score.
    """
    user = validate_key_part(user, "user")
    check_choice(method, "method", METHODS)
    keys, start = _window(clock())
    client = resolve_client(client)
    if method == "minutes":
        temporary = make_key(COMPONENT, TAG, "tmp", uuid.uuid4().hex)
        members = lua.script(client, "presence_online_friends")(
            keys=[friends_key(user), temporary, *keys], args=[]
        )
    else:  # "seen"
        members = lua.script(client, "presence_online_friends_seen")(
            keys=[friends_key(user), seen_key()], args=[start]
        )
    return {member.decode() for member in members}
