"""Registries: the names each component has in use, so that nothing on a request path or
a scrape walks the keyspace with SCAN.

Import: ``from redisparts_app.services import registry``.

Key (one per component; ``<component>`` is ``lock``, ``semaphore``, ``chat``, ``queue``,
``ac``, ``config``, ``log``, ``stats`` or ``files``)::

    rp:registry:{<component>}:names   zset: name -> when a process last noted it (Unix s)

A component calls ``note(component, name)`` after the write that makes the thing exist;
the ZADD is sent at most once per ``NOTE_INTERVAL`` seconds per process, client and name.
Readers list the names (``names``, ``page``) and read the things themselves; ``prune``
forgets names nobody noted for ``2 * NOTE_INTERVAL`` seconds whose thing is gone.
Guarantee: a name in use is never forgotten (the pruning script checks its score again);
a listing costs the number of names in use, never the size of the keyspace. Every call but
``rebuild`` (a SCAN walk, for maintenance) has an async twin named with an ``a``. Bounds
and recovery after a flush: docs/howto/cluster.md.
"""

import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .. import faces
from ..conf import app_settings
from ..connection import Client, is_pipeline, resolve_client
from ..keys import make_key, scan_keys
from ..validation import check_choice, check_int, check_page_size

__all__ = [
    "COMPONENTS",
    "NOTE_INTERVAL",
    "aexisting",
    "aforget",
    "anames",
    "anote",
    "apage",
    "aprune",
    "existing",
    "forget",
    "forget_command",
    "forget_noted",
    "names",
    "note",
    "note_command",
    "noting",
    "page",
    "prune",
    "rebuild",
    "registry_key",
]

COMPONENTS = ("lock", "semaphore", "chat", "queue", "ac", "config", "log", "stats", "files")
NOTE_INTERVAL = 60.0
# The most names ``page`` returns at once.
_MAX_PAGE_SIZE = 1000
# Entries of the note cache before it is cleared (names that are used once, like per-order
# lock names, would otherwise grow it without end).
_NOTED_MAX = 100_000

# Per client (weakly: a client that is gone takes its notes along), when each
# (component, name) was last noted by this process.
_noted: "weakref.WeakKeyDictionary[Any, dict[tuple[str, str], float]]" = weakref.WeakKeyDictionary()
_noted_guard = threading.Lock()
# The client noted last and its notes: most processes use one client, and a lookup in
# ``_noted`` makes a weak reference per call, on the hot paths that note (a lock's use).
_last: tuple[Callable[[], Any], dict[tuple[str, str], float]] = (lambda: None, {})


def registry_key(component: str) -> str:
    """The key of ``component``'s registry; an unknown component is refused (InvalidArgument)."""
    return make_key("registry", check_choice(component, "component", COMPONENTS), "names")


def note(component: str, name: str, *, client: Client | None = None) -> None:
    """Record that ``name`` of ``component`` is in use (sent at most once a NOTE_INTERVAL).

    On a pipeline the ZADD is queued every time, to go with the pipeline's other commands.
    """
    faces.run(noting(component, name), resolve_client(client))


async def anote(component: str, name: str, *, client: Client | None = None) -> None:
    """The async twin of ``note``."""
    await faces.arun(noting(component, name), client)


def noting(component: str, name: str) -> faces.Steps[None]:
    """The core of ``note``, for the cores of the services that note a name."""
    client = yield faces.CLIENT
    if recently_noted(client, component, name):
        return
    now = time.monotonic()
    yield note_command(component, name)
    if is_pipeline(client):  # queued with the pipeline's other commands every time
        return
    global _last
    with _noted_guard:
        noted = _noted.setdefault(client, {})
        if len(noted) >= _NOTED_MAX:
            noted.clear()
        noted[(component, name)] = now
        _last = (weakref.ref(client), noted)


