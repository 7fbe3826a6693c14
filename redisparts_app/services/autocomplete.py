"""Autocomplete: a user's recent contacts and a guild's address book.

Import: ``from redisparts_app.services.autocomplete import AddressBook, RecentContacts``.

``RecentContacts`` keeps a per-user list, most recent first, capped at
``AUTOCOMPLETE_RECENT_MAX``; ``AddressBook`` completes the names of a guild's members in
Redis, each indexed under its folded form (NFKD, marks removed, casefolded) once per word
start, by one of two methods that give the same answers: ``"lex"`` (default, one
ZRANGEBYLEX) or ``"book"`` (the book's sentinels under WATCH). ``suggest`` merges recent
contacts, guild members and the most picked names. Keys (``{user}`` and ``{guild}`` pass
``keys.validate_key_part``; each call's keys share one hash tag, so a Cluster runs it)::

    rp:ac:{<user>}:recent    list of contact names, most recent first
    rp:ac:{<user>}:picks     zset: contact name -> times picked (capped)
    rp:ac:{<guild>}:members  zset, score 0: "<folded word start>\\0<name>"
    rp:ac:{<guild>}:names    hash: name -> its folded word starts joined by "\\0"

Guarantee: each answer comes from one consistent read; names are stored as UTF-8 in NFC
form; nothing blocks or expires. Every lookup and write has an async twin named with an
``a`` on the same core (``faces``); bulk loading and ``purge_sentinels`` are sync only.
"""

import random
import time
import unicodedata
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from redis.exceptions import WatchError

from .. import faces, keys, lua
from ..conf import SettingsCache, app_settings
from ..connection import Client, on_slot, resolve_client
from ..exceptions import CompletionConflict, InvalidArgument, InvalidArgumentType
from ..validation import check_choice, check_count, check_page_size
from . import registry

__all__ = [
    "METHODS",
    "AddressBook",
    "RecentContacts",
    "asuggest",
    "fold",
    "matches",
    "suggest",
    "validate_limit",
    "validate_name",
    "validate_prefix",
    "word_starts",
]

COMPONENT = "ac"
METHODS = ("lex", "book")
# Removed when folding: combining marks (accents) and format characters (ZWJ, ZWNJ).
_FOLD_DROP = frozenset({"Mn", "Me", "Cf"})
# Refused in names: controls (so no NUL), surrogates, private use, unassigned, line
# and paragraph separators; format characters (Cf) too, but for ZWNJ and ZWJ, which
# Persian words and emoji sequences need.
_NAME_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cs", "Co", "Cn", "Zl", "Zp"})
_NAME_ALLOWED_FORMAT = frozenset({"\u200c", "\u200d"})
# Sentinels carry two NUL bytes; real entries hold exactly one (folded text has none).
SENTINEL_MARK = b"\x00\x00"
_AFTER_ANY_UTF8 = b"\xff"  # a byte that never occurs in UTF-8
_MAX_LIMIT = 1000


def fold(text: str) -> str:
    """Return the matching form of ``text``: NFKD, marks removed, casefolded.

    "Hôtel" -> "hotel", "ZOË" -> "zoe", "Straße" -> "strasse"; Chinese is unchanged.
    """
    if text.isascii():
        return text.lower()  # what the general path gives ASCII, without NFKD
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(c for c in decomposed if unicodedata.category(c) not in _FOLD_DROP)
    # Casefolding can yield new combining marks ("İ" -> "i̇"), so decompose and strip again.
    folded = unicodedata.normalize("NFKD", stripped.casefold())
    return "".join(c for c in folded if unicodedata.category(c) not in _FOLD_DROP)


def word_starts(folded: str) -> list[str]:
    """Return ``folded`` from each word start on: "anna lee" -> ["anna lee", "lee"]."""
    return [
        folded[i:]
        for i, char in enumerate(folded)
        if char != " " and (i == 0 or folded[i - 1] == " ")
    ]


