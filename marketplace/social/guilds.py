"""Guilds of the demo site: the address books of ``services.autocomplete``.

A guild exists while its address book has members; a user belongs to it when
their user name is one of those members. The list of guilds is found with
SCAN over the address books' name hashes (``rp:ac:{<guild>}:names``), which
is fine for a demo's handful of guilds; a site with many would keep a registry.
"""

from django.contrib.auth import get_user_model

from redisparts_app.connection import get_redis
from redisparts_app.keys import make_key, scan_keys, validate_key_part
from redisparts_app.services.autocomplete import COMPONENT, AddressBook, RecentContacts, suggest


def all_guilds() -> list[str]:
    """Return the names of every guild with members, sorted."""
    pattern = make_key(COMPONENT, "*", "names")
    head, tail = pattern.split("*")
    names = set()
    for key in scan_keys(get_redis(), pattern):
        text = key.decode("utf-8", "replace")
        if text.startswith(head) and text.endswith(tail):
            names.add(text[len(head) : -len(tail)])
    return sorted(names, key=str.casefold)


def user_guilds(username: str, guilds: list[str] | None = None) -> list[str]:
    """Return the guilds ``username`` belongs to (among ``guilds``, default all), sorted."""
    return [g for g in (all_guilds() if guilds is None else guilds) if username in AddressBook(g)]


def share_a_guild(username: str, other: str) -> bool:
    """Tell whether two users are members of one same guild."""
    return any(other in AddressBook(guild) for guild in user_guilds(username))


def recipient_suggestions(username: str, prefix: str, limit: int = 10) -> list[str]:
    """Names to offer ``username`` typing ``prefix`` in a recipient field.

    Recent contacts first, then the members of each of the user's guilds, then
    the most picked names (``autocomplete.suggest`` per guild); the user is left out.
    """
    guilds = user_guilds(username)
    found: dict[str, None] = {}
    sources = [suggest(username, guild, prefix, limit + 1) for guild in guilds]
    if not sources:
        sources = [RecentContacts(username).complete(prefix, limit + 1)]
    for names in sources:
        for name in names:
            if name != username:
                found.setdefault(name, None)
    return list(found)[:limit]


def existing_user(value: str, kind: str = "user") -> str:
    """Return the user name ``value`` if such a user exists, else raise ValueError."""
    name = validate_key_part(value, kind)
    if not get_user_model().objects.filter(username=name).exists():
        raise ValueError(f"there is no user named {name!r}")
    return name