def recently_noted(client: Any, component: str, name: str) -> bool:
    """Whether this process noted ``name`` on ``client`` less than NOTE_INTERVAL ago (a
    pipeline never was: ``noting`` queues its ZADD every time). For a hot path that skips
    ``noting`` when it has nothing to send."""
    ref, noted = _last
    if ref() is not client:
        noted = _noted.get(client)  # type: ignore[assignment]
        if noted is None:
            return False
    last = noted.get((component, name))
    return last is not None and time.monotonic() - last < NOTE_INTERVAL


def note_command(component: str, name: str) -> faces.Op:
    """The ZADD that notes ``name`` now, for a core's pipeline (sent every time)."""
    return faces.command("zadd", registry_key(component), {name: time.time()})


def forget_command(component: str, name: str) -> faces.Op:
    """The ZREM of ``forget``, for a core's pipeline."""
    return faces.command("zrem", registry_key(component), name)


def forget(component: str, name: str, *, client: Client | None = None) -> None:
    """Forget ``name`` at once, for a component that deleted its thing itself (a chat's
    last member left). The thing's next use registers it again."""
    faces.run(forget_command(component, name), resolve_client(client))


async def aforget(component: str, name: str, *, client: Client | None = None) -> None:
    """The async twin of ``forget``."""
    await faces.arun(forget_command(component, name), client)


def forget_noted() -> None:
    """Make this process note every name again at its next use (after a flush, in tests)."""
    global _last
    with _noted_guard:
        _noted.clear()
        _last = (lambda: None, {})


def names(component: str, *, client: Client | None = None) -> list[str]:
    """Every registered name of ``component``, sorted."""
    return faces.run(_names(component), resolve_client(client))


async def anames(component: str, *, client: Client | None = None) -> list[str]:
    """The async twin of ``names``."""
    return await faces.arun(_names(component), client)


def _names(component: str) -> faces.Op:
    return faces.command("zrange", registry_key(component), 0, -1, then=_sorted)


def page(
    component: str, cursor: int = 0, count: int = 50, *, client: Client | None = None
) -> tuple[list[str], int]:
    """Up to ``count`` names from position ``cursor`` (sorted within the page) and the next
    cursor, 0 at the end. Names added or forgotten meanwhile may shift a page by as many."""
    return faces.run(_page(component, cursor, count), resolve_client(client))


async def apage(
    component: str, cursor: int = 0, count: int = 50, *, client: Client | None = None
) -> tuple[list[str], int]:
    """The async twin of ``page``."""
    return await faces.arun(_page(component, cursor, count), client)


def _page(component: str, cursor: int, count: int) -> faces.Op:
    check_int(cursor, "cursor", minimum=0)
    check_page_size(count, "count", maximum=_MAX_PAGE_SIZE)
    key = registry_key(component)

    def paged(found: list[bytes]) -> tuple[list[str], int]:
        return _sorted(found), cursor + count if len(found) == count else 0

    return faces.command("zrange", key, cursor, cursor + count - 1, then=paged)


def existing(
    component: str,
    key_of: Callable[[str], str | Sequence[str]],
    candidates: Sequence[str] | None = None,
    *,
    client: Client | None = None,
) -> list[str]:
    """Return which of ``candidates`` (default: every registered name) still have a key
    in Redis, sorted; ``key_of(name)`` gives the key, or several keys of one slot, to look
    for. One pipeline of EXISTS; the names found gone for good are forgotten (``prune``)."""
    return faces.run(_existing(component, key_of, candidates), resolve_client(client))


async def aexisting(
    component: str,
    key_of: Callable[[str], str | Sequence[str]],
    candidates: Sequence[str] | None = None,
    *,
    client: Client | None = None,
) -> list[str]:
    """The async twin of ``existing``."""
    return await faces.arun(_existing(component, key_of, candidates), client)


def _existing(
    component: str,
    key_of: Callable[[str], str | Sequence[str]],
    candidates: Sequence[str] | None,
) -> faces.Steps[list[str]]:
    wanted = (yield _names(component)) if candidates is None else list(candidates)
    if not wanted:
        return []
    checks = []
    for name in wanted:
        key = key_of(name)
        checks.append(faces.command("exists", *([key] if isinstance(key, str) else key)))
    counts = yield faces.pipeline(checks)
    found = {name for name, count in zip(wanted, counts, strict=True) if count}
    yield from _prune(component, lambda stale: [name in found for name in stale], wanted)
    return sorted(found)


