"""Event counters at several precisions, and the cleaner that bounds them.

Import: ``from redisparts_app.services.counters import update_counter, get_counter``.

``update_counter("hits")`` adds to one bucket per precision in
``REDISPARTS["COUNTER_PRECISIONS"]`` (seconds); a bucket is named by its start,
``int(now // precision) * precision`` in epoch seconds. ``get_counter("hits", 60)``
returns the ``(bucket start, count)`` series, oldest first. Async twins: ``aupdate_counter``,
``aget_counter``, on the same core (``faces``). Keys::

    rp:counter:{<name>}:<precision>   hash bucket start -> count, one per precision
    rp:counters:{index}:known         zset of "<precision>:<name>" (score: precision)

An update is one pipeline, the HINCRBYs and EXPIREs before the ZADD to the index (two round
trips on a Cluster, to keep that order). Each hash expires ``precision * (COUNTER_SAMPLES +
1)`` seconds after its last update. ``clean_counters()`` (``manage.py rp_clean_counters``)
keeps the newest ``COUNTER_SAMPLES`` buckets of each hash, one atomic script per hash.
Guarantee: forgetting an empty counter never races a write away: the cleaner removes the
index entry, looks at the hash again and puts the entry back if a write arrived.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from .. import faces, lua
from ..conf import app_settings, positive_int_setting
from ..connection import Client, is_cluster, resolve_client
from ..keys import make_key
from ..validation import check_choice, check_int, check_key_part

__all__ = [
    "CleanReport",
    "aget_counter",
    "aindex_size",
    "aupdate_counter",
    "clean_counters",
    "counter_key",
    "get_counter",
    "index_key",
    "index_size",
    "known_counters",
    "precisions",
    "sample_count",
    "update_counter",
]

# Beyond 2**53 counts lose integer precision in JSON and JavaScript charts.
MAX_COUNT = 2**53


@dataclass
class CleanReport:
    """What one pass of the cleaner did."""

    checked: int = 0  # counter hashes looked at
    trimmed: int = 0  # samples deleted
    forgotten: int = 0  # index entries removed (empty counters)


def precisions() -> list[int]:
    """Return the configured precisions (seconds), smallest first; validate them."""
    values = app_settings.COUNTER_PRECISIONS
    if (
        not isinstance(values, list | tuple)
        or not values
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)
    ):
        raise ImproperlyConfigured(
            f"REDISPARTS['COUNTER_PRECISIONS'] must be a non-empty list of positive "
            f"integers (seconds), got {values!r}"
        )
    return sorted(set(values))


def sample_count() -> int:
    """Return COUNTER_SAMPLES, the buckets the cleaner keeps per precision."""
    return positive_int_setting("COUNTER_SAMPLES")


def update_counter(
    name: str,
    count: int = 1,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> None:
    """Add ``count`` (may be negative) to the current bucket of every precision of ``name``.

    The time comes from ``clock`` (epoch seconds). One pipelined round trip (two on a
    Redis Cluster, to keep the increments before the index write). Given a pipeline as
    ``client``, the commands are queued on it and the caller executes them.
    """
    faces.run(_update_counter(name, count, clock), resolve_client(client))


async def aupdate_counter(
    name: str,
    count: int = 1,
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
) -> None:
    """The async twin of ``update_counter`` (``client``: a redis.asyncio client or None)."""
    await faces.arun(_update_counter(name, count, clock), client)


def _update_counter(name: str, count: int, clock: Callable[[], float]) -> faces.Steps[None]:
    name = _validate_name(name)
    check_int(count, "count", minimum=-MAX_COUNT, maximum=MAX_COUNT)
    now = clock()
    samples = sample_count()
    ops = []
    members = {}
    for precision in precisions():
        key = counter_key(name, precision)
        ops.append(faces.command("hincrby", key, int(now // precision) * precision, count))
        ops.append(faces.command("expire", key, precision * (samples + 1)))
        members[_member(name, precision)] = precision
    # After the increments: the cleaner's guarantee relies on this order.
    index = faces.command("zadd", index_key(), members)
    if is_cluster((yield faces.CLIENT)):
        # A cluster pipeline writes to every node at once: finish the increments first.
        yield faces.pipeline(ops)
        yield index
    else:  # one pipeline (or the caller's, which queues them)
        yield faces.pipeline([*ops, index])


def get_counter(
    name: str, precision: int, *, client: Client | None = None
) -> list[tuple[int, int]]:
    """Return the ``(bucket start, count)`` samples of ``name`` at ``precision``, oldest first."""
    return faces.run(_get_counter(name, precision), resolve_client(client))


async def aget_counter(
    name: str, precision: int, *, client: Client | None = None
) -> list[tuple[int, int]]:
    """The async twin of ``get_counter``."""
    return await faces.arun(_get_counter(name, precision), client)


def _get_counter(name: str, precision: int) -> faces.Op:
    name = _validate_name(name)
    check_choice(check_int(precision, "precision"), "precision (seconds)", precisions())
    return faces.command(
        "hgetall",
        counter_key(name, precision),
        then=lambda data: sorted((int(start), int(value)) for start, value in data.items()),
    )


def known_counters(*, client: Client | None = None) -> dict[str, list[int]]:
    """Return the indexed counters: name -> precisions (seconds), both sorted."""
    client = resolve_client(client)
    found: dict[str, list[int]] = {}
    for member, _score in client.zscan_iter(index_key(), count=500):
        parsed = _parse_member(member)
        if parsed is not None:
            found.setdefault(parsed[1], []).append(parsed[0])
    return {name: sorted(found[name]) for name in sorted(found)}


def clean_counters(
    *,
    client: Client | None = None,
    clock: Callable[[], float] = time.time,
    pass_number: int = 0,
    interval: float = 60.0,
    progress: Callable[[int], None] | None = None,
) -> CleanReport:
    """Run one cleaning pass over the indexed counters and return what it did.

    A precision of ``p`` seconds is cleaned on passes where ``pass_number`` is a multiple
    of ``p // interval`` (every pass when ``p <= interval``), so a cleaner looping every
    ``interval`` seconds does not rescan daily counters every minute. ``progress`` is
    called with 1 after each index entry.
    """
    client = resolve_client(client)
    samples = sample_count()
    trim = lua.script(client, "counter_trim")
    report = CleanReport()
    index = index_key()
    # ZSCAN returns every entry present for the whole scan, even while others change.
    for member, _score in client.zscan_iter(index, count=500):
        parsed = _parse_member(member)
        if parsed is None:
            client.zrem(index, member)  # not written by this module
        elif pass_number % max(1, int(parsed[0] // interval)) == 0:
            precision, name = parsed
            key = counter_key(name, precision)
            bucket = int(clock() // precision) * precision
            cutoff = bucket - (samples - 1) * precision
            deleted, left = trim(keys=[key], args=[cutoff])
            report.checked += 1
            report.trimmed += int(deleted)
            if int(left) == 0:
                report.forgotten += _forget(client, index, member, key, precision)
        if progress is not None:
            progress(1)
    return report


def index_size(*, client: Client | None = None) -> int:
    """Return the number of index entries (counter hashes known to the cleaner)."""
    return faces.run(_index_size(), resolve_client(client))


async def aindex_size(*, client: Client | None = None) -> int:
    """The async twin of ``index_size``."""
    return await faces.arun(_index_size(), client)


def _index_size() -> faces.Op:
    return faces.command("zcard", index_key(), then=int)


def counter_key(name: str, precision: int) -> str:
    """Return the hash key of counter ``name`` (already validated) at ``precision``."""
    return make_key("counter", name, str(precision))


def index_key() -> str:
    """Return the key of the known-counters index."""
    return make_key("counters", "index", "known")


def _forget(client: Client, index: str, member: bytes, key: str, precision: int) -> int:
    """Remove an empty counter from the index unless a write arrived; return 1 if removed."""
    client.zrem(index, member)
    # A write that reached the hash before this look is re-indexed here; a later one
    # re-adds the entry itself with its ZADD, which follows its increment.
    if client.exists(key):
        client.zadd(index, {member: precision})
        return 0
    return 1


def _member(name: str, precision: int) -> str:
    return f"{precision}:{name}"


def _parse_member(member: bytes) -> tuple[int, str] | None:
    precision, _, name = member.decode("utf-8", "replace").partition(":")
    if not (precision.isascii() and precision.isdigit()) or not name or int(precision) < 1:
        return None
    return int(precision), name


def _validate_name(name: str) -> str:
    return check_key_part(name, "counter name")