def matches(name: str, query: str) -> bool:
    """Tell whether ``name`` completes ``query``, a prefix folded by validate_prefix.

    A name matches when the folded text from one of its word starts begins with it.
    """
    return any(start.startswith(query) for start in word_starts(fold(name)))


def validate_name(value: object, kind: str = "name") -> str:
    """Return ``value`` in NFC form if it is a usable contact or member name, else raise.

    Raise InvalidArgument (a ValueError; also a TypeError for a non-string) for an
    empty or over-long name (``AUTOCOMPLETE_NAME_MAX_LENGTH`` characters), one
    starting or ending with a space, control or other invisible characters, or a
    name with nothing to match on once folded.
    """
    text = _checked_text(value, kind)
    if not text:
        raise InvalidArgument(kind, value, "must not be empty")
    if text != text.strip(" "):
        raise InvalidArgument(kind, value, "must not start or end with a space")
    if not word_starts(fold(text)):
        raise InvalidArgument(kind, value, "has no letters, digits or symbols to match on")
    return text


def validate_prefix(value: object) -> str:
    """Return the folded query for a typed prefix ("" matches every name).

    Raise InvalidArgument (also a TypeError for a non-string) for an over-long
    prefix or one with control characters.
    """
    if (
        type(value) is str
        and value.isascii()
        and value.isprintable()
        and len(value) <= app_settings.AUTOCOMPLETE_NAME_MAX_LENGTH
    ):
        return value.lower().lstrip(" ")  # what the checks and fold() give printable ASCII
    return fold(_checked_text(value, "prefix")).lstrip(" ")


# Prefixes looked up lately and what a lookup needs of them (``_query``). Checking and
# folding a prefix is a good part of the Python a lookup costs, and users type the same
# few short prefixes over and over (the length check reads the settings).
_queries: SettingsCache[str, tuple[bytes, bytes, bytes, str]] = SettingsCache()


def _query(prefix: object) -> tuple[bytes, bytes, bytes, str]:
    """Return the query of ``prefix`` (``validate_prefix``) as UTF-8, the bounds of a
    ZRANGEBYLEX over the entries starting with it (``[query``, ``(query\\xff``), and the
    query after a space (``_distinct_names``)."""
    if type(prefix) is not str:
        return _fold_query(prefix)  # raises
    found = _queries.get(prefix)
    if found is None:
        found = _queries.remember(prefix, _fold_query(prefix))
    return found


def _fold_query(prefix: object) -> tuple[bytes, bytes, bytes, str]:
    folded = validate_prefix(prefix)
    query = folded.encode()
    return query, b"[" + query, b"(" + query + _AFTER_ANY_UTF8, " " + folded


def validate_limit(value: object, default: int) -> int:
    """Return ``value`` (or ``default`` when None) if it is an int from 1 to 1000."""
    return check_page_size(value, "limit", maximum=_MAX_LIMIT, default=default)