def prune(
    component: str,
    alive: Callable[[list[str]], Iterable[bool]],
    candidates: Iterable[str] | None = None,
    *,
    client: Client | None = None,
) -> int:
    """Forget the names among ``candidates`` (default: all) that nobody noted for two
    NOTE_INTERVALs and whose thing ``alive`` (given the names, one bool each) says is gone.
    Return how many were forgotten."""
    return faces.run(_prune(component, alive, candidates), resolve_client(client))


async def aprune(
    component: str,
    alive: Callable[[list[str]], Iterable[bool]],
    candidates: Iterable[str] | None = None,
    *,
    client: Client | None = None,
) -> int:
    """The async twin of ``prune`` (``alive`` stays a plain function)."""
    return await faces.arun(_prune(component, alive, candidates), client)


def _prune(
    component: str,
    alive: Callable[[list[str]], Iterable[bool]],
    candidates: Iterable[str] | None,
) -> faces.Steps[int]:
    key = registry_key(component)
    cutoff = time.time() - 2 * NOTE_INTERVAL
    stale = _decoded((yield faces.command("zrangebyscore", key, "-inf", cutoff)))
    if candidates is not None:
        wanted = set(candidates)
        stale = [name for name in stale if name in wanted]
    gone = [name for name, up in zip(stale, alive(stale), strict=True) if not up]
    if not gone:
        return 0
    return int((yield faces.script("registry_forget", [key], [cutoff, *gone])))


def _decoded(found: list[bytes]) -> list[str]:
    return [name.decode() for name in found]


def _sorted(found: list[bytes]) -> list[str]:
    return sorted(_decoded(found))


# What each component's keys look like, for ``rebuild``: the name is the hash tag, and
# for configurations and statistics the tag and the part after it.
_SHAPES = {
    "lock": r"\{([^{}]+)\}:owner",
    "semaphore": r"\{([^{}]+)\}:holders",
    "chat": r"\{([^{}]+)\}:members",
    "files": r"\{([^{}]+)#\d+\}:chunk:0",
    "queue": r"\{([^{}]+)\}:queues",
    "ac": r"\{([^{}]+)\}:names",
    "config": r"\{([^{}]+)\}:([^:{}]+)",
    "log": r"\{([^{}]+)\}:recent:[a-z]+",
    "stats": r"\{([^{}]+)\}:([^:{}]+)",
}


def rebuild(
    *, client: Client | None = None, progress: Callable[[int], object] | None = None
) -> dict[str, int]:
    """Register every name found in the keyspace (one SCAN walk: a maintenance step, for
    data written before the registries or by code outside the services). Return how many
    names each component has found; ``progress(keys)`` is called after each batch."""
    client = resolve_client(client)
    prefix = re.escape(app_settings.KEY_PREFIX)
    shapes = {
        component: re.compile(rf"^{prefix}:{component}:{shape}$")
        for component, shape in _SHAPES.items()
    }
    found: dict[str, set[str]] = {component: set() for component in COMPONENTS}
    batch = 0
    start = len(app_settings.KEY_PREFIX) + 1
    for key in scan_keys(client, f"{app_settings.KEY_PREFIX}:*"):
        text = key.decode("utf-8", "replace")
        component = text[start:].split(":", 1)[0]
        match = shapes[component].match(text) if component in shapes else None
        if match:
            found[component].add(":".join(match.groups()))
        batch += 1
        if progress is not None and batch == 1000:
            progress(batch)
            batch = 0
    if progress is not None and batch:
        progress(batch)
    now = time.time()
    pipe = client.pipeline(transaction=False)
    for component, names_found in found.items():
        if names_found:
            pipe.zadd(registry_key(component), dict.fromkeys(names_found, now))
    pipe.execute()
    return {component: len(names_found) for component, names_found in found.items()}
