"""Guilds of the demo site: the address books of ``services.autocomplete``.

A guild exists while its address book has members; a user belongs to it when
their user name is one of those members. The guilds come from the address books'
registry and a user's guilds from their set of books (``autocomplete.books_of``):
no request walks the keyspace, and a keystroke in a recipient field costs the same
with three guilds or three thousand.
"""

from django.contrib.auth import get_user_model

from redisparts_app.keys import make_key, validate_key_part
from redisparts_app.services import registry
from redisparts_app.services.autocomplete import (
    COMPONENT,
    RecentContacts,
    books_of,
    suggest,
)


def all_guilds() -> list[str]:
    """Return the names of every guild with members, sorted."""
    found = registry.existing(COMPONENT, lambda guild: make_key(COMPONENT, guild, "names"))
    return sorted(found, key=str.casefold)


def user_guilds(username: str, guilds: list[str] | None = None) -> list[str]:
    """Return the guilds ``username`` belongs to (among ``guilds``, default all), sorted."""
    mine = books_of(username)
    if guilds is not None:
        wanted = set(guilds)
        mine = [guild for guild in mine if guild in wanted]
    return sorted(mine, key=str.casefold)


def share_a_guild(username: str, other: str) -> bool:
    """Tell whether two users are members of one same guild."""
    return not set(books_of(username)).isdisjoint(books_of(other))


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