def _checked_text(value: object, kind: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentType(kind, value, f"must be a string, got {type(value).__name__}")
    limit = app_settings.AUTOCOMPLETE_NAME_MAX_LENGTH
    if len(value) > limit:
        raise InvalidArgument(kind, value, f"longer than {limit} characters; shorten it")
    if value.isascii() and value.isprintable():
        return value  # NFC already, and no control or invisible character
    text = unicodedata.normalize("NFC", value)
    for char in text:
        category = unicodedata.category(char)
        invisible = category == "Cf" and char not in _NAME_ALLOWED_FORMAT
        if category in _NAME_FORBIDDEN_CATEGORIES or invisible or (char.isspace() and char != " "):
            name = unicodedata.name(char, f"U+{ord(char):04X}")
            raise InvalidArgument(kind, value, f"control or invisible character {name}")
    return text


def _decode(names: Iterable[bytes]) -> list[str]:
    return [name.decode("utf-8") for name in names]


class RecentContacts:
    """The contacts one user picked lately, most recent first, and how often.

    Keys: ``rp:ac:{user}:recent`` (list) and ``rp:ac:{user}:picks`` (zset).
    ``max_size`` defaults to ``REDISPARTS["AUTOCOMPLETE_RECENT_MAX"]``.
    """

    def __init__(
        self, user: str, *, client: Client | None = None, max_size: int | None = None
    ) -> None:
        self.user = keys.validate_key_part(user, "user")
        size = app_settings.AUTOCOMPLETE_RECENT_MAX if max_size is None else max_size
        check_count(size, "max_size")
        self.max_size = size
        self.client, self.aclient = faces.clients(client)
        self.recent_key = keys.make_key(COMPONENT, self.user, "recent")
        self.picks_key = keys.make_key(COMPONENT, self.user, "picks")

    def add(self, contact: str) -> int:
        """Move ``contact`` to the front (adding it if new), count one pick, return the count.

        One Lua script: LREM, LPUSH, LTRIM to ``max_size``, ZINCRBY; the pick counts
        keep the ``AUTOCOMPLETE_PICKS_MAX`` most picked names (never dropping this one).
        """
        return faces.run(self._add(contact), self.client)

    async def aadd(self, contact: str) -> int:
        """The async twin of ``add``."""
        return await faces.arun(self._add(contact), self.aclient)

    def _add(self, contact: str) -> faces.Op:
        name = validate_name(contact, "contact").encode()
        args = [name, self.max_size, app_settings.AUTOCOMPLETE_PICKS_MAX]
        return faces.script("autocomplete_add_contact", self._keys(), args)

    def remove(self, contact: str) -> bool:
        """Forget ``contact`` (recent list and pick count); tell whether it was listed."""
        return faces.run(self._remove(contact), self.client)

    async def aremove(self, contact: str) -> bool:
        """The async twin of ``remove``."""
        return await faces.arun(self._remove(contact), self.aclient)

    def _remove(self, contact: str) -> faces.Op:
        name = validate_name(contact, "contact").encode()
        return faces.script("autocomplete_remove_contact", self._keys(), [name], then=bool)

    def _keys(self) -> list[str]:
        return [self.recent_key, self.picks_key]

    def names(self) -> list[str]:
        """Return every recent contact, most recent first."""
        return faces.run(self._names(), self.client)

    async def anames(self) -> list[str]:
        """The async twin of ``names``."""
        return await faces.arun(self._names(), self.aclient)

    def _names(self) -> faces.Op:
        return faces.command("lrange", self.recent_key, 0, -1, then=_decode)

    def complete(self, prefix: str = "", limit: int | None = None) -> list[str]:
        """Return recent contacts matching ``prefix``, most recent first, as written.

        Matching is the address book's: folded (case and accents ignored), on any
        word start. At most ``limit`` names (default: all).
        """
        return faces.run(self._complete(prefix, limit), self.client)

    async def acomplete(self, prefix: str = "", limit: int | None = None) -> list[str]:
        """The async twin of ``complete``."""
        return await faces.arun(self._complete(prefix, limit), self.aclient)

    def _complete(self, prefix: str, limit: int | None) -> faces.Steps[list[str]]:
        query = validate_prefix(prefix)
        count = self.max_size if limit is None else validate_limit(limit, self.max_size)
        return _filter((yield self._names()), query, count)

    def most_picked(self, prefix: str = "", limit: int | None = None) -> list[str]:
        """Return the names picked most often that match ``prefix``, most picked first.

        Equal counts come in reverse byte order (ZREVRANGE).
        """
        return faces.run(self._most_picked(prefix, limit), self.client)

    async def amost_picked(self, prefix: str = "", limit: int | None = None) -> list[str]:
        """The async twin of ``most_picked``."""
        return await faces.arun(self._most_picked(prefix, limit), self.aclient)

    def _most_picked(self, prefix: str, limit: int | None) -> faces.Steps[list[str]]:
        query = validate_prefix(prefix)
        count = validate_limit(limit, app_settings.AUTOCOMPLETE_LIMIT)
        names = yield faces.command("zrevrange", self.picks_key, 0, -1, then=_decode)
        return _filter(names, query, count)

    def pick_count(self, contact: str) -> int:
        """Return how many times ``contact`` was added (0 when unknown or dropped)."""
        return faces.run(self._pick_count(contact), self.client)

    async def apick_count(self, contact: str) -> int:
        """The async twin of ``pick_count``."""
        return await faces.arun(self._pick_count(contact), self.aclient)

    def _pick_count(self, contact: str) -> faces.Op:
        name = validate_name(contact, "contact").encode()
        return faces.command("zscore", self.picks_key, name, then=lambda score: int(score or 0))


def _filter(names: list[str], query: str, limit: int) -> list[str]:
    return [name for name in names if matches(name, query)][:limit]


class AddressBook:
    """The members of one guild, completed by prefix.

    ``method`` is ``"lex"`` or ``"book"`` (default ``REDISPARTS["AUTOCOMPLETE_METHOD"]``).
    ``max_attempts`` bounds the book method's WATCH retries; ``clock`` (seconds)
    stamps its sentinels so ``purge_sentinels`` can tell old residue.
    Keys: ``rp:ac:{guild}:members`` (zset index) and ``rp:ac:{guild}:names`` (hash).
    """

    def __init__(
        self,
        guild: str,
        *,
        method: str | None = None,
        client: Client | None = None,
        max_attempts: int = 100,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.guild = keys.validate_key_part(guild, "guild")
        self.method = app_settings.AUTOCOMPLETE_METHOD if method is None else method
        check_choice(self.method, "method", METHODS)
        check_count(max_attempts, "max_attempts")
        self.client, self.aclient = faces.clients(client)
        self.max_attempts = max_attempts
        self.clock = clock
        self.index_key = keys.make_key(COMPONENT, self.guild, "members")
        self.names_key = keys.make_key(COMPONENT, self.guild, "names")
        # WATCH conflicts met by the book method on this object (for tests and benchmarks).
        self.conflicts = 0

    def join(self, name: str) -> bool:
        """Add ``name`` to the guild; return False when it was already a member."""
        return faces.run(self._join(name), self.client)

    async def ajoin(self, name: str) -> bool:
        """The async twin of ``join``."""
        return await faces.arun(self._join(name), self.aclient)

    def _join(self, name: str) -> faces.Steps[bool]:
        member = validate_name(name, "member")
        joined = bool(
            (yield faces.script("autocomplete_join", self._keys(), self._join_args(member)))
        )
        if joined:
            yield from self._index_members([member], joined=True)
        return joined

    def join_many(self, names: Iterable[str], batch_size: int = 500) -> int:
        """Add many names in pipelined batches; return how many were new.

        Every name is validated before anything is written.
        """
        members = [validate_name(name, "member") for name in names]
        added = 0
        with on_slot(self.client, self.index_key) as node:
            script = lua.script(node, "autocomplete_join")
            for first in range(0, len(members), batch_size):
                with node.pipeline(transaction=False) as pipe:
                    for member in members[first : first + batch_size]:
                        script(keys=self._keys(), args=self._join_args(member), client=pipe)
                    added += sum(pipe.execute())
        faces.run(self._index_members(members, joined=True), self.client)
        return added

    def leave(self, name: str) -> bool:
        """Remove ``name`` and its index entries; return False when it was not a member."""
        return faces.run(self._leave(name), self.client)

    async def aleave(self, name: str) -> bool:
        """The async twin of ``leave``."""
        return await faces.arun(self._leave(name), self.aclient)

    def _leave(self, name: str) -> faces.Steps[bool]:
        member = validate_name(name, "member")
        left = bool((yield faces.script("autocomplete_leave", self._keys(), [member.encode()])))
        if left:
            yield from self._index_members([member], joined=False)
        return left

    def reindex(self) -> int:
        """Register the guild and add it to every member's set of guilds (``books_of``),
        for books written before those sets existed; return the members seen."""
        members = [name.decode() for name in self.client.hkeys(self.names_key)]
        for first in range(0, len(members), 500):
            faces.run(self._index_members(members[first : first + 500], joined=True), self.client)
        return len(members)

    def _index_members(self, members: list[str], *, joined: bool) -> faces.Steps[None]:
        """Keep the guild in the registry and each member's set of guilds (``books_of``).

        After the book's own script, in one pipeline (members' keys are on other slots of
        a cluster). Members whose names cannot be a key part (``:``, braces...) have no
        such set.
        """
        yield from registry.noting(COMPONENT, self.guild)
        command = "sadd" if joined else "srem"
        ops = [
            faces.command(command, keys.make_key(COMPONENT, member, "books"), self.guild)
            for member in members
            if keys.is_key_part(member)
        ]
        if ops:
            yield faces.pipeline(ops)

    def __contains__(self, name: str) -> bool:
        return bool(self.client.hexists(self.names_key, validate_name(name, "member").encode()))

    def __len__(self) -> int:
        return self.client.hlen(self.names_key)

    def complete(
        self,
        prefix: str = "",
        limit: int | None = None,
        *,
        on_sentinels: Callable[[], None] | None = None,
        on_watched: Callable[[int], None] | None = None,
    ) -> list[str]:
        """Return up to ``limit`` member names completing ``prefix``, in order, as written.

        ``limit`` defaults to ``REDISPARTS["AUTOCOMPLETE_LIMIT"]`` (10). The book
        method raises CompletionConflict after ``max_attempts`` WATCH conflicts.
        ``on_sentinels()`` and ``on_watched(attempt)`` are test hooks of the book
        method, called once its sentinels are in place and after each attempt's
        watched reads.
        """
        if self.method != "lex":
            return faces.run(self._complete(prefix, limit, on_sentinels, on_watched), self.client)
        # The lex method's sync face without stepping a core, its common case inline (a
        # prefix looked up before, the default or an int limit in range): what the core
        # (``_complete_lex``) does, as direct calls.
        found = _queries.get(prefix) if type(prefix) is str else None
        query, low, high, spaced = found or _query(prefix)
        count = app_settings.AUTOCOMPLETE_LIMIT if limit is None else limit
        if type(count) is not int or not 0 < count <= _MAX_LIMIT:
            count = validate_limit(limit, app_settings.AUTOCOMPLETE_LIMIT)
        client, key = self.client, self.index_key
        # What client.zrangebylex(key, low, high, 0, count) sends (its body in redis-py 5
        # to 8), without its frame and argument checks: this is the hot path.
        members = client.execute_command(
            "ZRANGEBYLEX", key, low, high, b"LIMIT", 0, count, keys=[key]
        )
        names = _distinct_names(members, count, spaced)
        if len(names) == count or len(members) < count:
            return names
        return faces.run(self._lex_script(query, count), client)

    async def acomplete(
        self,
        prefix: str = "",
        limit: int | None = None,
        *,
        on_sentinels: Callable[[], None] | None = None,
        on_watched: Callable[[int], None] | None = None,
    ) -> list[str]:
        """The async twin of ``complete``."""
        core = self._complete(prefix, limit, on_sentinels, on_watched)
        return await faces.arun(core, self.aclient)

    def _complete(
        self,
        prefix: str,
        limit: int | None,
        on_sentinels: Callable[[], None] | None,
        on_watched: Callable[[int], None] | None,
    ) -> faces.Steps[list[str]]:
        # The core of the method, returned rather than delegated to: one generator per lookup.
        query, low, high, spaced = _query(prefix)
        count = validate_limit(limit, app_settings.AUTOCOMPLETE_LIMIT)
        if self.method == "lex":
            return self._complete_lex(query, low, high, spaced, count)
        return self._complete_book(query, spaced, count, on_sentinels, on_watched)

    def _complete_lex(
        self, query: bytes, low: bytes, high: bytes, spaced: str, limit: int
    ) -> faces.Steps[list[str]]:
        # One plain ZRANGEBYLEX of ``limit`` entries answers almost every lookup, and
        # costs the server less than a script call. Only a page short of
        # distinct names (a name matching on several words, sentinels) goes to the
        # script, which reads on in one snapshot: the answer comes from one read.
        members = yield faces.command("zrangebylex", self.index_key, low, high, 0, limit)
        names = _distinct_names(members, limit, spaced)
        if len(names) == limit or len(members) < limit:
            return names
        return (yield self._lex_script(query, limit))

    def _lex_script(self, query: bytes, limit: int) -> faces.Op:
        args = [query, limit, _page(limit)]
        return faces.script("autocomplete_lex", [self.index_key], args, then=_decode)

    def _complete_book(
        self,
        query: bytes,
        spaced: str,
        limit: int,
        on_sentinels: Callable[[], None] | None,
        on_watched: Callable[[int], None] | None,
    ) -> faces.Steps[list[str]]:
        token = f"{int(self.clock() * 1000)}-{uuid.uuid4().hex}".encode()
        # Entries are "<folded>\0<name>" and a name never starts with NUL, so "<query>\0\0..."
        # sorts after every entry below the query and before every entry starting with it;
        # "<query>\xff..." sorts after those (UTF-8 has no 0xFF) and before every entry above.
        start = query + SENTINEL_MARK + token
        end = query + _AFTER_ANY_UTF8 + SENTINEL_MARK + token
        sentinels = {start: 0, end: 0}
        page = _page(limit)
        yield faces.command("zadd", self.index_key, sentinels)
        placed = True
        try:
            if on_sentinels is not None:
                on_sentinels()
            for attempt in range(1, self.max_attempts + 1):
                if not placed:
                    yield faces.command("zadd", self.index_key, sentinels)
                    placed = True
                # What the transaction takes, set by ``writes`` once the ranks are read.
                taking = [0, 0]

                def writes(
                    ranks: list[Any],
                    attempt: int = attempt,
                    taking: list[int] = taking,
                    page: int = page,
                ) -> list[Any] | None:
                    low, high = ranks
                    if low is None or high is None:
                        return None  # a purge took them: put them back and retry
                    taking[:] = [min(high - low - 1, page), high - low - 1]
                    if on_watched is not None:
                        on_watched(attempt)
                    ops = [faces.command("zrem", self.index_key, start, end)]
                    # Once the start sentinel is gone, the first entry moves to rank ``low``.
                    if taking[0]:  # never ZRANGE 0 -1
                        ops.append(
                            faces.command("zrange", self.index_key, low, low + taking[0] - 1)
                        )
                    return ops

                reads = [
                    faces.command("zrank", self.index_key, start),
                    faces.command("zrank", self.index_key, end),
                ]
                try:
                    _ranks, replies = yield faces.watch(self.index_key, reads, writes)
                except WatchError:
                    self.conflicts += 1
                    # A short random pause lets the writer that won move on.
                    yield faces.sleep(random.uniform(0, min(0.05, 0.001 * attempt)))  # noqa: S311
                    continue
                placed = False
                if replies is None:
                    continue
                take, between = taking
                names = _distinct_names(replies[1] if take else [], limit, spaced)
                if len(names) == limit or take == between:
                    return names
                # Duplicates or other lookups' sentinels filled the page: read more.
                page *= 4
            raise CompletionConflict(self.guild, self.max_attempts)
        finally:
            if placed:
                yield faces.command("zrem", self.index_key, start, end)

    def purge_sentinels(self, older_than: float = 60.0) -> int:
        """Delete book-method sentinels stamped more than ``older_than`` seconds ago.

        Only a client killed mid-lookup leaves them; lookups skip them anyway, so
        this only reclaims memory. Return how many were deleted (SCAN-based).
        """
        cutoff_ms = (self.clock() - older_than) * 1000
        stale = []
        for member, _score in self.client.zscan_iter(self.index_key, match=b"*\x00\x00*"):
            stamp = member.split(SENTINEL_MARK, 1)[1].split(b"-", 1)[0]
            if not (stamp.isascii() and stamp.isdigit()) or int(stamp) < cutoff_ms:
                stale.append(member)
        if not stale:
            return 0
        return self.client.zrem(self.index_key, *stale)

    def _keys(self) -> list[str]:
        return [self.index_key, self.names_key]

    @staticmethod
    def _join_args(member: str) -> list[bytes]:
        return [member.encode(), *(start.encode() for start in word_starts(fold(member)))]


def _distinct_names(members: list[bytes], limit: int, spaced: str) -> list[str]:
    """Return the first ``limit`` distinct names of index entries, skipping sentinels.

    The entries start with a query; ``spaced`` is a space and that query (folded).
    """
    # Each entry holds one NUL and no name starts or ends with one, so without sentinels
    # (another lookup's, or a killed one's) the names are every second part of the
    # entries joined by NUL, decoded at once. A sentinel's two NULs add a part, and an
    # end sentinel's 0xFF is no UTF-8.
    try:
        text = b"\x00".join(members).decode()
    except UnicodeDecodeError:
        text = ""
    parts = text.split("\x00")
    if len(parts) == 2 * len(members):
        names = parts[1::2]
        # A name listed twice matches at two word starts, the second after a space: the
        # entry of the first holds a space and the query. Without one, no set is needed.
        if spaced not in text or len(set(names)) == len(names):
            return names if len(names) <= limit else names[:limit]
        return list(dict.fromkeys(names))[:limit]  # keeps first places
    # A sentinel leaves "\0<token>" after its first NUL, and no name starts with NUL.
    found = dict.fromkeys([m.partition(b"\x00")[2] for m in members])
    return [name.decode() for name in found if name[:1] != b"\x00"][:limit]


def _page(limit: int) -> int:
    # A little more than the limit: duplicates and sentinels rarely need a second page.
    return limit + 16


def suggest(
    user: str,
    guild: str,
    prefix: str = "",
    limit: int | None = None,
    *,
    method: str | None = None,
    client: Client | None = None,
) -> list[str]:
    """Return up to ``limit`` names for ``user`` typing ``prefix`` to a ``guild`` member.

    First the user's recent contacts (most recent first), then the guild's members
    (in address-book order), then the names the user picks most often; each name
    once. Three reads, not one snapshot. Keys: those of RecentContacts and AddressBook.
    """
    return faces.run(_suggest(user, guild, prefix, limit, method, client), resolve_client(client))


async def asuggest(
    user: str,
    guild: str,
    prefix: str = "",
    limit: int | None = None,
    *,
    method: str | None = None,
    client: Client | None = None,
) -> list[str]:
    """The async twin of ``suggest`` (``client``: a redis.asyncio client or None)."""
    return await faces.arun(_suggest(user, guild, prefix, limit, method, client), client)


def _suggest(
    user: str, guild: str, prefix: str, limit: int | None, method: str | None, client: Client
) -> faces.Steps[list[str]]:
    contacts = RecentContacts(user, client=client)
    book = AddressBook(guild, method=method, client=client)
    validate_prefix(prefix)
    count = validate_limit(limit, app_settings.AUTOCOMPLETE_LIMIT)
    found: dict[str, None] = {}
    sources = (
        contacts._complete(prefix, count),
        book._complete(prefix, count, None, None),
        contacts._most_picked(prefix, count),
    )
    for source in sources:
        for name in (yield from source):
            found.setdefault(name, None)
            if len(found) == count:
                return list(found)
    return list(found)


def books_of(member: str, *, client: Client | None = None) -> list[str]:
    """Return the guilds ``member`` belongs to, sorted: one SMEMBERS of the member's set of
    guilds, each checked against its book in one pipeline (so an entry a crash between a
    book's script and the set's update left behind is not returned)."""
    member = keys.validate_key_part(member, "member")
    client = resolve_client(client)
    guilds = sorted(g.decode() for g in client.smembers(keys.make_key(COMPONENT, member, "books")))
    if not guilds:
        return []
    pipe = client.pipeline(transaction=False)
    for guild in guilds:
        pipe.hexists(keys.make_key(COMPONENT, guild, "names"), member.encode())
    return [guild for guild, found in zip(guilds, pipe.execute(), strict=True) if found]
